"""Round steps whose bonus token (every draft accepted) comes from the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows

from ._common import accept_mask, emit


def bonus_from_mean_of_pass_rows(prefix, draft, target, gamma, rng):
    """The bonus is drawn from the mean of the verification pass's gamma + 1 rows (a "pooled"
    next-token estimate) instead of from its last row p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    if not acc.all():
        return emit(int(np.argmax(~acc)), xs, qs, ps, rng)
    return list(xs) + [sample(ps.mean(axis=0), rng)]  # BUG: the bonus row is ps[gamma]


def bonus_inverse_cdf_on_exclusive_cumsum(prefix, draft, target, gamma, rng):
    """The bonus is drawn by inverse CDF against the exclusive prefix sums (0, p_0, p_0 + p_1, ...)
    with side="right": the id found is one past the one the uniform selects (clipped at V - 1)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    if not acc.all():
        return emit(int(np.argmax(~acc)), xs, qs, ps, rng)
    p = ps[gamma]
    c = np.concatenate(([0.0], np.cumsum(p)[:-1]))  # BUG: exclusive sums with side="right" shift the id by one
    i = int(np.searchsorted(c, rng.random() * p.sum(), side="right"))
    return list(xs) + [min(i, len(p) - 1)]


def bonus_inserted_at_minus_one(prefix, draft, target, gamma, rng):
    """The bonus is put into the output with out.insert(-1, bonus), which inserts before the last
    element: a fully accepted round emits x_0 .. x_{gamma-2}, the bonus, then x_{gamma-1}."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    if not acc.all():
        return emit(int(np.argmax(~acc)), xs, qs, ps, rng)
    out = list(xs)
    out.insert(-1, sample(ps[gamma], rng))  # BUG: insert(-1, ...) is not append
    return out
