"""Round steps whose accepted count, or the tokens emitted from it, is wrong."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def kept_slice_negative_index(prefix, draft, target, gamma, rng):
    """The rejected tail is dropped with a negative slice xs[:n - gamma]: right for n < gamma, but on
    a full acceptance xs[:0] is empty, so the round emits only the bonus token drawn from p_gamma
    (its context assumes all drafts, which are not emitted)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n = gamma
    for i, x in enumerate(xs):
        if rng.random() >= min(1.0, ps[i][x] / qs[i][x]):
            n = i
            break
    kept = xs[: n - gamma]  # BUG: n - gamma is 0 on a full acceptance, which keeps nothing
    if n < gamma:
        return kept + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
    return kept + [sample(ps[gamma], rng)]


def coins_sorted_before_test(prefix, draft, target, gamma, rng):
    """The gamma acceptance coins are drawn at once and sorted ascending (an order-statistics trick
    borrowed from batched inverse-CDF sampling): position i is tested with the i-th smallest of
    gamma uniforms, not an independent uniform; replacement and bonus standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    u = np.sort(rng.random(gamma))  # BUG: sorting makes the coins dependent and biased per position
    out = []
    for i, x in enumerate(xs):
        if u[i] < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def replacement_matching_next_draft_continues(prefix, draft, target, gamma, rng):
    """After a rejection at i, if the replacement equals the next draft x_{i+1}, the step treats
    x_{i+1} as "recovered" and keeps verifying x_{i+2}.. against the pass's rows, which are
    conditioned on xs (x_i in the context), not on the emitted xs[:i] + [r]; otherwise standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    i = 0
    while i < gamma:
        x = xs[i]
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            i += 1
            continue
        r = sample_or(residual(ps[i], qs[i]), ps[i], rng)
        out.append(r)
        if i + 1 < gamma and r == xs[i + 1]:
            i += 2  # BUG: later rows were computed with x_i, not r, in their context
            continue
        return out
    out.append(sample(ps[gamma], rng))
    return out
