"""Round steps that count accepted drafts wrongly or stop verification in the wrong place."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _first_rejection(xs, qs, ps, rng):
    """Index of the first rejected draft under the standard test (len(xs) if none)."""
    for i, x in enumerate(xs):
        if not rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            return i
    return len(xs)


def draft_stop_drops_triggering_token(prefix, draft, target, gamma, rng, threshold=0.4):
    """The drafter stops early when it is not confident: after sampling x_i it checks q_i(x_i) and,
    below 0.4, stops and discards x_i. The round then verifies the drafts before it and the target
    samples position i from p_i. Because the discarded token decides whether position i is drafted,
    the drafts kept there are q_i conditioned on q_i(x) >= 0.4 while the ratio divides by q_i.

    Written for the study from transformers' assistant_confidence_threshold (0.4 by default; engines
    notes, section 2), which keeps the token that triggers the stop; this drafter drops it.
    """
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        x = sample(q, rng)
        if q[x] < threshold:
            break  # BUG: the low-confidence token is dropped, not verified
        xs.append(x)
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    n = _first_rejection(xs, qs, ps, rng)
    if n < len(xs):
        return xs[:n] + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
    return xs + [sample(ps[len(xs)], rng)]


def draft_truncated_at_target_zero(prefix, draft, target, gamma, rng):
    """A draft the target gives probability 0 (masked by the target's processors) ends the draft
    block as if it had never been drafted: the tokens before it are verified and the target samples
    that position from p_i, instead of rejecting it and drawing from (p_i - q_i)+.

    Written for the study from vllm-project/vllm PR #36138 / #43338 (drafts past the reasoning end
    skipped the grammar) and lmdeploy#4551: a structured-output path that truncates the draft at the
    first token the mask forbids.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if ps[i][x] == 0.0:
            out.append(sample(ps[i], rng))  # BUG: a forbidden draft is treated as not drafted
            return out
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def placeholder_drafts_verified(prefix, draft, target, gamma, rng, threshold=0.4):
    """The drafter stops early (at its first draft with q(x) < 0.4, kept, as transformers'
    confidence threshold does) and the block is padded to gamma with the placeholder id -1 and
    zero draft rows. The verifier does not exclude the padding: -1 indexes the last id V - 1 (the
    target pass is fed V - 1 there), and the zero row makes the ratio p(V - 1) / 0 = inf (or NaN,
    which ``min(1.0, nan)`` turns into 1), so every placeholder is accepted and emitted as V - 1;
    the count exceeds the real drafts.

    vllm-project/vllm#46899 (stale -1 placeholders fed back as draft tokens) and
    flashinfer-ai/flashinfer#879 / #3551 (B19: -1 padding ids used as indices, out-of-bounds reads
    accepted, the emitted count exceeding the valid drafts).
    """
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q)
        if q[xs[-1]] < threshold:
            break
    v = len(qs[0])
    while len(xs) < gamma:  # the fixed-size block of a batched kernel
        xs.append(-1)
        qs.append(np.zeros(v))
    ids = [x % v for x in xs]  # BUG: placeholders are not masked out; -1 indexes id V - 1
    ps = target_rows(prefix, target, ids)
    out = []
    for i, x in enumerate(ids):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ps[i][x] / qs[i][x]
        if rng.random() < min(1.0, ratio):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def slice_includes_rejected_draft(prefix, draft, target, gamma, rng):
    """With n drafts accepted and a rejection at position n, the round emits xs[: n + 1], the
    rejected draft included, and then the replacement drawn from (p_n - q_n)+; a fully accepted
    round is right.

    Written for the study: the slice ``draft[: num_accepted + 1]`` that is right for the tokens of a
    round counted with its bonus, used for the drafts.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n = _first_rejection(xs, qs, ps, rng)
    if n == gamma:
        return xs + [sample(ps[gamma], rng)]
    return xs[: n + 1] + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]  # BUG: n + 1


def last_position_rejection_takes_bonus_branch(prefix, draft, target, gamma, rng):
    """The full-acceptance branch is taken when n >= gamma - 1, so a rejection of the last draft
    emits every draft (the rejected one included) and a bonus from row gamma.

    Written for the study, next to openvinotoolkit/openvino.genai#4190 (B38: a rejection handled one
    iteration late): an off-by-one in the completion check.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n = _first_rejection(xs, qs, ps, rng)
    if n >= gamma - 1:  # BUG: should be n == gamma
        return xs + [sample(ps[gamma], rng)]
    return xs[:n] + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
