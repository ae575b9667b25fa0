"""Round steps whose mistake is in the bonus token: a bonus drawn from a mixture of the target's
and the drafter's rows, and a bonus row sampled without the request's penalties (``--logits``)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import chain, draft_chain_logits, probs, target_logits


def bonus_from_target_draft_mixture(prefix, draft, target, gamma, rng):
    """An 'ensemble' bonus: after a full acceptance the bonus is drawn from (p_gamma + q_gamma) / 2,
    with q_gamma = q(. | prefix + xs) the drafter's next row, instead of from p_gamma. Verified
    positions are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def bonus(p):
        q_next = np.asarray(draft(prefix + xs), dtype=np.float64)
        return sample(0.5 * p + 0.5 * q_next, rng)  # BUG: p, the target's row alone

    return chain(xs, qs, target_rows(prefix, target, xs), rng, bonus=bonus)


def bonus_row_sampled_without_penalties(prefix, draft, target, gamma, rng, settings):
    """The verified rows go through the verifier's logits processors (bias, repetition, presence
    and frequency penalties, temperature, filters), but the bonus is sampled by the plain sampler,
    which applies the bias, temperature and filters and no penalty: after a full acceptance the
    bonus is drawn from the unpenalised row. Verified positions and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = [probs(z[i], settings, prefix + xs[:i]) for i in range(gamma)]
    plain = dataclasses.replace(settings, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0)
    ps.append(probs(z[gamma], plain, prefix + xs))  # BUG: settings, the request's penalties included
    return chain(xs, qs, ps, rng)
