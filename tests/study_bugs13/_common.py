"""Correct building blocks shared by this set's steps (no mistakes here).

Most helpers come from ``study_bugs._util`` and ``study_bugs10._common``; this module adds the
emission of a round from a number of kept drafts, the verify loop written out with the coin of
each position kept, the id the audit's stop unit makes heavy (the last id), and, for the
``--logits`` steps, the settings pipeline written as stages (bias, repetition penalty, additive
penalties, then greedy or temperature and the filters) with each stage and the counts pluggable,
so that a step can change one of them.
"""

from __future__ import annotations

import dataclasses

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


def last_id(row):
    """The last id of a row's vocabulary (the id the audit's stop unit makes heavy, EOS here)."""
    return len(row) - 1


# ---- the settings pipeline as stages (--logits) ---------------------------------------------------


def count_vector(ids, v):
    """Counts [v] of each id in ``ids``."""
    return np.bincount(np.asarray(list(ids), dtype=np.int64), minlength=v).astype(np.float64)[:v]


def bias_stage(z, settings):
    b = settings.bias_vector(len(z))
    return z if b is None else z + b


def repetition_stage(x, seen_counts, r):
    """The repetition penalty over the seen tokens: logit < 0 -> logit * r, else logit / r."""
    if r == 1.0:
        return x
    return np.where(seen_counts > 0, np.where(x < 0, x * r, x / r), x)


def additive_stage(x, output_counts, presence, frequency):
    """Presence and frequency penalties over the generated tokens (OpenAI / vLLM semantics)."""
    return x - presence * (output_counts > 0) - frequency * output_counts


def tail_knobs(settings):
    """The knobs from greedy / temperature on (top-k, top-p, min-p), without bias and penalties."""
    return dataclasses.replace(
        settings, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, logit_bias=()
    )


def tail_stage(x, settings):
    """Greedy, or temperature and top-k, top-p, min-p (the library's pipeline from there on)."""
    return process_logits(x, tail_knobs(settings))


def staged_logits(
    z,
    settings,
    history,
    *,
    counts=count_vector,
    repetition=repetition_stage,
    additive=additive_stage,
    tail=tail_stage,
):
    """The request's processed logits of one row of raw logits ``z`` given the history before it,
    stage by stage; with the defaults it equals ``process_logits`` on the request's histories.
    ``counts(ids, v)`` builds the count vectors, ``repetition(x, seen_counts, r)``,
    ``additive(x, output_counts, presence, frequency)`` and ``tail(x, settings)`` are the stages."""
    z = np.asarray(z, dtype=np.float64)
    v = len(z)
    seen, generated = histories(settings, history)
    x = bias_stage(z, settings)
    x = repetition(x, counts(seen, v), settings.repetition_penalty)
    if settings.presence_penalty or settings.frequency_penalty:
        x = additive(x, counts(generated, v), settings.presence_penalty, settings.frequency_penalty)
    return tail(x, settings)


def staged_probs(z, settings, history, **stages):
    return softmax(staged_logits(z, settings, history, **stages))
