"""Round steps whose acceptance test has the wrong form."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _finish(out, xs, ps, rng):
    out.append(sample(ps[len(xs)], rng))
    return out


def additive_acceptance_one_plus_p_minus_q(prefix, draft, target, gamma, rng):
    """The ratio is linearised (p/q = exp(log p - log q) ~ 1 + p - q): x is accepted with probability
    min(1, 1 + p(x) - q(x)) = 1 - (q(x) - p(x))+; replacement and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        a = min(1.0, 1.0 + ps[i][x] - qs[i][x])  # BUG: an additive difference in place of the ratio p/q
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, xs, ps, rng)


def ratio_branch_forgets_division(prefix, draft, target, gamma, rng):
    """min(1, p/q) written as a branch, the division dropped in the second arm: x is accepted surely
    when p(x) >= q(x) and otherwise with probability p(x) (not p(x) / q(x)); residual and bonus standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p, q = ps[i][x], qs[i][x]
        a = 1.0 if p >= q else p  # BUG: the second arm should be p / q
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, xs, ps, rng)


def acceptance_floor_for_supported_drafts(prefix, draft, target, gamma, rng, floor=0.3):
    """A "lenient" acceptance: a draft the target supports (p(x) > 0) is accepted with probability
    max(min(1, p(x) / q(x)), 0.3), one it does not support is rejected; replacement from (p - q)+ and
    bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        a = min(1.0, ps[i][x] / qs[i][x])
        if ps[i][x] > 0:
            a = max(a, floor)  # BUG: a floor on the acceptance probability
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, xs, ps, rng)


def textbook_rejection_constant(prefix, draft, target, gamma, rng):
    """Speculative sampling confused with textbook rejection sampling: x is accepted with probability
    (p(x) / q(x)) / M, M = max over {v: q(v) > 0} of p(v) / q(v) (the envelope constant), instead of
    min(1, p(x) / q(x)); on rejection the replacement is drawn from (p - q)+; bonus standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p, q = ps[i], qs[i]
        sup = q > 0
        m = float(np.max(p[sup] / q[sup]))
        a = (p[x] / q[x]) / m  # BUG: divided by the envelope constant instead of clipped at 1
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(p, q), p, rng))
        return out
    return _finish(out, xs, ps, rng)
