"""Round steps that take raw logits and the request's settings (``--logits``) and process the
draft and the target differently."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, probs, residual, sample, sample_or

from specverify.dists import process_logits, softmax


def _chain(prefix, draft, target, gamma, rng, settings, *, q_law=None, p_law=None):
    """The standard round on logits; ``q_law(logits, history)`` is the draft's law (sampled and
    used in the ratio) and ``p_law(logits, history)`` the target's; both default to the request's
    pipeline."""
    prefix = list(prefix)
    q_law = q_law or (lambda z, h: probs(z, settings, h))
    p_law = p_law or (lambda z, h: probs(z, settings, h))
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        q = q_law(np.asarray(draft(h), dtype=np.float64), h)
        xs.append(sample(q, rng))
        qs.append(q)
    zs = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [p_law(zs[j], prefix + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def draft_top_k_target_not(prefix, draft, target, gamma, rng, settings):
    """The draft applies top-k; the target's verification rows do not (every other knob is
    applied on both sides).

    vllm-project/vllm#15063: before it, V1's rejection sampler did not mask the target's logits
    with top-k / top-p ("enable spec decode for top-p & top-k sampling" by applying
    apply_top_k_top_p to the target logits).
    """
    s_t = dataclasses.replace(settings, top_k=0)
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, s_t, h))


def temperature_only_on_draft(prefix, draft, target, gamma, rng, settings):
    """Temperature is applied to the draft's logits only; when sampling (temperature > 0) the
    target's rows are processed at temperature 1 (every other knob on both sides; greedy requests
    take a separate argmax path and are unaffected).

    The mirror image of z-lab/dflash#74 (the draft sampler called without the request's
    temperature while the target got it): here the verify path is the one that drops it.
    """
    greedy = settings.temperature == 0  # the greedy path is a separate argmax, unaffected
    s_t = settings if greedy else dataclasses.replace(settings, temperature=1.0)
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, s_t, h))


def target_min_p_before_temperature(prefix, draft, target, gamma, rng, settings):
    """On the target, the min-p mask is computed from the penalised logits BEFORE temperature
    (then temperature, top-k, top-p and the mask are applied); the draft uses the request's order.

    Written for the study: min-p moved ahead of temperature in the verify path (llama.cpp's
    chain and vLLM's sampler disagree on where min-p sits relative to temperature; engines notes
    section 4 on knob order), differing from the draft only when temperature != 1 meets min-p.
    """

    def p_law(z, h):
        v = len(z)
        seen, gen = counts(h, v), counts(h[settings.prompt_len :], v)
        pen = process_logits(
            z,
            dataclasses.replace(settings, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
            seen_counts=seen,
            output_counts=gen,
        )
        x = process_logits(z, dataclasses.replace(settings, min_p=0.0), seen_counts=seen, output_counts=gen)
        if settings.min_p > 0:
            p0 = softmax(pen)
            remove = p0 < settings.min_p * p0.max()
            remove[int(np.argmax(p0))] = False
            x = np.where(remove, -np.inf, x)
        return softmax(x)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)


def target_top_k_plus_one(prefix, draft, target, gamma, rng, settings):
    """The target's top-k keeps k + 1 tokens (the k-th largest is read at index k of the
    descending sort instead of k - 1); the draft keeps k.

    Written for the study: a 0- vs 1-based index in the kth-value lookup of a hand-written top-k
    kernel (torch.kthvalue is 1-based, a sort index is 0-based).
    """
    s_t = dataclasses.replace(settings, top_k=settings.top_k + 1) if settings.top_k else settings
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, s_t, h))
