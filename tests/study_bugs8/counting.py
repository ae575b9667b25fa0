"""Round steps whose number of accepted drafts is computed wrong from a vectorised accept mask."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows

from ._common import accept_mask, emit, ratio


def first_rejection_by_binary_search_on_unsorted_mask(prefix, draft, target, gamma, rng):
    """The first rejection is found with np.searchsorted(~accept, True), a binary search that
    assumes the rejection mask is sorted (all False, then all True); after the first rejection the
    mask is arbitrary, and the search can land past a rejected draft."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    n = int(np.searchsorted(~acc, True))  # BUG: ~acc is not sorted; use np.argmax on it (or gamma)
    return emit(n, xs, qs, ps, rng)


def first_rejection_as_most_negative_margin(prefix, draft, target, gamma, rng):
    """With the margins m_i = min(1, p_i / q_i) - u_i (a draft is accepted iff m_i > 0), the
    rejection handled is the one with the smallest margin, not the first one: with two rejections
    the later one can be taken and the rejected draft before it kept."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    r = np.array([ratio(ps[i], qs[i], x) for i, x in enumerate(xs)])
    m = r - rng.random(gamma)
    n = gamma if (m > 0).all() else int(np.argmin(m))  # BUG: the worst rejection, not the first
    return emit(n, xs, qs, ps, rng)


def first_rejection_via_str_find(prefix, draft, target, gamma, rng):
    """The accept mask is written as a string of 1s and 0s and the first rejection found with
    str.find("0"), which returns -1 when every draft is accepted: the round then emits xs[:-1] and a
    replacement from (p_gamma - q_{gamma-1})+ instead of every draft and the bonus."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    n = "".join("1" if a else "0" for a in acc).find("0")  # BUG: -1 (not gamma) when there is no "0"
    return emit(n, xs, qs, ps, rng)


def leading_run_length_ignores_run_value(prefix, draft, target, gamma, rng):
    """The number kept is the length of the mask's first run (first index where np.diff is non-zero,
    plus one), whatever the run's value: a leading run of rejections is kept as if accepted."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    change = np.flatnonzero(np.diff(acc.astype(np.int8)))
    n = int(change[0]) + 1 if change.size else gamma  # BUG: the first run may be rejections (check acc[0])
    return emit(n, xs, qs, ps, rng)
