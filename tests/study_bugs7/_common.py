"""Correct building blocks shared by this set's steps (no mistakes here).

The chain rule on given rows, an inverse-CDF sampler that takes its uniform explicitly, a tracker
that tells a stateful step when a new request starts, and the logits-processing pipeline of the
``--logits`` steps split into its stages (bias and penalties, temperature, top-k, top-p and min-p)
so that a step can write one stage itself.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, residual, sample, sample_or

from specverify.dists import SamplingSettings, process_logits, softmax


def verify(xs, qs, ps, rng):
    """The standard chain rule on the given drafts and rows, tolerant of a zero q (min(1, inf or NaN) = 1)."""
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = min(1.0, ps[i][x] / qs[i][x])
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


def icdf(w, u):
    """The id that the uniform ``u`` selects from the weights ``w`` by inverse CDF (w need not be normalised)."""
    c = np.cumsum(np.asarray(w, dtype=np.float64))
    i = int(np.searchsorted(c, u * c[-1], side="right"))
    return min(i, len(c) - 1)


class RequestTracker:
    """Tells a stateful step whether this round continues the request of the previous one."""

    def __init__(self):
        self.expect = None

    def is_new(self, prefix):
        return self.expect is None or list(prefix) != self.expect

    def done(self, prefix, out):
        self.expect = list(prefix) + list(out)


def penalised(logits, settings, history):
    """Stage 1: the logit bias and the penalties on one row of raw logits (repetition over the whole
    history, presence and frequency over its generated part)."""
    logits = np.asarray(logits, dtype=np.float64)
    v = len(logits)
    bare = SamplingSettings(
        repetition_penalty=settings.repetition_penalty,
        presence_penalty=settings.presence_penalty,
        frequency_penalty=settings.frequency_penalty,
        logit_bias=settings.logit_bias,
    )
    generated = list(history)[settings.prompt_len :]
    return process_logits(logits, bare, seen_counts=counts(history, v), output_counts=counts(generated, v))


def top_p_min_p(x, settings):
    """Stage 3: top-p then min-p on tempered, top-k-filtered logits; returns the probabilities."""
    rest = SamplingSettings(top_p=settings.top_p, min_p=settings.min_p, min_tokens_to_keep=settings.min_tokens_to_keep)
    return softmax(process_logits(x, rest))


def one_hot(v, i):
    out = np.zeros(v)
    out[i] = 1.0
    return out


def with_knob(settings, **kw):
    """``settings`` (a RequestSettings) with some knobs changed, its prompt length kept."""
    return dataclasses.replace(settings, **kw)
