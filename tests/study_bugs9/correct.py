"""Exact round steps written in unusual ways; several look like bugs."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from specverify.dists import process_logits, softmax

from ._common import chain, counts, draft_chain_logits, histories, icdf, ratio, target_logits


def drafter_chains_on_its_own_argmax(prefix, draft, target, gamma, rng):
    """Exact: the drafter's context advances with the argmax of each of its rows while the reported
    draft is a sample from that row; every draft is verified against the row it was drawn from (any
    proposal is exact when q is the law it was drawn from) on target rows of prefix + xs[:i]."""
    ctx = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q)
        ctx.append(int(np.argmax(q)))  # the drafter's own context follows its argmax, not xs
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


UNSURE = 0.3


def verification_cut_where_target_is_unsure(prefix, draft, target, gamma, rng):
    """Exact: verification stops at the first position whose target row has its largest
    probability below 0.3, and that position's token is drawn from the row itself; the cut depends
    only on the row of the context already emitted, so each emitted token still follows p."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if ps[i].max() < UNSURE:
            out.append(sample(ps[i], rng))
            return out
        if rng.random() < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_in_sorted_order_scattered_back(prefix, draft, target, gamma, rng):
    """Exact: the residual is computed on both rows permuted by p's descending order, drawn there,
    and the drawn position mapped back through the same permutation (order[k])."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        order = np.argsort(-p, kind="stable")
        w = np.maximum(p[order] - q[order], 0.0)
        if w.sum() <= 0:
            return sample(p, rng)
        return int(order[sample(w, rng)])

    return chain(xs, qs, ps, rng, replace=replace)


def rejecting_coin_rescaled_for_replacement(prefix, draft, target, gamma, rng):
    """Exact: the coin u that rejected a draft (u >= r) is reused for the replacement as
    (u - r) / (1 - r), which given the rejection is uniform on [0, 1) and independent of the draft;
    the replacement is its inverse-CDF image under (p - q)+."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u, r = rng.random(), ratio(ps[i], qs[i], x)
        if u < r:
            out.append(x)
            continue
        w = residual(ps[i], qs[i])
        out.append(icdf(w, (u - r) / (1.0 - r)) if w.sum() > 0 else sample(ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _filters_only(settings):
    return dataclasses.replace(
        settings,
        temperature=1.0,
        top_k=0,
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        logit_bias=(),
    )


def temperature_between_top_k_and_top_p(prefix, draft, target, gamma, rng, settings):
    """Exact (--logits): the target's rows get bias, penalties and top-k at temperature 1, then the
    division by the temperature, then top-p and min-p; top-k keeps the same tokens at any positive
    temperature, so this is the request's law (the library pipeline for greedy requests and
    temperature-last settings)."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    head = dataclasses.replace(settings, temperature=1.0, top_p=1.0, min_p=0.0)
    ps = []
    for i in range(gamma + 1):
        seen, generated = histories(settings, prefix + xs[:i])
        c_seen, c_gen = counts(seen, len(z[i])), counts(generated, len(z[i]))
        if settings.is_greedy or settings.temperature_last:
            x = process_logits(z[i], settings, seen_counts=c_seen, output_counts=c_gen)
        else:
            x = process_logits(z[i], head, seen_counts=c_seen, output_counts=c_gen)  # top-k at T = 1
            x = process_logits(x / settings.temperature, _filters_only(settings))
        ps.append(softmax(x))
    return chain(xs, qs, ps, rng)


def min_p_as_log_space_threshold(prefix, draft, target, gamma, rng, settings):
    """Exact (--logits): the target's min-p is applied on the processed logits as z < max z +
    log(min_p), which is p < min_p * max p written in log space (the library pipeline where
    min-p is off, for greedy requests and for temperature-last settings)."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    custom = settings.min_p > 0 and not (
        settings.is_greedy or settings.temperature_last or settings.min_tokens_to_keep > 1
    )
    knobs = dataclasses.replace(settings, min_p=0.0) if custom else settings
    ps = []
    for i in range(gamma + 1):
        seen, generated = histories(settings, prefix + xs[:i])
        x = process_logits(z[i], knobs, seen_counts=counts(seen, len(z[i])), output_counts=counts(generated, len(z[i])))
        if custom:
            x = np.where(x < x.max() + np.log(settings.min_p), -np.inf, x)
        ps.append(softmax(x))
    return chain(xs, qs, ps, rng)
