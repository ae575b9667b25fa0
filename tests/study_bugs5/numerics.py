"""Round steps with a numerical mistake: a wrong function, a missing cumulative sum, a
normalisation over the wrong extent."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def log1p_used_for_log_probs(prefix, draft, target, gamma, rng):
    """The test runs in log space, log u < log p(x) - log q(x), with the log-probabilities taken
    as ``log1p(p)`` and ``log1p(q)``: the draft is accepted with probability
    min(1, (1 + p(x)) / (1 + q(x))), close to 1 for every draft. Replacement and bonus are standard.

    Written for the study: log1p picked "for numerical stability" where log was meant (next to
    vllm-project/vllm PR #46665, the sampler's log-space arithmetic).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        log_ratio = np.log1p(ps[i][x]) - np.log1p(qs[i][x])  # BUG: np.log(p) - np.log(q)
        if np.log(rng.random()) < log_ratio:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _searchsorted_weights(w, u):
    """The replacement's inverse CDF as written, without the cumulative sum."""
    w = np.asarray(w, dtype=np.float64)
    i = np.searchsorted(w, u * w.sum(), side="right")  # BUG: np.searchsorted(np.cumsum(w), ...)
    return int(min(i, len(w) - 1))


def inverse_cdf_without_cumsum(prefix, draft, target, gamma, rng):
    """The replacement is drawn by ``searchsorted(w, u * w.sum())`` on the residual weights
    w = (p - q)+ themselves instead of their cumulative sum: a binary search over an unsorted
    array, whose answer is a function of where u * sum(w) falls among a few entries of w (capped
    at the last id), not a draw from w. Acceptance and bonus are standard.

    Written for the study: the cumsum dropped from an inverse-CDF sampler (the form of
    docs/examples' samplers and of vLLM V0's multinomial fallback).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        w = residual(ps[i], qs[i])
        if w.sum() <= 0:
            w = ps[i]
        out.append(_searchsorted_weights(w, rng.random()))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def renormalise_without_axis(prefix, draft, target, gamma, rng):
    """The target block is "renormalised for safety" with ``P / P.sum()`` without
    ``axis=-1, keepdims=True``: every row is divided by gamma + 1, so the ratio is
    p(x) / ((gamma + 1) q(x)) and the residual (p / (gamma + 1) - q)+; the bonus (sampled after
    normalising its weights) is unaffected.

    Written for the study: a reduction missing its axis (class of B01,
    huggingface/transformers#28508: the residual's normalisation done wrong).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ps = ps / ps.sum()  # BUG: ps / ps.sum(axis=-1, keepdims=True)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
