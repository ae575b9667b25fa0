"""Round steps whose token after a rejection follows the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _chain(prefix, draft, target, gamma, rng, replace):
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        a = min(1.0, ps[i][x] / qs[i][x])
        if rng.random() < a:
            out.append(x)
            continue
        out.append(replace(ps, qs, i, x, a))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_scaled_by_acceptance_prob(prefix, draft, target, gamma, rng):
    """The replacement is drawn from (p - a q)+ with a = min(1, p(x) / q(x)) the rejected draft's
    acceptance probability (the rejection mass conflated with the draft row's weight), instead of
    (p - q)+; the acceptance test and bonus are standard."""

    def replace(ps, qs, i, x, a):
        w = np.maximum(ps[i] - a * qs[i], 0.0)  # BUG: q scaled by the acceptance probability
        return sample_or(w, ps[i], rng)

    return _chain(prefix, draft, target, gamma, rng, replace)


def residual_against_block_mean_draft_row(prefix, draft, target, gamma, rng):
    """The residual subtracts the mean of the block's draft rows ("the drafter's distribution over
    the block"): the replacement after a rejection at i is drawn from (p_i - mean_j q_j)+ instead of
    (p_i - q_i)+; correct only for gamma = 1."""

    def replace(ps, qs, i, x, a):
        qbar = np.mean(np.asarray(qs), axis=0)  # BUG: the block's mean draft row, not row i
        return sample_or(residual(ps[i], qbar), ps[i], rng)

    return _chain(prefix, draft, target, gamma, rng, replace)


def replacement_resampled_from_p_until_not_draft(prefix, draft, target, gamma, rng):
    """The replacement is drawn from p_i again and again until it differs from the rejected draft:
    the law p_i(v) 1[v != x] / (1 - p_i(x)) instead of (p_i - q_i)+ normalised."""

    def replace(ps, qs, i, x, a):
        if ps[i][x] >= 1.0 - 1e-12:
            return sample(ps[i], rng)
        while True:
            r = sample(ps[i], rng)  # BUG: resampling the target row, excluding only the rejected id
            if r != x:
                return r

    return _chain(prefix, draft, target, gamma, rng, replace)


def residual_truncated_to_top3(prefix, draft, target, gamma, rng):
    """The recovered-token sampler keeps only the 3 largest entries of the residual (a top-k kernel
    reused "for speed"): the replacement is drawn from (p_i - q_i)+ restricted to its top 3 ids."""

    def replace(ps, qs, i, x, a):
        w = residual(ps[i], qs[i])
        keep = np.argsort(-w, kind="stable")[:3]
        w3 = np.zeros_like(w)
        w3[keep] = w[keep]  # BUG: the residual's tail beyond its top 3 ids is dropped
        return sample_or(w3, ps[i], rng)

    return _chain(prefix, draft, target, gamma, rng, replace)
