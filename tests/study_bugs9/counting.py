"""Round steps that count the accepted drafts wrong from a vectorised accept mask."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from ._common import accept_mask, emit


def first_rejection_searchsorted_side_right(prefix, draft, target, gamma, rng):
    """The first rejection is looked up in the running count of rejections with
    np.searchsorted(..., 1, side="right"), which finds the first index where the count exceeds 1:
    the second rejection (gamma when there is at most one), so a first rejected draft is kept."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    rejected_so_far = np.cumsum(~acc)
    n = int(np.searchsorted(rejected_so_far, 1, side="right"))  # BUG: side="left" finds the first rejection
    return emit(n, xs, qs, ps, rng)


def accepted_drafts_selected_by_mask(prefix, draft, target, gamma, rng):
    """After a rejection at n the kept drafts are xs[accept] (every accepted draft, those after the
    first rejection included, compacted) instead of xs[:n]; the replacement is drawn from
    (p_n - q_n)+ and appended after them."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    if acc.all():
        return list(xs) + [sample(ps[gamma], rng)]
    n = int(np.argmin(acc))
    kept = [int(t) for t in np.asarray(xs)[acc]]  # BUG: boolean selection keeps accepts past the first rejection
    return kept + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]


def leading_accepts_counted_with_cumsum(prefix, draft, target, gamma, rng):
    """The number kept is np.count_nonzero(np.cumsum(accept)) (cumsum written for cumprod): the
    number of positions from the first accepted draft on, so rejected drafts are kept, and a
    rejected x_0 followed by an acceptance is emitted."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    n = int(np.count_nonzero(np.cumsum(acc)))  # BUG: cumsum, not cumprod: not the leading run
    return emit(n, xs, qs, ps, rng)
