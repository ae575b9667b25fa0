"""Round steps whose mistake is in the bonus token of a fully accepted round."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows
from study_bugs10._common import ratio

_NOISE = []  # the race's noise buffer


def bonus_race_noise_fixed_at_import(prefix, draft, target, gamma, rng):
    """The bonus is drawn by the exponential race argmax(p_gamma / E), but the noise buffer E is
    filled once, at the process's first bonus, and never refilled (meant: fresh noise per step):
    every bonus is a fixed function of p_gamma (the same id for the same row), not a draw from it;
    verified positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        return out + [sample_or(residual(ps[i], qs[i]), ps[i], rng)]
    p = ps[gamma]
    if len(_NOISE) < len(p):
        _NOISE.extend(np.random.default_rng(20240611).exponential(size=len(p) - len(_NOISE)))
    e = np.asarray(_NOISE[: len(p)])  # BUG: the race needs fresh Exp(1) noise at every draw
    return out + [int(np.argmax(p / e))]


def bonus_row_sees_last_draft_twice(prefix, draft, target, gamma, rng):
    """The verification pass is fed xs + [x_{gamma-1}] (the last draft written once as a draft and
    once more as the next input) and the bonus is read from its last row, p(. | prefix + xs +
    [x_{gamma-1}]), instead of p(. | prefix + xs); the drafts' rows are right."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs + [xs[-1]])
    out = []
    for i, x in enumerate(xs):
        if rng.random() < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        return out + [sample_or(residual(ps[i], qs[i]), ps[i], rng)]
    return out + [sample(ps[-1], rng)]  # BUG: the bonus row is ps[gamma], of prefix + xs
