"""Round steps whose replacement law after a rejection is wrong (test and bonus are standard)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def residual_buffer_accumulates_across_positions(prefix, draft, target, gamma, rng):
    """The residual is prepared at every position before the test, into one buffer allocated per
    round and updated with += instead of =, so a rejection at position k replaces from
    sum over i <= k of (p_i - q_i)+ (the residuals of the accepted positions before it included)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    res = np.zeros(ps.shape[1])
    out = []
    for i, x in enumerate(xs):
        res += residual(ps[i], qs[i])  # BUG: accumulates; should overwrite (res = ...)
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(res, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def replacement_from_p_where_p_exceeds_q(prefix, draft, target, gamma, rng):
    """The replacement keeps the target's probabilities on the tokens where p > q (torch.where(p > q,
    p, 0)) instead of the excess p - q there: its law is p restricted to {p > q}, renormalised."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        w = np.where(ps[i] > qs[i], ps[i], 0.0)  # BUG: p on the support of the residual, not p - q
        out.append(sample_or(w, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def race_exponentials_drawn_with_weights_as_scale(prefix, draft, target, gamma, rng):
    """The replacement is drawn by the exponential race argmax(w / E) over w = (p - q)+, but the
    exponentials are drawn as rng.exponential(scale=w) (the weights passed where the race wants unit
    exponentials), so w cancels: w_i / E_i = 1 / E'_i with E' ~ Exp(1), and the replacement is uniform
    over the residual's support {p > q}."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        w = residual(ps[i], qs[i])
        e = rng.exponential(scale=w)  # BUG: scale=w; the race needs Exp(1): rng.exponential(size=len(w))
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(int(np.argmax(np.where(w > 0, w / e, -np.inf))))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_shifted_by_its_minimum(prefix, draft, target, gamma, rng):
    """The difference p - q is made non-negative by subtracting its minimum instead of clamping at 0:
    the replacement is drawn from (p - q) - min(p - q), which gives mass to every token, those with
    p <= q included."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        d = ps[i] - qs[i]
        w = d - d.min()  # BUG: a shift, not a clamp: np.maximum(d, 0)
        out.append(sample_or(w, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
