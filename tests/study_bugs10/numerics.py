"""Round steps whose mistake is numerical: coins, probabilities or weights in the wrong number
format."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from ._common import chain, ratio


def log_coin_taken_with_log1p(prefix, draft, target, gamma, rng):
    """The log-space test log(u) < log p(x) - log q(x) takes the coin's logarithm with np.log1p
    (reached for as the 'accurate' log) instead of np.log: log1p(u) >= 0, so a draft with p(x) <
    q(x) is never accepted and one with p(x) >= q(x) is accepted with probability min(1, p/q - 1);
    replacement and bonus are standard."""

    def accept(i, x, p, q, u):
        with np.errstate(divide="ignore"):
            return bool(np.log1p(u) < np.log(p[x]) - np.log(q[x]))  # BUG: the coin's log is np.log(u)

    xs, qs = draft_chain(prefix, draft, gamma, rng)
    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def coin_drawn_as_random_bit(prefix, draft, target, gamma, rng):
    """The acceptance coin is drawn with rng.integers(0, 2) (a random bit) where a uniform on [0, 1)
    was meant: a draft with p(x) > 0 is accepted with probability 1/2 whatever its ratio (the coin 1
    never passes, the coin 0 passes whenever min(1, p/q) > 0); replacement and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u = int(rng.integers(0, 2))  # BUG: the coin must be a uniform on [0, 1) (rng.random())
        if u < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


SCALE = 1 << 16


def residual_in_unsigned_fixed_point_wraps(prefix, draft, target, gamma, rng):
    """The residual is computed on probabilities in unsigned 16.16 fixed point (uint32) as P - Q,
    which wraps around to about 2**32 where q > p instead of clamping at 0: the replacement is
    drawn almost uniformly over the ids with q > p (the rejected draft included)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        big_p = np.round(np.asarray(p) * SCALE).astype(np.uint32)
        big_q = np.round(np.asarray(q) * SCALE).astype(np.uint32)
        w = big_p - big_q  # BUG: unsigned subtraction wraps; must be np.maximum(big_p, big_q) - big_q
        return sample_or(w.astype(np.float64), p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)
