"""Correct building blocks shared by this set's steps (no mistakes here).

Most helpers come from ``study_bugs._util`` and ``study_bugs10._common``; this module adds the
emission of a round from a number of kept drafts, a row sampler that excludes nothing, and the
settings pipeline's stages after the additive penalties, so that a ``--logits`` step can swap the
repetition penalty or the top-p stage alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, residual, sample, sample_or
from study_bugs10._common import additive_penalties, histories, tail_knobs

from specverify.dists import process_logits, softmax


def emit(xs, qs, ps, n, rng):
    """The round's tokens after ``n`` kept drafts: xs[:n] and a draw from (p_n - q_n)+ (p_n when
    empty), or every draft and a bonus from p_gamma when n == len(xs)."""
    if n >= len(xs):
        return list(xs) + [sample(ps[len(xs)], rng)]
    return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]


def before_top_p(settings):
    """The knobs from temperature on, with top-p and min-p off (greedy or temperature, top-k)."""
    return dataclasses.replace(tail_knobs(settings), top_p=1.0, min_p=0.0)


def only_min_p(settings):
    """The min-p stage alone (with min_tokens_to_keep)."""
    return dataclasses.replace(tail_knobs(settings), temperature=1.0, top_k=0, top_p=1.0, temperature_last=False)


def repetition_loop(x, seen, penalty, ids):
    """The repetition penalty applied by a loop over ``ids`` (every id must be one of ``seen``)."""
    x = np.array(x, dtype=np.float64)
    for t in ids:
        x[t] = x[t] * penalty if x[t] < 0 else x[t] / penalty
    return x


def pipeline_with_repetition(logits, settings, history, ids_of):
    """The request's processed law of one row of raw logits, with the repetition penalty applied by
    :func:`repetition_loop` over ``ids_of(seen)`` (bias first, then that penalty, then the additive
    penalties, then greedy or temperature and the filters)."""
    z = np.asarray(logits, dtype=np.float64)
    seen, generated = histories(settings, history)
    bias = settings.bias_vector(len(z))
    x = z if bias is None else z + bias
    if settings.repetition_penalty != 1.0:
        x = repetition_loop(x, seen, settings.repetition_penalty, ids_of(seen))
    x = additive_penalties(x, counts(generated, len(z)), settings.presence_penalty, settings.frequency_penalty)
    return softmax(process_logits(x, tail_knobs(settings)))
