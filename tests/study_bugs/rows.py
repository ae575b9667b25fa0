"""Round steps that read the wrong row of the target's or the draft's output."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def ratio_next_target_row(prefix, draft, target, gamma, rng):
    """Verifies draft i against target row i + 1.

    The user reasoned like a causal LM's logits ("the logit at position t predicts token t + 1, and
    draft i sits at position i + 1 of the pass"), so for draft i they read row i + 1, the row that
    already conditions on draft i itself. The bonus is read from ``ps[-1]`` (row gamma), which is
    right by accident. Modelled on the row/position misalignment of B36 (ohdearquant/lattice#243,
    "verify loop shifted by one") and vllm-project/vllm#51812 (gate rows misaligned with the
    spec-token rows).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p = ps[i + 1]  # BUG: the row after the one that scores draft i
        if rng.random() < min(1.0, p[x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(p, qs[i]), p, rng))
        return out
    out.append(sample(ps[-1], rng))
    return out


def first_draft_unverified(prefix, draft, target, gamma, rng):
    """Feeds the first draft to the target as if it were the last committed token.

    The verification pass is built as ``target(prefix + [x0], x1..)`` (the user thought the pass
    must start from "the newest token", and took x0 to be it), so x0 is committed without any test
    and drafts 1.. are checked against the rows that follow. ohdearquant/lattice#243 / #258:
    "draft[0] committed unverified (drafts were fed instead of the last committed token)".
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(list(prefix) + xs[:1], target, xs[1:])  # gamma rows: for x1.., then the bonus
    out = [xs[0]]  # BUG: x0 is taken as input, never tested
    for i in range(1, gamma):
        x = xs[i]
        p = ps[i - 1]
        if rng.random() < min(1.0, p[x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample(residual(p, qs[i]), rng))
        return out
    out.append(sample(ps[gamma - 1], rng))
    return out


def keeps_row_of_last_committed_token(prefix, draft, target, gamma, rng):
    """Re-feeds the last committed token and keeps the wrong slice of the target's rows.

    The target's KV cache holds the prefix minus its last token, so the pass is run on
    ``[last] + drafts`` (gamma + 2 rows). The user kept ``logits[:gamma + 1]`` instead of
    ``logits[1:]``: row i then conditions on one token fewer than draft i does (row 0 is the law
    of the last committed token itself). The slicing class of vllm-project/vllm#51812 and
    HabanaAI/vllm-fork#1780 (rows misaligned with the spec-token indices).
    """
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    rows = np.asarray(target(prefix[:-1], prefix[-1:] + xs), dtype=np.float64)  # gamma + 2 rows
    ps = rows[: gamma + 1]  # BUG: should be rows[1:]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def q_row_of_next_position(prefix, draft, target, gamma, rng):
    """Stores the draft row of the next position as q for the token just drawn.

    The drafting loop advances the draft before recording its distribution: the token is drawn from
    q(. | prefix + xs[:i]) but the row kept for the ratio and the residual is
    q(. | prefix + xs[:i + 1]). The row-alignment class of B32 (llama.cpp examples/speculative:
    the q used in the test is not the row the draft token was drawn from).
    """
    prefix = list(prefix)
    xs, qs = [], []
    q = np.asarray(draft(prefix), dtype=np.float64)
    for _ in range(gamma):
        xs.append(sample(q, rng))
        q = np.asarray(draft(prefix + xs), dtype=np.float64)  # advance the draft
        qs.append(q)  # BUG: appended after advancing
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if qs[i][x] > 0 and rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def q_first_row_for_all(prefix, draft, target, gamma, rng):
    """Uses the first draft row as q at every position.

    The drafter's scores were only kept for its first step (the user read ``scores[0]`` once,
    before the loop, and reused it, as with a single set of Medusa-style head outputs). Each draft
    is still drawn from its own row. Modelled on transformers#47932 (candidate generators return
    a q that is not the law the tokens were drawn from).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    q0 = qs[0]
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        q = q0  # BUG: should be qs[i]
        if q[x] > 0 and rng.random() < min(1.0, ps[i][x] / q[x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], q), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def q_index_minus_one(prefix, draft, target, gamma, rng):
    """Reads q for draft i at ``qs[i - 1]``, which wraps to the last row for i = 0.

    The user's draft scores used to carry the prefill row first, and the index kept its ``- 1``
    when that row was dropped; Python's negative index makes position 0 silently read the last
    draft row. Written for the study: the commonest off-by-one of hand-written loops, in the row
    class of vllm-project/vllm#51812.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        q = qs[i - 1]  # BUG: qs[-1] at i = 0
        if q[x] > 0 and rng.random() < min(1.0, ps[i][x] / q[x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], q), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
