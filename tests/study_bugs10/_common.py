"""Correct building blocks shared by this set's steps (no mistakes here).

The chain rule on given rows with a pluggable acceptance test, replacement and bonus law; one coin
per position as an accept mask; the index of the first rejection; an inverse-CDF sampler; a
tracker that tells a stateful step when a new request starts; and, for the steps that take
``--logits``, the request's processed law of a row of raw logits (penalty histories as
:meth:`SamplingSettings.penalty_history` defines them), a drafter that samples from that law, and
the settings pipeline run as three stages (bias and repetition penalty; the additive penalties;
greedy or temperature and the filters) so that a step can swap one stage.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, residual, sample, sample_or

from specverify.dists import process_logits, softmax


def ratio(p, q, x):
    """min(1, p(x) / q(x)), 1 where q(x) = 0 (a draft q never proposes)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = p[x] / q[x]
    return 1.0 if not np.isfinite(r) else min(1.0, float(r))


def chain(xs, qs, ps, rng, *, accept=None, replace=None, bonus=None):
    """The chain rule on the given drafts and rows; ``accept(i, x, p, q, u)`` (bool),
    ``replace(i, p, q)`` (a token id) and ``bonus(p)`` (a token id) override the standard test, the
    residual draw and the bonus draw."""
    out = []
    for i, x in enumerate(xs):
        u = rng.random()
        ok = accept(i, x, ps[i], qs[i], u) if accept else u < ratio(ps[i], qs[i], x)
        if ok:
            out.append(x)
            continue
        out.append(replace(i, ps[i], qs[i]) if replace else sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(bonus(ps[len(xs)]) if bonus else sample(ps[len(xs)], rng))
    return out


def accept_mask(xs, qs, ps, rng):
    """One coin per position, all at once: accept[i] = u_i < min(1, p_i(x_i) / q_i(x_i))."""
    return rng.random(len(xs)) < np.array([ratio(ps[i], qs[i], x) for i, x in enumerate(xs)])


def first_rejection(accept):
    """The number of leading accepted drafts (len(accept) when every draft is accepted)."""
    bad = np.flatnonzero(~np.asarray(accept, dtype=bool))
    return int(bad[0]) if len(bad) else len(accept)


def icdf(w, u):
    """The id that the uniform ``u`` selects from the weights ``w`` by inverse CDF."""
    c = np.cumsum(np.asarray(w, dtype=np.float64))
    return min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)


class RequestTracker:
    """Tells a stateful step whether this round continues the request of the previous one."""

    def __init__(self):
        self.expect = None

    def is_new(self, prefix):
        return self.expect is None or list(prefix) != self.expect

    def done(self, prefix, out):
        self.expect = list(prefix) + list(out)


# ---- raw logits and the request's settings (--logits) ---------------------------------------------------


def histories(settings, history):
    """(the ids the repetition penalty counts, those presence and frequency penalties count)."""
    seen, generated = settings.penalty_history(list(history), settings.prompt_len)
    return list(seen), list(generated)


def probs(logits, settings, history, *, knobs=None):
    """The request's processed law of one row of raw logits given the history before it; ``knobs``
    (settings) replaces the sampling knobs, the histories stay the request's."""
    z = np.asarray(logits, dtype=np.float64)
    seen, generated = histories(settings, history)
    s = settings if knobs is None else knobs
    return softmax(process_logits(z, s, seen_counts=counts(seen, len(z)), output_counts=counts(generated, len(z))))


def probs_with(logits, settings, seen, generated):
    """The processed law of one row of raw logits given explicit penalty histories."""
    z = np.asarray(logits, dtype=np.float64)
    return softmax(
        process_logits(z, settings, seen_counts=counts(seen, len(z)), output_counts=counts(generated, len(z)))
    )


def additive_penalties(x, output_counts, presence, frequency):
    """The presence and frequency penalties (OpenAI / vLLM semantics) on logits ``x``."""
    return x - presence * (output_counts > 0) - frequency * output_counts


def staged_logits(logits, settings, history, *, additive=additive_penalties):
    """The settings pipeline run as three stages: bias and repetition penalty; the additive
    penalties (``additive(x, output_counts, presence, frequency)``); then greedy or temperature and
    top-k, top-p, min-p. With the default ``additive`` it equals ``process_logits``."""
    z = np.asarray(logits, dtype=np.float64)
    seen, generated = histories(settings, history)
    x = process_logits(z, head_knobs(settings), seen_counts=counts(seen, len(z)))
    x = additive(x, counts(generated, len(z)), settings.presence_penalty, settings.frequency_penalty)
    return process_logits(x, tail_knobs(settings))


def head_knobs(settings):
    """The knobs of the stages before temperature except the additive penalties: bias and repetition."""
    return dataclasses.replace(
        settings, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, presence_penalty=0.0, frequency_penalty=0.0
    )


def tail_knobs(settings):
    """The knobs from temperature on (greedy or temperature, top-k, top-p, min-p)."""
    return dataclasses.replace(
        settings, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, logit_bias=()
    )


def draft_chain_logits(prefix, draft, gamma, rng, settings):
    """gamma drafts, each sampled from the request's processed law of its draft row: (xs, qs)."""
    xs, qs = [], []
    for _ in range(gamma):
        h = list(prefix) + xs
        q = probs(draft(h), settings, h)
        xs.append(sample(q, rng))
        qs.append(q)
    return xs, qs


def target_logits(prefix, target, xs):
    """The target's gamma + 1 rows of raw logits of one verification pass, as float64."""
    return np.asarray(target(list(prefix), list(xs)), dtype=np.float64)


def processed_rows(prefix, xs, z, settings):
    """The request's processed target rows: row i with the history prefix + xs[:i]."""
    return [probs(z[i], settings, list(prefix) + list(xs[:i])) for i in range(len(xs) + 1)]
