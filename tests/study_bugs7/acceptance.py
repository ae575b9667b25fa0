"""Round steps whose acceptance test is wrong (the replacement and bonus are standard)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

#: nats of target entropy above which the gated step accepts without the test (log 64 = 4.16)
ENTROPY_GATE = 2.0


def residual_prepared_in_place_before_test(prefix, draft, target, gamma, rng):
    """The residual is prepared before the test in a buffer that is a view of the target row (no copy),
    so the test reads p(x) after (p - q)+ was written over it: x is accepted with probability
    min(1, (p(x) - q(x))+ / q(x)). The replacement is drawn from that buffer, the right residual
    (from q when it is empty)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = np.array(target(list(prefix), xs), dtype=np.float64)  # a writable copy of the pass
    out = []
    for i, x in enumerate(xs):
        res = ps[i]  # BUG: a view of the target row, not a copy
        np.subtract(res, qs[i], out=res)
        np.maximum(res, 0.0, out=res)
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(res, qs[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def ratio_row_indexed_by_position(prefix, draft, target, gamma, rng):
    """The ratio is computed for the whole row (min(1, p_i / q_i) over the vocabulary) and then read at
    the loop's position index i instead of at the draft token x_i."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.minimum(1.0, ps[i] / qs[i])
        if rng.random() < r[i]:  # BUG: read at the position, should be r[x]
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _entropy(p):
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def entropy_gated_acceptance(prefix, draft, target, gamma, rng):
    """A draft is accepted without the test when the target's row is uncertain (entropy above
    ENTROPY_GATE nats), on the reasoning that any plausible draft will do there; otherwise the
    standard test. Replacement and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u = rng.random()
        if _entropy(ps[i]) > ENTROPY_GATE or u < min(1.0, ps[i][x] / qs[i][x]):  # BUG: a lossy gate in an exact path
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
