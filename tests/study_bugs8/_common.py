"""Correct building blocks shared by this set's steps (no mistakes here).

The chain rule on given rows with a pluggable acceptance test, replacement and bonus law; one coin
per position as an accept mask; the emission of a round from a number of accepted drafts; an
inverse-CDF sampler; and a tracker that tells a stateful step when a new request starts.
"""

from __future__ import annotations

import numpy as np
from study_bugs._util import residual, sample, sample_or


def ratio(p, q, x):
    """min(1, p(x) / q(x)), 1 where q(x) = 0 (a draft q never proposes)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = p[x] / q[x]
    return 1.0 if not np.isfinite(r) else min(1.0, float(r))


def chain(xs, qs, ps, rng, *, accept=None, replace=None, bonus=None):
    """The chain rule on the given drafts and rows; ``accept(i, x, p, q, u)``, ``replace(i, p, q)``
    (weights) and ``bonus(ps)`` (weights) override the standard test, residual and bonus row."""
    out = []
    for i, x in enumerate(xs):
        u = rng.random()
        ok = accept(i, x, ps[i], qs[i], u) if accept else u < ratio(ps[i], qs[i], x)
        if ok:
            out.append(x)
            continue
        w = replace(i, ps[i], qs[i]) if replace else residual(ps[i], qs[i])
        out.append(sample_or(w, ps[i], rng))
        return out
    out.append(sample(bonus(ps) if bonus else ps[len(xs)], rng))
    return out


def accept_mask(xs, qs, ps, rng):
    """One coin per position, all at once: accept[i] = u_i < min(1, p_i(x_i) / q_i(x_i))."""
    return rng.random(len(xs)) < np.array([ratio(ps[i], qs[i], x) for i, x in enumerate(xs)])


def emit(n, xs, qs, ps, rng):
    """xs[:n], then the replacement from (p_n - q_n)+ (n < gamma) or the bonus from p_gamma."""
    if n < len(xs):
        return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
    return list(xs) + [sample(ps[len(xs)], rng)]


def icdf(w, u):
    """The id that the uniform ``u`` selects from the weights ``w`` by inverse CDF."""
    c = np.cumsum(np.asarray(w, dtype=np.float64))
    return min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)


class RequestTracker:
    """Tells a stateful step whether this round continues the request of the previous one."""

    def __init__(self):
        self.expect = None

    def is_new(self, prefix):
        return self.expect is None or list(prefix) != self.expect

    def done(self, prefix, out):
        self.expect = list(prefix) + list(out)
