"""Round steps whose token after a rejection is not drawn from (p - q)+ normalised."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _with_replacement(prefix, draft, target, gamma, rng, replace):
    """The standard round with ``replace(ps, qs, xs, i, rng) -> id`` as the token after a rejection
    at position i; the test is u < min(1, p/q) and the bonus comes from row gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(int(replace(ps, qs, xs, i, rng)))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _icdf_normalised(w, u):
    """Inverse CDF for weights the caller believes sum to 1 (no rescaling of u); an id past the end
    is clamped to the last one, as a kernel's bounds check would."""
    c = np.cumsum(w)
    return min(int(np.searchsorted(c, u, side="right")), len(w) - 1)


def residual_is_overlap_min_p_q(prefix, draft, target, gamma, rng):
    """The replacement is drawn from min(p, q) normalised (the overlap of the two laws) instead of
    p - min(p, q) = (p - q)+.

    Written for the study: the residual written as ``minimum(p, q)`` with the ``p -`` in front lost.
    """

    def replace(ps, qs, xs, i, rng):
        return sample_or(np.minimum(ps[i], qs[i]), ps[i], rng)  # BUG: p - min(p, q) intended

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_in_reduced_draft_vocab(prefix, draft, target, gamma, rng):
    """The residual is computed in the drafter's reduced vocabulary (the first 3V/4 ids, the
    mapping a trimmed draft head uses) and mapped back, so a replacement can never be one of the
    ids the draft vocabulary leaves out; an empty residual falls back to p.

    Written for the study from EAGLE-3's reduced draft vocabulary (d2t / t2d mappings; SPEED-Bench's
    note that vocabulary pruning hurts the long tail, engines notes section 5): the replacement
    computed on the draft side of the mapping.
    """

    def replace(ps, qs, xs, i, rng):
        v = len(ps[i])
        kept = (3 * v) // 4
        w = residual(ps[i], qs[i])
        w[kept:] = 0.0  # BUG: ids outside the draft vocabulary lose their residual mass
        return sample_or(w, ps[i], rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_p_times_one_minus_q(prefix, draft, target, gamma, rng):
    """The replacement is drawn from p(v) (1 - q(v)) normalised, "the target would pick v and the
    draft would not", instead of (p - q)+: tokens with p(v) < q(v) keep mass they must not have.

    Written for the study: the residual derived as if target and draft picked independently.
    """

    def replace(ps, qs, xs, i, rng):
        w = np.asarray(ps[i]) * (1.0 - np.asarray(qs[i]))  # BUG: (p - q)+ intended
        return sample_or(w, ps[i], rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def gumbel_on_probabilities_not_logs(prefix, draft, target, gamma, rng):
    """The replacement uses the Gumbel-max trick on the residual, but the Gumbel noise is added to
    the residual weights themselves instead of their logarithms: argmax over the support of
    (p - q)+ of w + G, a law much flatter than (p - q)+ over its support (w <= 1 moves a Gumbel
    variable of scale 1 little).

    Written for the study from vLLM V1's noise-based recovered-token sampling (argmax of
    (p - q)+ / E, engines notes section 1.4) rewritten as Gumbel-max without the log.
    """

    def replace(ps, qs, xs, i, rng):
        w = residual(ps[i], qs[i])
        if w.sum() <= 0:
            w = np.asarray(ps[i], dtype=np.float64)
        g = rng.gumbel(size=len(w))
        return int(np.argmax(np.where(w > 0, w + g, -np.inf)))  # BUG: log(w) + g

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_normalised_by_token_rejection_prob(prefix, draft, target, gamma, rng):
    """The residual (p - q)+ is divided by the rejection probability of the drafted token,
    1 - min(1, p(x) / q(x)), instead of its own sum sum (p - q)+ = TV(p, q), and sampled by an
    inverse CDF that trusts the weights to sum to 1 (an overshoot is clamped to the last id).

    Written for the study: the row-level normaliser 1 - beta confused with the token-level
    rejection probability of x.
    """

    def replace(ps, qs, xs, i, rng):
        x = xs[i]
        reject = 1.0 - min(1.0, ps[i][x] / qs[i][x])
        w = residual(ps[i], qs[i]) / reject  # BUG: should be / residual(...).sum()
        return _icdf_normalised(w, rng.random())

    return _with_replacement(prefix, draft, target, gamma, rng, replace)
