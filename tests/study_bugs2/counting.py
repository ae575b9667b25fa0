"""Round steps that count the accepted drafts wrongly or stop verification in the wrong place."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _coins(xs, qs, ps, rng):
    """The accept mask of every draft's standard test (all coins drawn up front)."""
    gamma = len(xs)
    px = np.array([ps[i][x] for i, x in enumerate(xs)])
    qx = np.array([qs[i][x] for i, x in enumerate(xs)])
    return rng.random(gamma) < np.minimum(1.0, px / qx)


def count_minus_one(prefix, draft, target, gamma, rng):
    """The count is the number of leading accepts minus one (floored at 0), and the round emits
    that many drafts followed by a residual draw at the position the count points to, bonus or not.

    Written for the study: the count was converted from "index of the last accepted draft" (which
    is leading - 1) and then used as a length; the classic n_matches confusion of
    transformers' _speculative_sampling (engines notes section 2).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    leading = int(np.cumprod(acc).sum())
    n = max(leading - 1, 0)
    out = list(xs[:n])
    out.append(sample_or(residual(ps[n], qs[n]), ps[n], rng))
    return out


def count_capped_below_gamma(prefix, draft, target, gamma, rng):
    """The count is capped at gamma - 1 (``min(n, gamma - 1)``, to index the draft-prob buffer), so
    a fully accepted round drops its last draft and emits a residual draw at that position instead
    of the draft and a bonus.

    Written for the study: a clamp added to keep ``draft_probs[n]`` in bounds when the residual is
    gathered unconditionally, the layout of batched kernels (vLLM's rejection sampler gathers the
    recovered token for every request and selects afterwards).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    n = min(int(np.cumprod(acc).sum()), gamma - 1)
    out = list(xs[:n])
    out.append(sample_or(residual(ps[n], qs[n]), ps[n], rng))
    return out


def stop_at_last_rejection(prefix, draft, target, gamma, rng):
    """Verification stops at the LAST rejected draft (``np.where(~acc)[0].max()``) instead of the
    first, so drafts rejected earlier are emitted as if accepted.

    Written for the study: ``max`` typed for ``min`` when the first-rejection index is taken from
    a mask (the argmin/argmax-on-mask idiom of batched kernels).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    rejected = np.where(~acc)[0]
    if len(rejected) == 0:
        return list(xs) + [sample(ps[gamma], rng)]
    n = int(rejected.max())
    return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]


def skip_rejected_draft(prefix, draft, target, gamma, rng):
    """A rejected draft is dropped (``continue`` where ``break`` was meant): no replacement is
    drawn, and verification goes on with the next draft against the next row, which conditions on
    the dropped token. After the loop the bonus comes from row gamma.

    Modelled on antonellof/ferrox#307 (the control flow after a mismatch changed), with the
    replacement lost as well.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
        else:
            continue
    out.append(sample(ps[gamma], rng))
    return out
