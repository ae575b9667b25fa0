"""Round steps whose arithmetic (normalisers, quantisation) changes the law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def residual_normalised_over_wrong_axis(prefix, draft, target, gamma, rng):
    """The residuals of all positions are computed at once as R = (P[:gamma] - Q)+ [gamma, V] and
    normalised with ``R.sum(axis=0)`` (over the positions) instead of ``axis=-1``; the replacement
    at position i is then drawn with weights R[i, v] / sum_j R[j, v], not (p_i - q_i)+.

    Written for the study: the vectorised residual of a batched kernel with the reduction axis of a
    [positions, vocab] array mixed up.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    res = np.maximum(ps[:gamma] - np.asarray(qs), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.nan_to_num(res / res.sum(axis=0, keepdims=True))  # BUG: axis=0, not axis=-1
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(norm[i], ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _u8(w):
    """A probability row stored as uint8 (round to the nearest 1/255) and read back."""
    return np.round(np.asarray(w, dtype=np.float64) * 255.0) / 255.0


def probabilities_stored_as_uint8(prefix, draft, target, gamma, rng):
    """The draft and target rows pass through a uint8 cache (p rounded to the nearest 1/255) before
    verification: the ratio and the residual use the rounded rows (a probability under 1/510
    becomes 0: a draft whose rounded q is 0 is always accepted, the ratio being inf or NaN, which
    ``min(1.0, nan)`` turns into 1; one whose rounded p is 0 and q not is never accepted), while the
    drafts were sampled from the exact q and the bonus from the exact p.

    Written for the study from the compact probability caches of draft-model paths (vLLM MRV2 caches
    draft logits, #35461) and deepseek-ai/DeepSpec#31 (B34: q in another precision than sampled).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p8, q8 = _u8(ps[i]), _u8(qs[i])  # BUG: verification on quantised rows
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = p8[x] / q8[x]
        if rng.random() < min(1.0, ratio):
            out.append(x)
            continue
        out.append(sample_or(residual(p8, q8), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_normaliser_before_clamp(prefix, draft, target, gamma, rng):
    """The residual's normaliser is taken before the clamp, sum(p - q) (which is 0 up to rounding),
    instead of sum (p - q)+, and the weights are sampled by an inverse CDF that trusts them to sum
    to 1: the replacement becomes a function of the residual's support and the sign of a rounding
    error (the first id of the support when the normaliser is a tiny positive number, weights of
    order 1e16; an id fixed by the binary search on a decreasing or NaN cumulative sum when it is
    negative or exactly 0), never a draw from (p - q)+.

    Written for the study: ``(p - q).clamp(min=0) / (p - q).sum()`` with the normaliser computed on
    the unclamped difference (the residual normalisation of B01, huggingface/transformers#28508, and
    vLLM's B43 floor are the neighbouring mistakes).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        d = ps[i] - qs[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.maximum(d, 0.0) / d.sum()  # BUG: the sum of the unclamped difference
        c = np.cumsum(w)
        out.append(min(int(np.searchsorted(c, rng.random(), side="right")), len(c) - 1))
        return out
    out.append(sample(ps[gamma], rng))
    return out
