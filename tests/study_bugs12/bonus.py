"""Round steps whose mistake is in the bonus token after a full acceptance."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows
from study_bugs10._common import chain


def bonus_best_of_two_draws(prefix, draft, target, gamma, rng):
    """After a full acceptance two candidates are drawn from p_gamma and the more likely one is
    emitted (a best-of-2 pick) instead of one draw. Verified positions are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def bonus(p):
        a, b = sample(p, rng), sample(p, rng)
        return a if p[a] >= p[b] else b  # BUG: one draw is the bonus

    return chain(xs, qs, target_rows(prefix, target, xs), rng, bonus=bonus)


def bonus_residual_against_uniform_placeholder(prefix, draft, target, gamma, rng):
    """The bonus goes through the replacement kernel with a placeholder draft row filled with 1/V
    (a 'neutral' row for the position nobody drafted): it is drawn from (p_gamma - 1/V)+ instead of
    p_gamma, so only ids above 1/V can be a bonus. Verified positions are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def bonus(p):
        placeholder = np.full_like(p, 1.0 / len(p))
        return sample_or(residual(p, placeholder), p, rng)  # BUG: the bonus is a draw from p_gamma

    return chain(xs, qs, target_rows(prefix, target, xs), rng, bonus=bonus)
