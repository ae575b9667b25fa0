"""Round steps with a numerical mistake (rounding, normalisation, the random numbers' law, units)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from study_bugs6._common import verify


def rows_rounded_to_two_decimals(prefix, draft, target, gamma, rng):
    """Draft and target rows pass through a serialisation that keeps two decimals (a JSON transport
    with round(p, 2)): drafts are sampled from the true draft rows, but ratio, residual and bonus
    use the rounded rows (ids under 0.005 become 0; a draft with rounded q = 0 is accepted)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    qs = [np.round(q, 2) for q in qs]  # BUG: the rows are rounded before verification
    ps = np.round(ps, 2)
    return verify(xs, qs, ps, rng)


def residual_normalised_by_l2_norm(prefix, draft, target, gamma, rng):
    """The residual is normalised with its L2 norm (np.linalg.norm) instead of its sum, and sampled by
    inverse CDF against u in [0, 1): the cumulative weights exceed 1, so the replacement is the first
    id whose cumulative (p - q)+ / ||(p - q)+||_2 passes u, biased towards low ids."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        w = residual(ps[i], qs[i])
        c = np.cumsum(w / np.linalg.norm(w))  # BUG: L2 norm, not the sum
        out.append(int(min(np.searchsorted(c, rng.random(), side="right"), len(w) - 1)))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def coin_from_normal_not_uniform(prefix, draft, target, gamma, rng):
    """The acceptance coin is drawn with standard_normal (torch.randn_like for torch.rand_like):
    a draft is accepted iff Z < min(1, p/q), Z ~ N(0, 1), i.e. with probability Phi(min(1, p/q)),
    between 0.5 and 0.84; replacement and bonus standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u = rng.standard_normal()  # BUG: a Gaussian, not a uniform on [0, 1)
        if u < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def probs_treated_as_logprobs_in_ratio(prefix, draft, target, gamma, rng):
    """The verifier expects log-probabilities and computes the ratio as exp(lp - lq), but it is
    handed probabilities: x is accepted with probability min(1, exp(p(x) - q(x))) (near 1 for every
    draft); replacement from (p - q)+ and bonus standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        a = min(1.0, float(np.exp(ps[i][x] - qs[i][x])))  # BUG: exp of a difference of probabilities
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
