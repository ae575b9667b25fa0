"""Round steps that take raw logits and the request's settings (``--logits``) and process the
draft and the target (or the verified rows and the bonus row) differently."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, probs, residual, sample, sample_or

from specverify.dists import SamplingSettings, process_logits, softmax


def _chain(prefix, draft, target, gamma, rng, settings, *, q_law=None, p_law=None, bonus_law=None):
    """The standard round on logits. ``q_law(logits, history)`` is the draft's law (sampled and
    used in the ratio), ``p_law(logits, history)`` the law of the verified target rows and
    ``bonus_law`` that of row gamma (default ``p_law``); all default to the request's pipeline."""
    prefix = list(prefix)
    q_law = q_law or (lambda z, h: probs(z, settings, h))
    p_law = p_law or (lambda z, h: probs(z, settings, h))
    bonus_law = bonus_law or p_law
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        q = q_law(np.asarray(draft(h), dtype=np.float64), h)
        xs.append(sample(q, rng))
        qs.append(q)
    zs = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [p_law(zs[j], prefix + xs[:j]) for j in range(gamma)]
    ps.append(bonus_law(zs[gamma], prefix + xs))
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ps[i][x] / qs[i][x]
        if rng.random() < min(1.0, float(np.nan_to_num(ratio, nan=0.0, posinf=1.0))):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def target_top_p_on_unfiltered_row(prefix, draft, target, gamma, rng, settings):
    """On the target, top-p is computed on the row before top-k (its nucleus is taken from the full
    tempered distribution) and intersected with the top-k set; the draft applies top-p to the
    top-k-renormalised row, the request's order. They differ when top-k and top-p are both on.

    sgl-project/sglang#36173 (B23): the verifier did top-k -> renormalise -> top-p while the normal
    sampler took top-p on the original distribution intersected with top-k; here the two
    conventions sit on the two sides of one round.
    """
    s = settings

    def p_law(z, h):
        if s.is_greedy or not (s.top_k and s.top_p < 1.0):
            return probs(z, s, h)
        v = len(z)
        seen, gen = counts(h, v), counts(h[s.prompt_len :], v)
        y = process_logits(
            z, dataclasses.replace(s, top_k=0, top_p=1.0, min_p=0.0), seen_counts=seen, output_counts=gen
        )
        keep_k = np.isfinite(process_logits(y, SamplingSettings(top_k=s.top_k)))
        keep_p = np.isfinite(process_logits(y, SamplingSettings(top_p=s.top_p)))  # BUG: nucleus of the unfiltered row
        x = np.where(keep_k & keep_p, y, -np.inf)
        if s.min_p > 0:
            pr = softmax(x)
            remove = pr < s.min_p * pr.max()
            remove[int(np.argmax(pr))] = False
            x = np.where(remove, -np.inf, x)
        return softmax(x)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)


def greedy_sentinel_not_recognised(prefix, draft, target, gamma, rng, settings):
    """For greedy requests (temperature 0) the verifier does not recognise the greedy marker and
    processes the target's rows at temperature 1 (``temperature or 1.0``), while the draft is
    greedy (one-hot at its argmax); sampling requests are unaffected.

    vllm-project/vllm#27077 (B07): the greedy temperature sentinel changed from -1 to 0 and the
    rejection sampler still only replaced -1; here the unreplaced sentinel is guarded to 1.0.
    """
    s_t = dataclasses.replace(settings, temperature=1.0) if settings.is_greedy else settings  # BUG
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, s_t, h))


def bonus_temperature_applied_twice(prefix, draft, target, gamma, rng, settings):
    """The verified rows are processed once, but the bonus row goes to the regular sampler after
    the verify path had already divided the logits by the temperature in place, so the bonus is
    drawn at temperature T squared.

    vllm-project/vllm#30846 (B14: logits modified in place by the sampling parameters on the spec
    path) with vLLM's bonus token sampled by the regular Sampler with full parameters (engines
    notes 1.3).
    """

    def bonus_law(z, h):
        if settings.temperature > 0:
            z = z / settings.temperature  # BUG: the in-place scaling reaches the bonus sampler
        return probs(z, settings, h)

    return _chain(prefix, draft, target, gamma, rng, settings, bonus_law=bonus_law)


def target_pipeline_on_probabilities(prefix, draft, target, gamma, rng, settings):
    """The target's rows are turned into probabilities first and the settings pipeline
    (penalties, temperature, filters, softmax) is run on those probabilities as if they were
    logits; the draft runs it on its logits.

    vllm-project/vllm-ascend#6685: the plugin kept probabilities when upstream moved to logits, so
    temperature (and the rest) were misapplied.
    """
    return _chain(
        prefix,
        draft,
        target,
        gamma,
        rng,
        settings,
        p_law=lambda z, h: probs(softmax(z), settings, h),  # BUG: probabilities as logits
    )


def target_penalty_double_counts_last_token(prefix, draft, target, gamma, rng, settings):
    """On the target the last committed token is counted twice by the penalties (it is in the
    base counts and is added again as "the last sampled token"), so it gets a double frequency
    penalty and counts as generated even when it is the prompt's last token; the draft counts it
    once.

    vllm-project/vllm#33251 (B13): the MRV2 spec-penalties kernel double-counted the last sampled
    token, already in the base counts.
    """
    prefix = list(prefix)
    last = prefix[-1:]

    def p_law(z, h):
        gen = list(h[settings.prompt_len :]) + last  # BUG: the last token counted again
        return probs(z, settings, list(h) + last, generated=gen)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)


def frequency_penalty_bonus_only(prefix, draft, target, gamma, rng, settings):
    """The frequency penalty is applied by the draft and to the bonus row, but skipped on the
    verified target rows (the rejection path does not run it).

    vllm-project/vllm#18902 (frequency penalty has no effect with speculative decoding in V1) with
    vllm-project/vllm#42744 (B11: processors applied only to the bonus token).
    """
    s_v = dataclasses.replace(settings, frequency_penalty=0.0)
    return _chain(
        prefix,
        draft,
        target,
        gamma,
        rng,
        settings,
        p_law=lambda z, h: probs(z, s_v, h),  # BUG: verified rows skip the frequency penalty
        bonus_law=lambda z, h: probs(z, settings, h),
    )


def target_penalty_history_reset_each_round(prefix, draft, target, gamma, rng, settings):
    """The target's penalties (repetition, presence, frequency) see only the drafts of the current
    verification pass: the verifier's penalty state is re-created for every pass, so row j counts
    drafts 0 .. j-1 and forgets the prompt and every earlier output. The draft is right.

    Written for the study: the penalty state on the verify path lost between steps, the class of
    sgl-project/sglang#22049 / #28242 (penalties dropped by a spec path) and sgl-project/sglang#40244
    (penalty state of a verify block built wrongly); the opposite of a block that shares the history
    before its drafts.
    """
    prefix = list(prefix)
    start = len(prefix)

    def p_law(z, h):
        fresh = h[start:]  # BUG: the verifier's penalty state starts empty each pass
        return probs(z, settings, fresh, seen=fresh, generated=fresh)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)
