"""``--logits`` round steps whose sampling settings reach the draft and the target differently.

``draft(prefix)`` and ``target(prefix, proposed)`` return raw logits; the step applies the request's
``settings`` itself. The drafts are processed correctly (``study_bugs._util.probs``) unless the
docstring says otherwise; the mistake is in the target's processing.
"""

from __future__ import annotations

import numpy as np
from study_bugs._util import probs, sample

from study_bugs7._common import one_hot, penalised, top_p_min_p, verify, with_knob

#: the drafter's own top-k (llama.cpp drafts inside a small top-k)
DRAFT_TOP_K = 8


def _chain(prefix, draft, gamma, rng, settings):
    """gamma drafts, each from its processed draft row: (tokens, rows)."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = probs(draft(prefix + xs), settings, prefix + xs)
        xs.append(sample(q, rng))
        qs.append(q)
    return xs, qs


def _logits(prefix, target, xs):
    return np.asarray(target(list(prefix), xs), dtype=np.float64)


def target_top_k_threshold_from_ascending_sort(prefix, draft, target, gamma, rng, settings):
    """The target's top-k stage takes its threshold from the ascending sort at index k - 1 (the k-th
    smallest logit) instead of the k-th largest, so it keeps V - k + 1 tokens instead of k; the other
    stages and the drafts are right."""
    prefix = list(prefix)
    xs, qs = _chain(prefix, draft, gamma, rng, settings)
    z = _logits(prefix, target, xs)
    ps = []
    for j in range(gamma + 1):
        hist = prefix + xs[:j]
        if settings.is_greedy:
            ps.append(probs(z[j], settings, hist))
            continue
        x = penalised(z[j], settings, hist) / settings.temperature
        k = settings.top_k
        if 0 < k < len(x):
            kth = np.sort(x)[k - 1]  # BUG: the k-th smallest; the threshold is np.sort(x)[-k]
            x = np.where(x < kth, -np.inf, x)
        ps.append(top_p_min_p(x, settings))
    return verify(xs, qs, ps, rng)


def greedy_target_ties_to_highest_id(prefix, draft, target, gamma, rng, settings):
    """At temperature 0 the target's row is the one-hot of its last maximal logit (a ">=" scan), so
    exact ties go to the highest id, while greedy decoding (and the draft here) takes the lowest;
    sampled settings are processed right."""
    prefix = list(prefix)
    xs, qs = _chain(prefix, draft, gamma, rng, settings)
    z = _logits(prefix, target, xs)
    ps = []
    for j in range(gamma + 1):
        hist = prefix + xs[:j]
        if not settings.is_greedy:
            ps.append(probs(z[j], settings, hist))
            continue
        x = penalised(z[j], settings, hist)
        top = len(x) - 1 - int(np.argmax(x[::-1]))  # BUG: the last of tied maxima; greedy takes the first
        ps.append(one_hot(len(x), top))
    return verify(xs, qs, ps, rng)


def target_min_p_cutoff_from_draft_row(prefix, draft, target, gamma, rng, settings):
    """Min-p's cutoff at a drafted position is computed once from the draft's processed row (min_p
    times max q) and applied to the target's row too (the target's top token always kept); the bonus
    row, which has no draft row, uses its own maximum. Draft rows are right."""
    prefix = list(prefix)
    xs, qs = _chain(prefix, draft, gamma, rng, settings)
    z = _logits(prefix, target, xs)
    peaks = [q.max() for q in qs]  # BUG: the draft's peaks; min-p scales the target's own peak
    ps = []
    for j in range(gamma + 1):
        hist = prefix + xs[:j]
        if settings.is_greedy or settings.min_p <= 0:
            ps.append(probs(z[j], settings, hist))
            continue
        p = probs(z[j], with_knob(settings, min_p=0.0), hist)
        peak = peaks[j] if j < gamma else p.max()
        keep = p >= settings.min_p * peak
        keep[np.argmax(p)] = True
        ps.append(np.where(keep, p, 0.0) / p[keep].sum())
    return verify(xs, qs, ps, rng)


def target_penalty_history_includes_token_under_test(prefix, draft, target, gamma, rng, settings):
    """The penalty history of the target's row j is prefix + xs[:j + 1]: the draft being tested at
    position j is already counted (penalised) in its own row; the bonus row's history (prefix + xs)
    is right, and so are the drafts."""
    prefix = list(prefix)
    xs, qs = _chain(prefix, draft, gamma, rng, settings)
    z = _logits(prefix, target, xs)
    ps = [probs(z[j], settings, prefix + xs[: j + 1]) for j in range(gamma + 1)]  # BUG: should be xs[:j]
    return verify(xs, qs, ps, rng)


def target_processed_with_draft_sampler_settings(prefix, draft, target, gamma, rng, settings):
    """The drafter samples under its own settings, the request's with top-k capped at DRAFT_TOP_K, and
    reports those rows (consistent); the target's rows are then processed with the drafter's settings
    object instead of the request's, so they are cut to the top 8 too."""
    prefix = list(prefix)
    dsettings = with_knob(settings, top_k=min(settings.top_k or DRAFT_TOP_K, DRAFT_TOP_K))
    xs, qs = _chain(prefix, draft, gamma, rng, dsettings)
    z = _logits(prefix, target, xs)
    ps = [probs(z[j], dsettings, prefix + xs[:j]) for j in range(gamma + 1)]  # BUG: the request's settings
    return verify(xs, qs, ps, rng)
