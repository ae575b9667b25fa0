"""Round steps whose verification reads the wrong target or draft rows."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _verify(xs, qs, ps, rng):
    """The standard chain rule on the given drafts and rows (the rows are where the bugs are)."""
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):  # a wrong q row may be 0 at x: min(1, inf or NaN) = 1
            a = min(1.0, ps[i][x] / qs[i][x])
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


def draft_loop_mutates_shared_context(prefix, draft, target, gamma, rng):
    """The drafter extends a running context ``ctx`` with each draft, and the verification pass is
    then called with that same ``ctx`` as its prefix: target row j is p(. | prefix + xs + xs[:j])
    instead of p(. | prefix + xs[:j]), the drafts appearing twice in the target's context. Draft
    rows, ratio and residual are otherwise the standard rule.

    Written for the study: a list mutated in place by the draft loop and reused as the verify
    prefix (Python aliasing), next to ml-explore/mlx-lm#1175 (B28: the verify loop fed the wrong
    context to every position).
    """
    ctx = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx), dtype=np.float64)
        x = sample(q, rng)
        ctx.append(x)  # the drafter's running context
        xs.append(x)
        qs.append(q)
    ps = target_rows(ctx, target, xs)  # BUG: ctx already ends with the drafts; the prefix is list(prefix)
    return _verify(xs, qs, ps, rng)


def q_rows_alias_one_buffer(prefix, draft, target, gamma, rng):
    """The draft rows are copied into one preallocated buffer per step and the buffer itself (not
    a copy) is appended to the list of draft rows: after the loop every entry is the last row,
    q_{gamma-1}. Drafts are sampled from the right rows; the ratio and the residual at every
    position use q_{gamma-1} (a draft where q_{gamma-1} is 0 is accepted: min(1, inf or NaN) = 1).

    Written for the study: a static probability buffer (the ``out=`` / CUDA-graph buffer pattern)
    stored by reference; the q-provenance class of huggingface/transformers#47932 (B04).
    """
    buf = None
    xs, qs = [], []
    for _ in range(gamma):
        row = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        if buf is None:
            buf = np.empty_like(row)
        buf[:] = row
        xs.append(sample(buf, rng))
        qs.append(buf)  # BUG: a reference to the shared buffer, overwritten by the next draft step
    ps = target_rows(prefix, target, xs)
    return _verify(xs, qs, ps, rng)


def draft_top_k_sampling_reports_full_q(prefix, draft, target, gamma, rng, k=5):
    """The drafter samples each draft from its row restricted to the row's top 5 ids and
    renormalised (a drafter-side top-k), but hands the verifier the full softmax row as q: the
    ratio divides by q(x) instead of q(x) / Z_top5, and the residual subtracts the full row.

    huggingface/transformers#47932 (B04): candidate generators sampled from top-k / top-p processed
    logits but returned the unprocessed distribution as q.
    """
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        top = np.argsort(q, kind="stable")[-k:]
        w = np.zeros_like(q)
        w[top] = q[top]
        xs.append(sample(w, rng))  # BUG: drawn from the top-k row, while q (below) is the full row
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return _verify(xs, qs, ps, rng)


def target_context_missing_last_committed_token(prefix, draft, target, gamma, rng):
    """The verification pass is fed the drafts only, on the assumption that the last committed
    token (the previous round's replacement or bonus) is already in the target's cache; it was
    sampled, never fed. Target row j is p(. | prefix[:-1] + xs[:j]) instead of
    p(. | prefix + xs[:j]), at every position and the bonus row.

    Written for the study from ohdearquant/lattice#243 (B36: the verify loop shifted by one, drafts
    fed instead of the last committed token) and huggingface/transformers#30042 (B05).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(list(prefix)[:-1], target, xs)  # BUG: the last committed token is not fed
    return _verify(xs, qs, ps, rng)


def target_masked_to_draft_support(prefix, draft, target, gamma, rng):
    """Each target row of a draft position is restricted to the ids the draft row gives mass to
    and renormalised, "so that the ratio is defined": acceptance uses p_i 1[q_i > 0] / Z_i, and the
    residual (p_i' - q_i)+ of the restricted row never proposes an id the drafter cannot produce.
    The bonus row is not masked.

    Written for the study from the masks that reach one side of the speculative path
    (vllm-project/vllm PR #36138 / #43338, lmdeploy#4551) and EAGLE-3's reduced draft vocabulary
    (engines notes, section 5).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs).copy()
    for i in range(gamma):
        m = ps[i] * (qs[i] > 0)  # BUG: the target row masked to the draft's support
        if m.sum() > 0:
            ps[i] = m / m.sum()
    return _verify(xs, qs, ps, rng)
