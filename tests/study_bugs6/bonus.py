"""Round steps whose bonus token (after a full acceptance) follows the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _accept_all_or_replace(xs, qs, ps, rng):
    """The standard test and replacement; returns (tokens, fully_accepted)."""
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out, False
    return out, True


def bonus_best_of_two_draws(prefix, draft, target, gamma, rng):
    """A "quality" heuristic on the free token: two bonus candidates are drawn from p_gamma and the
    more probable one (by p_gamma; the first on a tie) is emitted, a sharpened law instead of p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, full = _accept_all_or_replace(xs, qs, ps, rng)
    if not full:
        return out
    b1, b2 = sample(ps[gamma], rng), sample(ps[gamma], rng)
    out.append(b2 if ps[gamma][b2] > ps[gamma][b1] else b1)  # BUG: best of two draws, not one draw
    return out


def bonus_smoothed_with_uniform(prefix, draft, target, gamma, rng, eps=0.2):
    """The bonus is drawn from 0.8 p_gamma + 0.2 uniform (an epsilon-smoothing meant for the drafter
    applied on the target's bonus path); verified positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, full = _accept_all_or_replace(xs, qs, ps, rng)
    if not full:
        return out
    v = ps.shape[1]
    w = (1.0 - eps) * ps[gamma] + eps / v  # BUG: uniform smoothing of the bonus row
    out.append(sample(w, rng))
    return out


def bonus_ensembled_with_draft_row(prefix, draft, target, gamma, rng):
    """The free token is "ensembled" with the drafter: the bonus is drawn from p_gamma * q_gamma
    normalised (q_gamma = draft(prefix + xs); p_gamma when the product is 0 everywhere) instead of
    p_gamma; verified positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, full = _accept_all_or_replace(xs, qs, ps, rng)
    if not full:
        return out
    qg = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
    w = ps[gamma] * qg  # BUG: a product of experts, not the target's row
    out.append(sample_or(w, ps[gamma], rng))
    return out
