"""Correct round steps written in unusual ways (each exactly lossless): the study's decoys."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, target_rows


def vectorised_round(prefix, draft, target, gamma, rng):
    """Everything after drafting as array operations: the coins, the accepted prefix (the first
    False of the mask via argmin on a padded mask), the replacement and the bonus from one table of
    candidate laws.

    Exact: the padded mask [acc..., False] has its first False at the first rejection, or at gamma
    when every draft passed; row n of the law table is (p_n - q_n)+ for n < gamma and p_gamma
    for n = gamma.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    q = np.stack(qs)
    idx = np.arange(gamma)
    acc = rng.random(gamma) * q[idx, xs] < ps[idx, xs]
    n = int(np.argmin(np.append(acc, False)))
    laws = np.vstack([np.maximum(ps[:gamma] - q, 0.0), ps[gamma:]])
    return list(xs[:n]) + [sample(laws[n], rng)]


def log_space(prefix, draft, target, gamma, rng):
    """The test in log space, log(u) < log p(x) - log q(x); the replacement and the bonus by
    Gumbel-max on the logs of their weights.

    Exact: log is increasing, so log u < log(p/q) iff u < p/q, and u < p/q with u < 1 is the same
    event as u < min(1, p/q); Gumbel-max samples the normalised weights.
    """
    prefix = list(prefix)

    def gumbel(w):
        with np.errstate(divide="ignore"):
            return int(np.argmax(np.log(w) + rng.gumbel(size=len(w))))

    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore"):
            log_ratio = np.log(ps[i][x]) - np.log(qs[i][x])
        if np.log(rng.random()) < log_ratio:
            out.append(x)
            continue
        out.append(gumbel(residual(ps[i], qs[i])))
        return out
    out.append(gumbel(ps[gamma]))
    return out


def residual_from_cumsum_difference(prefix, draft, target, gamma, rng):
    """The replacement's weights as p - min(p, q) and the draw by a cumulative-sum search with the
    uniform scaled by the total mass (no normalisation).

    Exact: p - min(p, q) = (p - q)+ elementwise, and searchsorted(cumsum(w), u * sum(w), 'right')
    returns id k with probability w_k / sum(w).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        w = ps[i] - np.minimum(ps[i], qs[i])
        c = np.cumsum(w)
        k = int(np.searchsorted(c, rng.random() * c[-1], side="right"))
        out.append(min(k, len(w) - 1))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def while_loop_interleaved(prefix, draft, target, gamma, rng):
    """A while loop that drafts, then verifies with an index that only advances on acceptance, the
    coin written as u * q(x) < p(x) and the bonus folded into the loop as position gamma.

    Exact: the same rule as the article's for-loop (u * q < p iff u < p / q for q > 0), with the
    bonus drawn from row gamma when the index reaches it.
    """
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, i = [], 0
    while True:
        if i == gamma:
            out.append(sample(ps[gamma], rng))
            break
        x = xs[i]
        if rng.random() * qs[i][x] < ps[i][x]:
            out.append(x)
            i += 1
        else:
            out.append(sample(np.clip(ps[i] - qs[i], 0.0, None), rng))
            break
    return out
