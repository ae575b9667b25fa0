"""Round steps whose mistake is in the bonus token of a fully accepted round."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows

from ._common import chain


def bonus_is_next_draft_when_target_supports_it(prefix, draft, target, gamma, rng):
    """After a full acceptance the drafter's next proposal, the argmax of q(. | prefix + xs), is
    emitted as the bonus whenever the target gives it positive probability (a free extra draft taken
    without a test); otherwise the bonus is drawn from p_gamma. Verified positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    nxt = int(np.argmax(draft(list(prefix) + xs)))

    def bonus(p):
        if p[nxt] > 0:
            return nxt  # BUG: the bonus must be drawn from p_gamma
        return sample(p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, bonus=bonus)


DRAFT_TEMPERATURE = 0.7


def bonus_sampled_at_draft_temperature(prefix, draft, target, gamma, rng):
    """The bonus goes through the drafter's sampler, configured at the drafter's temperature 0.7:
    it is drawn from p_gamma ** (1 / 0.7) renormalised (a sharpened row) instead of p_gamma;
    verified positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def bonus(p):
        return sample(np.asarray(p, dtype=np.float64) ** (1.0 / DRAFT_TEMPERATURE), rng)  # BUG: temperature 1

    return chain(xs, qs, target_rows(prefix, target, xs), rng, bonus=bonus)


CONFIDENT = 0.5


def bonus_greedy_when_row_is_confident(prefix, draft, target, gamma, rng):
    """After a full acceptance the bonus takes a 'confident' fast path: when p_gamma's largest
    probability exceeds 0.5 its argmax is emitted without sampling; otherwise the bonus is drawn
    from p_gamma. Verified positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def bonus(p):
        if np.max(p) > CONFIDENT:
            return int(np.argmax(p))  # BUG: the bonus must be sampled from p_gamma whatever its peak
        return sample(p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, bonus=bonus)
