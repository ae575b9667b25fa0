"""Correct building blocks shared by this set's steps (no mistakes here)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import residual, sample, sample_or


def verify(xs, qs, ps, rng):
    """The standard chain rule on the given drafts and rows, tolerant of a zero q (min(1, inf or NaN) = 1)."""
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = min(1.0, ps[i][x] / qs[i][x])
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


class RequestTracker:
    """Tells a stateful step whether this round continues the request of the previous one."""

    def __init__(self):
        self.expect = None

    def is_new(self, prefix):
        return self.expect is None or list(prefix) != self.expect

    def done(self, prefix, out):
        self.expect = list(prefix) + list(out)
