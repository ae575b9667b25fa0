"""Round steps that take raw logits and the request's settings (``--logits``) and apply one knob
to the target's rows differently from the request (the drafter applies the request's settings)."""

from __future__ import annotations

import dataclasses

import numpy as np

from specverify.dists import process_logits, softmax

from ._common import (
    chain,
    counts,
    draft_chain_logits,
    histories,
    probs,
    processed_rows,
    staged_logits,
    tail_knobs,
    target_logits,
)


def _before_filters(settings):
    """The request's knobs up to temperature and top-k (top-p and min-p off)."""
    return dataclasses.replace(settings, top_p=1.0, min_p=0.0)


def _only_min_p(settings):
    """The min-p stage alone (and min_tokens_to_keep)."""
    return dataclasses.replace(tail_knobs(settings), temperature=1.0, top_k=0, top_p=1.0, temperature_last=False)


def temperature_only_on_bonus_row(prefix, draft, target, gamma, rng, settings):
    """The verified target rows 0 .. gamma - 1 are processed at temperature 1 (every other knob
    applied) and only the bonus row, which goes through the regular sampler, gets the request's
    temperature; greedy requests and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    knobs = settings if settings.is_greedy else dataclasses.replace(settings, temperature=1.0)
    ps = [probs(z[i], settings, prefix + xs[:i], knobs=knobs) for i in range(gamma)]  # BUG: knobs=settings
    ps.append(probs(z[gamma], settings, prefix + xs))
    return chain(xs, qs, ps, rng)


def target_top_k_set_taken_from_draft_row(prefix, draft, target, gamma, rng, settings):
    """The top-k index set is computed once per position on the draft's row (bias, penalties,
    temperature, top-k) and the same set masks the target's row, instead of the target's own k
    largest logits (its own top-k when the two share no finite logit); bias, penalties, temperature,
    top-p and min-p are applied to the target as the request says, and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    if settings.is_greedy or not settings.top_k:
        return chain(xs, qs, processed_rows(prefix, xs, z, settings), rng)
    ps = []
    for i in range(gamma + 1):
        h = prefix + xs[:i]
        seen, generated = histories(settings, h)
        c_seen, c_gen = counts(seen, z.shape[1]), counts(generated, z.shape[1])
        zq = np.asarray(draft(h), dtype=np.float64)
        draft_set = np.isfinite(process_logits(zq, _before_filters(settings), seen_counts=c_seen, output_counts=c_gen))
        no_top_k = dataclasses.replace(_before_filters(settings), top_k=0)
        x = process_logits(z[i], no_top_k, seen_counts=c_seen, output_counts=c_gen)
        masked = np.where(draft_set, x, -np.inf)  # BUG: top-k must keep the target row's own k largest logits
        if np.isfinite(masked).any():
            x = masked
        else:  # no finite logit left: the target's own top-k
            x = process_logits(z[i], _before_filters(settings), seen_counts=c_seen, output_counts=c_gen)
        x = process_logits(x, dataclasses.replace(tail_knobs(settings), temperature=1.0, top_k=0))
        ps.append(softmax(x))
    return chain(xs, qs, ps, rng)


def _top_p_in_id_order(x, top_p):
    pr = softmax(x)
    keep = np.cumsum(pr) - pr < top_p  # BUG: the nucleus is taken in descending order of probability
    return np.where(keep, x, -np.inf)


def target_top_p_cumulated_in_id_order(prefix, draft, target, gamma, rng, settings):
    """The verifier's hand-written top-p accumulates the probabilities in vocabulary order (no
    sort): it keeps the ids from 0 up while the mass before them is below top_p, instead of the most
    likely tokens; bias, penalties, temperature, top-k and min-p and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    if settings.is_greedy or settings.top_p >= 1.0:
        return chain(xs, qs, processed_rows(prefix, xs, z, settings), rng)
    ps = []
    for i in range(gamma + 1):
        h = prefix + xs[:i]
        seen, generated = histories(settings, h)
        x = process_logits(
            z[i],
            _before_filters(settings),
            seen_counts=counts(seen, len(z[i])),
            output_counts=counts(generated, len(z[i])),
        )
        x = _top_p_in_id_order(x, settings.top_p)
        ps.append(softmax(process_logits(x, _only_min_p(settings))))
    return chain(xs, qs, ps, rng)


def target_min_p_as_absolute_threshold(prefix, draft, target, gamma, rng, settings):
    """The verifier's min-p removes the tokens whose probability is below min_p itself (an absolute
    cut, as epsilon sampling does) instead of below min_p times the row's largest probability; the
    most likely token is always kept. Everything else and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    if settings.is_greedy or settings.min_p <= 0.0:
        return chain(xs, qs, processed_rows(prefix, xs, z, settings), rng)
    ps = []
    for i in range(gamma + 1):
        p = probs(z[i], settings, prefix + xs[:i], knobs=dataclasses.replace(settings, min_p=0.0))
        keep = p >= settings.min_p  # BUG: the threshold is min_p * p.max()
        keep[int(np.argmax(p))] = True
        w = np.where(keep, p, 0.0)
        ps.append(w / w.sum())
    return chain(xs, qs, ps, rng)


def target_logit_bias_subtracted(prefix, draft, target, gamma, rng, settings):
    """The verifier applies the request's logit bias with the pooler's convention (logits -=
    bias) before running the rest of the pipeline, so every target row carries the bias with the
    wrong sign; the drafts carry it right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    bias = settings.bias_vector(z.shape[1])
    if bias is not None:
        z = z - bias  # BUG: the sampling logit bias is added (logits += bias)
    unbiased = dataclasses.replace(settings, logit_bias=())
    ps = [probs(z[i], settings, prefix + xs[:i], knobs=unbiased) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_repetition_penalty_applied_twice(prefix, draft, target, gamma, rng, settings):
    """The model runner applies the repetition penalty to the target's raw logits and the sampler's
    pipeline applies it again (after the bias), so every target row is penalised twice (about
    penalty squared); the drafts are penalised once."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    only_rep = dataclasses.replace(
        settings,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        min_p=0.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        logit_bias=(),
    )
    ps = []
    for i in range(gamma + 1):
        seen, _ = histories(settings, prefix + xs[:i])
        zi = process_logits(z[i], only_rep, seen_counts=counts(seen, z.shape[1]))  # BUG: applied again below
        ps.append(probs(zi, settings, prefix + xs[:i]))
    return chain(xs, qs, ps, rng)


def _presence_from_second_occurrence(x, output_counts, presence, frequency):
    return x - presence * (output_counts > 1) - frequency * output_counts  # BUG: present means count > 0


def target_presence_penalty_from_second_occurrence(prefix, draft, target, gamma, rng, settings):
    """The verifier's presence penalty masks the tokens generated at least twice (count > 1) instead
    of at least once: a token generated once is not penalised on the target; the frequency and
    repetition penalties and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = [
        softmax(staged_logits(z[i], settings, prefix + xs[:i], additive=_presence_from_second_occurrence))
        for i in range(gamma + 1)
    ]
    return chain(xs, qs, ps, rng)
