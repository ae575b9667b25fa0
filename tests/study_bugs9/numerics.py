"""Round steps with a numerical mistake: a coin with the wrong range or law, a residual
whose negative entries are never cleared."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows

from ._common import chain, icdf, ratio


def coin_as_sum_of_two_uniforms(prefix, draft, target, gamma, rng):
    """The acceptance coin mixes two uniform draws as u1 + u2 without the mod 1, a coin on [0, 2)
    (triangular): a draft is accepted with probability r^2 / 2 (r = min(1, p/q)) instead of r."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def accept(i, x, p, q, u):
        u = u + rng.random()  # BUG: (u + u2) % 1 is uniform; u + u2 is not
        return u < ratio(p, q, x)

    return chain(xs, qs, ps, rng, accept=accept)


def coin_from_31_bit_integer_over_two_to_32(prefix, draft, target, gamma, rng):
    """The acceptance coin is a 31-bit random integer divided by 2**32, uniform on [0, 0.5):
    a draft is accepted with probability min(1, 2 p(x) / q(x))."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u = int(rng.integers(0, 2**31)) / 2**32  # BUG: a 31-bit integer scaled by 2**-32
        if u < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        w = np.maximum(ps[i] - qs[i], 0.0)
        out.append(icdf(w if w.sum() > 0 else ps[i], rng.random()))
        return out
    out.append(icdf(ps[gamma], rng.random()))
    return out


def residual_negatives_cleared_on_loop_variable(prefix, draft, target, gamma, rng):
    """The residual's negative entries are "cleared" by assigning to the loop variable
    (for v in w: v = max(v, 0.0)), which leaves the array unchanged: the replacement is drawn by
    inverse CDF over p - q itself, whose total is about 0, i.e. at the first id where the running sum
    of p - q turns positive."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        w = p - q
        for v in w:
            v = max(v, 0.0)  # BUG: rebinds the loop variable; w keeps its negatives
        return icdf(w, rng.random())

    return chain(xs, qs, ps, rng, replace=replace)
