"""Round steps that verify a position against the wrong target row, a target row computed on the
wrong context, or the wrong draft row."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _verify(xs, ps, qs, rng):
    """The chain rule on the rows given (``ps`` has gamma + 1 rows, ``qs`` gamma)."""
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


def target_same_context_every_position(prefix, draft, target, gamma, rng):
    """Every position of the verify block is scored with the same context (the committed prefix),
    so each draft and the bonus use target row 0.

    ml-explore/mlx-lm#1175 (B28): the MTP verify loop fed the same context to every position; the
    drafts never entered the target's input, so every logit row is p(. | prefix).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    row0 = target_rows(prefix, target, [])[0]
    ps = [row0] * (gamma + 1)  # BUG: the drafts are missing from the target's context
    return _verify(xs, ps, qs, rng)


def target_context_last_token_doubled(prefix, draft, target, gamma, rng):
    """The verification pass is fed the last committed token twice (it is both in the cache and
    re-sent as the pass's first input), so every target row conditions on one extra copy of it.

    ml-explore/mlx-lm#1175 (B28): "confirmed token doubled" in the MTP verify input.
    """
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ctx = prefix + prefix[-1:]  # BUG: the confirmed token is in the cache and re-fed
    ps = target_rows(ctx, target, xs)
    return _verify(xs, ps, qs, rng)


def target_context_bos_prepended(prefix, draft, target, gamma, rng):
    """The target's context is re-tokenised each round with a BOS id (0) prepended, so every target
    row conditions on a context one token longer (shifted positions, an extra leading token) than
    the draft's.

    huggingface/transformers#46124: universal assisted generation re-adds BOS at every
    re-tokenisation of the text handed to the target.
    """
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows([0] + prefix, target, xs)  # BUG: BOS re-added on the target side
    return _verify(xs, ps, qs, rng)


class RowOffsetAfterEmptyRound:
    """After a round that kept no draft (one token emitted), the next round's drafts are verified
    against target row min(i + 1, gamma): the logits offset is computed from the previous step's
    token count, which assumes the request had a draft last step.

    vllm-project/vllm#41768 (B12): row misalignment when some requests have empty speculation
    lists; here the misalignment follows a request's own empty (fully rejected) previous step.
    """

    def __init__(self):
        self.expect = None
        self.shift = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.expect is None or prefix != self.expect:
            self.shift = 0  # a new sequence
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        shifted = [ps[min(i + self.shift, gamma)] for i in range(gamma)] + [ps[gamma]]  # BUG
        out = _verify(xs, shifted, qs, rng)
        self.shift = 1 if len(out) == 1 else 0
        self.expect = prefix + out
        return out


row_offset_after_empty_round = RowOffsetAfterEmptyRound()


def q_from_draft_context_missing_last_token(prefix, draft, target, gamma, rng):
    """Drafts are drawn from the right rows, but the q used in the ratio and the residual is
    re-read from the draft model with a context that lacks the last committed token (the draft
    cache was rewound one entry too far before the verifier looked the rows up again).

    lablup/mlxcel#994 (B30: the draft KV rewind trimmed too many entries; harmless there because
    the draft also sampled from the lagged rows); here only the verifier's re-read lags.
    """
    prefix = list(prefix)
    xs, _ = draft_chain(prefix, draft, gamma, rng)
    lagged = prefix[:-1]
    qs = [np.asarray(draft(lagged + xs[:i]), dtype=np.float64) for i in range(gamma)]  # BUG
    ps = target_rows(prefix, target, xs)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = []
        for i, x in enumerate(xs):
            ratio = ps[i][x] / qs[i][x]
            if rng.random() < min(1.0, float(np.nan_to_num(ratio, nan=0.0, posinf=1.0))):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            return out
    out.append(sample(ps[gamma], rng))
    return out


def q_buffer_one_slot_short(prefix, draft, target, gamma, rng):
    """The draft rows are written into a ring buffer of gamma - 1 slots (sized like the "extra"
    rows of the pass, one short), so the last draft's row overwrites slot 0 and the first draft is
    verified (ratio and residual) with the last draft's row; the other positions are right.

    Written for the study: a draft-probability buffer allocated with num_speculative_tokens - 1
    slots and indexed modulo its length (the +1 / -1 bonus-row offsets of vLLM's rejection-sampler
    buffers are where such sizes come from); harmless at gamma = 1, which is why a gamma-1 unit test
    passes.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    slots = max(1, gamma - 1)
    buf = [None] * slots
    for i, q in enumerate(qs):
        buf[i % slots] = q  # BUG: one slot short, so the last row overwrites slot 0
    ps = target_rows(prefix, target, xs)
    return _verify(xs, ps, [buf[i % slots] for i in range(gamma)], rng)


def draft_argmax_with_soft_q(prefix, draft, target, gamma, rng):
    """Each draft is the argmax of its draft row (greedy drafting for speed), yet the ratio and the
    residual use the soft row q, as if the token had been sampled from it.

    huggingface/transformers#32867 -> #33534 (B03: assistant forced to argmax while q stayed its
    softmax); ggml-org/llama.cpp examples/speculative (B32: the drafted token is the top candidate,
    checked with its soft p_dft).
    """
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        xs.append(int(np.argmax(q)))  # BUG: not a sample from q
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return _verify(xs, ps, qs, rng)
