"""Round steps that take raw logits and apply the sampling settings (``--logits``), each with one
mistake in how the target's rows are processed; the drafts are processed right."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, probs, sample

from specverify.dists import process_logits, softmax

from ._common import chain


def _round(prefix, draft, target, gamma, rng, settings, target_probs):
    """Drafts under the request's settings, the target's rows from ``target_probs(logits, history)``,
    then the standard chain rule."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = probs(draft(prefix + xs), settings, prefix + xs)
        xs.append(sample(q, rng))
        qs.append(q)
    logits = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = np.array([target_probs(logits[i], prefix + xs[:i]) for i in range(gamma + 1)])
    return chain(xs, qs, ps, rng)


def target_temperature_multiplies_logits(prefix, draft, target, gamma, rng, settings):
    """The target's temperature stage multiplies the penalised logits by the temperature instead of
    dividing them (x * T for x / T), before top-k, top-p and min-p; greedy and T = 1 are right."""

    def target_probs(x, history):
        t = settings.temperature
        if settings.is_greedy or t == 1.0:
            return probs(x, settings, history)
        v = len(x)
        stage1 = dataclasses.replace(settings, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
        gen = history[settings.prompt_len :]
        y = process_logits(x, stage1, seen_counts=counts(history, v), output_counts=counts(gen, v))
        no_pen = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "logit_bias": ()}
        filters = dataclasses.replace(settings, temperature=1.0, **no_pen)
        y = process_logits(y * t, filters)  # BUG: temperature divides the logits (y / t)
        return softmax(y)

    return _round(prefix, draft, target, gamma, rng, settings, target_probs)


def frequency_penalty_counts_distinct_tokens(prefix, draft, target, gamma, rng, settings):
    """The target's generated-token counts are clipped at 1 (taken from a set of the generated ids),
    so the frequency penalty subtracts frequency_penalty once per distinct token instead of once
    per occurrence; presence and repetition penalties are right."""

    def target_probs(x, history):
        v = len(x)
        seen = counts(history, v)
        generated = np.minimum(counts(history[settings.prompt_len :], v), 1.0)  # BUG: occurrences, not distinct ids
        return softmax(process_logits(x, settings, seen_counts=seen, output_counts=generated))

    return _round(prefix, draft, target, gamma, rng, settings, target_probs)


def target_min_p_mask_from_unprocessed_logits(prefix, draft, target, gamma, rng, settings):
    """The target's min-p mask is computed from the softmax of the raw logits (before bias,
    penalties, temperature and the other filters) and applied to the processed row, instead of
    being computed on the processed row after top-k and top-p."""

    def target_probs(x, history):
        if settings.is_greedy or settings.min_p <= 0.0:
            return probs(x, settings, history)
        v = len(x)
        rest = dataclasses.replace(settings, min_p=0.0)
        gen = history[settings.prompt_len :]
        y = process_logits(x, rest, seen_counts=counts(history, v), output_counts=counts(gen, v))
        raw = softmax(x)
        y = np.where(raw < settings.min_p * raw.max(), -np.inf, y)  # BUG: min-p on the processed row
        return softmax(y) if np.isfinite(y).any() else probs(x, settings, history)

    return _round(prefix, draft, target, gamma, rng, settings, target_probs)
