"""Round steps that verify every draft but count the accepted prefix wrongly."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def _coins(xs, qs, ps, rng):
    """Every draft's test at once (vectorised, as batched kernels do)."""
    u = rng.random(len(xs))
    ratio = np.array([ps[i][x] / qs[i][x] for i, x in enumerate(xs)])
    return u < np.minimum(1.0, ratio)


def _emit(xs, qs, ps, n, rng):
    """Keep xs[:n], then the replacement at position n or the bonus when n == gamma."""
    out = list(xs[:n])
    if n < len(xs):
        out.append(sample_or(residual(ps[n], qs[n]), ps[n], rng))
    else:
        out.append(sample(ps[n], rng))
    return out


def accepted_count_is_sum(prefix, draft, target, gamma, rng):
    """Counts every accepted position, not the accepted prefix: n = accepted.sum().

    With accept / reject / accept the step keeps two drafts (the rejected one among them) instead
    of one. The count that transformers writes as ``((~accepted).cumsum(-1) < 1).sum()`` was
    simplified to ``accepted.sum()``; its batch-summed ``n_matches`` (engines notes, section 2) is
    the same family of counting slip.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    n = int(acc.sum())  # BUG: not the length of the accepted prefix
    return _emit(xs, qs, ps, n, rng)


def accepted_count_le_one(prefix, draft, target, gamma, rng):
    """Counts ``((~accepted).cumsum() <= 1).sum()``: the first rejected draft is kept too.

    A ``<`` became ``<=`` in transformers' n_matches expression
    (``((~is_accepted).cumsum(dim=-1) < 1).sum()``): the count runs up to the second rejection,
    so the first rejected draft and the accepted drafts after it are emitted.
    Modelled on the n_matches computation of transformers' ``_speculative_sampling``.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    n = int(((~acc).cumsum() <= 1).sum())  # BUG: should be < 1
    return _emit(xs, qs, ps, n, rng)


def first_rejection_by_argmin(prefix, draft, target, gamma, rng):
    """Finds the first rejection with ``np.argmin(accepted)``, which is 0 when all are accepted.

    ``argmin`` of a boolean array is the index of its first False, except that an all-True array
    also gives 0: a fully accepted round then emits only a "replacement" drawn at position 0
    (from (p - q)+, or from p when that is empty). Written for the study: the numpy idiom is
    everywhere in batched verification code (torch's ``argmin``/``argmax`` on masks has the same
    trap; vLLM's kernels pad with an explicit sentinel for this reason).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    n = int(np.argmin(acc))  # BUG: 0 when every draft is accepted
    return _emit(xs, qs, ps, n, rng)


def verify_loop_misses_last_draft(prefix, draft, target, gamma, rng):
    """Verifies only gamma - 1 drafts, then draws the bonus from row gamma.

    ``for i in range(gamma - 1)`` (the user counted "gamma + 1 rows minus the bonus minus one"):
    when those are all accepted the step emits them and a bonus from the last row, a row that
    conditions on the last draft, which is never emitted. Written for the study, after
    ohdearquant/lattice#243's shifted verify loop (B36): an off-by-one in the loop bound.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i in range(gamma - 1):  # BUG: the last draft is never verified nor emitted
        x = xs[i]
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
