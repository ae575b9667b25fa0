"""Round steps that take raw logits and the request's settings (``--logits``) and apply them to
the target's rows differently from the drafter (or from the request)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import residual, sample, sample_or

from specverify.dists import process_logits, softmax

from ._common import (
    chain,
    counts,
    draft_chain_logits,
    histories,
    probs,
    processed_rows,
    target_logits,
)


def _no_penalties(settings):
    return dataclasses.replace(settings, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0)


def replacement_row_processed_without_penalties(prefix, draft, target, gamma, rng, settings):
    """The acceptance test uses the fully processed target row, but the rejection path rebuilds the
    row for the replacement without the penalties (repetition, presence, frequency): the replacement
    is drawn from (p' - q)+ with p' the row processed with every other knob; the bonus is right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = processed_rows(prefix, xs, z, settings)

    def replace(i, p, q):
        p_resample = probs(z[i], settings, prefix + xs[:i], knobs=_no_penalties(settings))  # BUG: penalties skipped
        return sample_or(residual(p_resample, q), p_resample, rng)

    return chain(xs, qs, ps, rng, replace=replace)


def penalty_history_aliased_by_draft_loop(prefix, draft, target, gamma, rng, settings):
    """The drafter appends each draft to the history list it was handed, and the verifier
    processes every target row with that same list object: rows 0 .. gamma - 1 are penalised as if
    all gamma drafts were already in the history (the bonus row, whose history is prefix + xs, is
    right)."""
    history = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = probs(draft(history), settings, history)
        x = sample(q, rng)
        xs.append(x)
        qs.append(q)
        history.append(x)
    z = target_logits(prefix, target, xs)
    ps = [probs(z[i], settings, history) for i in range(gamma + 1)]  # BUG: history[: len(prefix) + i]
    return chain(xs, qs, ps, rng)


def target_min_p_threshold_on_logits(prefix, draft, target, gamma, rng, settings):
    """The target's min-p removes tokens whose processed logit is below min_p times the largest
    logit (the top token always kept), a threshold on logits instead of on probabilities
    (p < min_p * max p, i.e. z < max z + log(min_p)); the drafter uses the request's min-p."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    knobs = dataclasses.replace(settings, min_p=0.0)
    ps = []
    for i in range(gamma + 1):
        h = prefix + xs[:i]
        seen, generated = histories(settings, h)
        x = process_logits(z[i], knobs, seen_counts=counts(seen, len(z[i])), output_counts=counts(generated, len(z[i])))
        if settings.min_p > 0 and not settings.is_greedy:
            top = int(np.argmax(x))
            cut = x < settings.min_p * x[top]  # BUG: min-p compares probabilities, not logits
            cut[top] = False
            x = np.where(cut, -np.inf, x)
        ps.append(softmax(x))
    return chain(xs, qs, ps, rng)


def target_logit_bias_applied_twice(prefix, draft, target, gamma, rng, settings):
    """The verifier adds the request's logit bias to the target's raw logits and then runs the
    settings pipeline, which adds it again: the target's rows carry twice the bias; the drafter's
    rows carry it once."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    bias = settings.bias_vector(z.shape[1])
    if bias is not None:
        z = z + bias  # BUG: process_logits applies the bias itself
    ps = processed_rows(prefix, xs, z, settings)
    return chain(xs, qs, ps, rng)


def target_top_k_zero_not_treated_as_off(prefix, draft, target, gamma, rng, settings):
    """The verifier's hand-written top-k keeps max(top_k, min_tokens_to_keep) tokens without the
    `if top_k` guard, so top_k = 0 (off) keeps one token: whenever top-k is off the target's rows are
    cut to their most likely token; the drafter uses the request's settings."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    knobs = dataclasses.replace(settings, top_k=0, top_p=1.0, min_p=0.0)
    filters = dataclasses.replace(
        settings,
        temperature=1.0,
        top_k=0,
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        logit_bias=(),
    )
    ps = []
    for i in range(gamma + 1):
        h = prefix + xs[:i]
        seen, generated = histories(settings, h)
        x = process_logits(z[i], knobs, seen_counts=counts(seen, len(z[i])), output_counts=counts(generated, len(z[i])))
        if not settings.is_greedy:
            k = max(settings.top_k, settings.min_tokens_to_keep)  # BUG: 0 means off; this keeps one token
            kth = np.sort(x)[-k]
            x = np.where(x < kth, -np.inf, x)
            x = process_logits(x, filters)  # top-p and min-p on the top-k row
        ps.append(softmax(x))
    return chain(xs, qs, ps, rng)


def greedy_replacement_emitted_as_candidate_rank(prefix, draft, target, gamma, rng, settings):
    """At temperature 0 a mismatch emits the target's choice as its rank in the target's candidate
    list (sorted by logit, so always 0) instead of the candidate's vocabulary id; sampled settings
    follow the standard rule."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = processed_rows(prefix, xs, z, settings)
    if not settings.is_greedy:
        return chain(xs, qs, ps, rng)
    out = []
    for i, x in enumerate(xs):
        candidates = np.argsort(-ps[i], kind="stable")
        if x == candidates[0]:
            out.append(x)
            continue
        out.append(int(np.argmax(ps[i][candidates])))  # BUG: a position in candidates, not candidates[that]
        return out
    out.append(int(np.argmax(ps[gamma])))
    return out
