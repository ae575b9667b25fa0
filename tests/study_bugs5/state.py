"""Stateful round steps whose state carries something wrong from one round (or request) to the
next. Each is a module-level object whose ``__call__`` is the step; the audit calls the rounds of
one sequence consecutively, and a prefix that does not continue the previous round's output is a
new request."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _verify(xs, qs, ps, rng):
    """The standard chain rule on given drafts and rows: (tokens, accepted count)."""
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):  # a wrong q row may be 0 at x: min(1, inf or NaN) = 1
            a = min(1.0, ps[i][x] / qs[i][x])
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out, i
    out.append(sample(ps[len(xs)], rng))
    return out, len(xs)


class DraftProbBufferNotClearedOnRejection:
    """The draft probabilities live in a per-request store indexed by absolute position, written
    only for positions past a high-water mark that is never moved back after a rejection. Drafts
    are always sampled from fresh rows, but after a rejection at n the next round's positions up
    to the old block end are verified (ratio and residual) with the rows drafted last round, in
    the context that held the rejected draft (a draft where that stale row is 0 is accepted:
    min(1, inf or NaN) = 1).

    Written for the study from draft-probability caches kept across steps (vLLM MRV2's cached draft
    logits, #35461) and rewind bookkeeping off by a few slots (lablup/mlxcel#994, B30).
    """

    def __init__(self):
        self.expect = None
        self.store = {}
        self.filled = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:  # a new request
            self.store, self.filled = {}, len(prefix)
        xs = []
        for i in range(gamma):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            pos = len(prefix) + i
            if pos >= self.filled:
                self.store[pos] = q
                self.filled = pos + 1
        qs = [self.store[len(prefix) + i] for i in range(gamma)]
        ps = target_rows(prefix, target, xs)
        out, _ = _verify(xs, qs, ps, rng)
        self.filled = max(self.filled, len(prefix) + len(out))  # BUG: = len(prefix) + len(out), moved back
        self.expect = prefix + out
        return out


draft_prob_buffer_not_cleared_on_rejection = DraftProbBufferNotClearedOnRejection()


class ReplacementSlotKeepsRejectedDraft:
    """The target's cache is a list of the tokens whose keys and values it holds plus a count of
    the valid ones. After a rejection at n the count is advanced by n + 1, counting the rejected
    draft's slot as if the replacement had been written there; the replacement is then never fed,
    and every later pass of the request sees x_n where the replacement r stands:
    p(. | ... + xs[:n] + [x_n] + ...) instead of p(. | ... + xs[:n] + [r] + ...).

    Written for the study from num-computed-tokens bookkeeping on the speculative path
    (vllm-project/vllm#52071: a scheduler field left wrong; huggingface/text-generation-inference
    #2711, B39: KV slots assumed to hold other tokens than they do).
    """

    def __init__(self):
        self.expect = None
        self.kv = []
        self.valid = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:  # a new request: an empty cache
            self.kv, self.valid = [], 0
        ctx = self.kv[: self.valid] + prefix[self.valid :]  # the cache, then the tokens not yet fed
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(ctx, target, xs)
        out, n = _verify(xs, qs, ps, rng)
        self.kv = ctx + xs  # the pass wrote every draft's slot
        if n < gamma:
            self.valid = len(prefix) + n + 1  # BUG: len(prefix) + n; the slot at n holds x_n, not r
        else:
            self.valid = len(prefix) + gamma
        self.expect = prefix + out
        return out


replacement_slot_keeps_rejected_draft = ReplacementSlotKeepsRejectedDraft()


class PendingBonusLeaksIntoNextRequest:
    """Output is processed one step late (asynchronous scheduling): the bonus token of a fully
    accepted block is held as pending and emitted at the head of the next call, whose round
    drafts from prefix + [pending]. Within a request this is exact; the pending token is never
    flushed when a request ends, so the next request's first token is a token sampled for the
    previous request's context.

    vllm-project/vllm#46899 (stale placeholders fed back as drafts) and vllm-project/vllm#52071
    (per-request state left over without async scheduling), with the request-slot reuse of
    NVIDIA/TensorRT-LLM#19487 (B33).
    """

    def __init__(self):
        self.pending = None

    def __call__(self, prefix, draft, target, gamma, rng):
        head = [] if self.pending is None else [self.pending]  # BUG: never cleared when a request finishes
        self.pending = None
        ctx = list(prefix) + head
        xs, qs = draft_chain(ctx, draft, gamma, rng)
        ps = target_rows(ctx, target, xs)
        out, n = _verify(xs, qs, ps, rng)
        if n == gamma:
            self.pending = out.pop()
        return head + out


pending_bonus_leaks_into_next_request = PendingBonusLeaksIntoNextRequest()
