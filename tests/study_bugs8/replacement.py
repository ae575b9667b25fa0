"""Round steps whose replacement after a rejection is drawn from the wrong law (test and bonus right)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, target_rows

from ._common import chain


def residual_computed_once_before_loop(prefix, draft, target, gamma, rng):
    """The residual is hoisted out of the verification loop and computed for position 0: a
    rejection at position k > 0 replaces from (p_0 - q_0)+ instead of (p_k - q_k)+."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    w0 = residual(ps[0], qs[0])  # BUG: the residual belongs to the rejected position's rows

    return chain(xs, qs, ps, rng, replace=lambda i, p, q: w0)


def residual_weights_squared(prefix, draft, target, gamma, rng):
    """The residual is squared before sampling (its squared entries taken from a norm computation):
    the replacement is drawn proportionally to ((p - q)+)^2."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        return residual(p, q) ** 2  # BUG: the weights are (p - q)+, not its square

    return chain(xs, qs, ps, rng, replace=replace)


def residual_divided_by_draft_row(prefix, draft, target, gamma, rng):
    """The residual is divided entrywise by the draft row where q > 0 (as the ratio is): the
    replacement is drawn proportionally to (p - q)+ / q (and (p - q)+ = p where q = 0)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        w = residual(p, q)
        return np.divide(w, q, out=w.copy(), where=q > 0)  # BUG: (p - q)+ needs no division by q

    return chain(xs, qs, ps, rng, replace=replace)


def residual_written_as_elementwise_max_of_rows(prefix, draft, target, gamma, rng):
    """The residual is written np.maximum(p, q) (the clamp's arguments slipped) instead of
    np.maximum(p - q, 0): the replacement is drawn proportionally to max(p, q), which gives mass to
    tokens the target never emits and to the rejected draft."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        return np.maximum(p, q)  # BUG: np.maximum(p - q, 0.0)

    return chain(xs, qs, ps, rng, replace=replace)
