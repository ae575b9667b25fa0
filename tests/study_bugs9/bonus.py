"""Round steps whose bonus token (after every draft is accepted) follows the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows

from ._common import accept_mask, chain, emit


def bonus_row_from_flip_without_axis(prefix, draft, target, gamma, rng):
    """After a full acceptance the bonus row is read as np.flip(ps)[0] (meant: the last row), but
    np.flip without an axis also reverses the vocabulary: the bonus is id v with probability
    p_gamma(V - 1 - v); rounds with a rejection are right."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    if not acc.all():
        return emit(int(np.argmin(acc)), xs, qs, ps, rng)
    last = np.flip(ps)[0]  # BUG: np.flip(ps, axis=0)[0] (or ps[-1]) is the last row
    return list(xs) + [sample(last, rng)]


def bonus_gumbel_max_with_uniform_noise(prefix, draft, target, gamma, rng):
    """The bonus is drawn by Gumbel-max, argmax(log p + g), with g a plain uniform on [0, 1)
    instead of -log(-log u): ids within one nat of the top compete, the rest never win."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def bonus(p):
        with np.errstate(divide="ignore"):
            logp = np.log(p)
        g = rng.random(len(p))  # BUG: Gumbel noise is -log(-log(u)), not u
        return int(np.argmax(logp + g))

    return chain(xs, qs, ps, rng, bonus=bonus)


def bonus_choice_without_weights(prefix, draft, target, gamma, rng):
    """The bonus is rng.choice over the ids p_gamma supports, with the weights argument left out:
    uniform over the support instead of p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def bonus(p):
        return int(rng.choice(np.flatnonzero(p)))  # BUG: p=p[support] / p.sum() is missing

    return chain(xs, qs, ps, rng, bonus=bonus)
