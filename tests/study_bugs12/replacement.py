"""Round steps whose mistake is in the replacement drawn after a rejection."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample_or, target_rows
from study_bugs10._common import chain


def residual_shifted_by_its_minimum(prefix, draft, target, gamma, rng):
    """The residual's negative entries are removed by shifting the difference by its minimum,
    w = (p - q) - min(p - q), instead of clamping at 0: every id gets weight, the ids the
    drafter favoured least the most extra. Test and bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        d = p - q
        w = d - d.min()  # BUG: np.maximum(d, 0)
        return sample_or(w, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def residual_in_ratio_space(prefix, draft, target, gamma, rng):
    """The residual is formed in the test's units, (p / q - 1)+ (q floored at 1e-6), instead of
    (p - q)+: each id's weight is divided by q, so ids the drafter rarely proposes dominate the
    replacement. Test and bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = np.maximum(p / np.maximum(q, 1e-6) - 1.0, 0.0)  # BUG: np.maximum(p - q, 0)
        return sample_or(w, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def replacement_best_of_three_draws(prefix, draft, target, gamma, rng):
    """After a rejection three candidates are drawn from (p - q)+ and the one the target likes most
    (largest p) is emitted (a best-of-n 'quality' pick) instead of one draw. Test and bonus are
    standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        cands = [sample_or(residual(p, q), p, rng) for _ in range(3)]
        return max(cands, key=lambda t: p[t])  # BUG: one draw is the replacement

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)
