"""Correct building blocks shared by this set's steps (no mistakes here).

Most helpers come from ``study_bugs._util`` and ``study_bugs10._common``; this module adds the
emission of a round from a number of kept drafts, the verify loop written out with the coin of
each position kept (for the steps that reuse a coin), and the request's processed target rows
with a pluggable processing of one row (for the ``--logits`` steps).
"""

from __future__ import annotations

import numpy as np
from study_bugs._util import residual, sample, sample_or
from study_bugs10._common import histories, ratio

from specverify.dists import process_logits, softmax


def emit(xs, qs, ps, n, rng):
    """The round's tokens after ``n`` kept drafts: xs[:n] and a draw from (p_n - q_n)+ (p_n when
    empty), or every draft and a bonus from p_gamma when n == len(xs)."""
    if n >= len(xs):
        return list(xs) + [sample(ps[len(xs)], rng)]
    return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]


def leading_accepts(xs, qs, ps, rng):
    """The standard sequential verify loop's outcome: (n, coins), with n the number of leading
    accepted drafts and ``coins`` the uniforms drawn (one per tested position)."""
    coins = []
    for i, x in enumerate(xs):
        u = rng.random()
        coins.append(u)
        if not u < ratio(ps[i], qs[i], x):
            return i, coins
    return len(xs), coins


def row_probs(z, settings, history, *, knobs=None, seen=None, generated=None):
    """The processed law of one row of raw logits ``z``: ``knobs`` (settings) replaces the sampling
    knobs, ``seen`` / ``generated`` replace the penalty histories (the request's by default)."""
    z = np.asarray(z, dtype=np.float64)
    s, g = histories(settings, history)
    seen = s if seen is None else seen
    generated = g if generated is None else generated
    v = len(z)
    sc = np.bincount(np.asarray(seen, dtype=np.int64), minlength=v).astype(np.float64)[:v]
    oc = np.bincount(np.asarray(generated, dtype=np.int64), minlength=v).astype(np.float64)[:v]
    return softmax(process_logits(z, settings if knobs is None else knobs, seen_counts=sc, output_counts=oc))
