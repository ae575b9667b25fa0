"""Round steps that take raw logits and the request's settings (``--logits``) and apply one
setting to the target's rows differently from the request (the drafter applies the request's
settings), or, for one of them, to the residual's draft row."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import residual, sample, sample_or
from study_bugs10._common import chain, draft_chain_logits, histories, probs, target_logits

from specverify.dists import process_logits, softmax

from ._common import repetition_stage, staged_probs, tail_knobs


def _rounds(prefix, draft, target, gamma, rng, settings, row):
    """Draft with the request's settings, then verify with target rows ``row(z_i, history_i, i)``."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = [row(z[i], prefix + xs[:i], i) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_presence_mapped_to_multiplicative_penalty(prefix, draft, target, gamma, rng, settings):
    """The verifier's backend has only multiplicative penalties and maps the presence penalty to a
    repetition-style factor 1 + presence over the generated tokens (logit / (1 + presence) when
    positive, * (1 + presence) when negative) instead of logit - presence; the frequency and
    repetition penalties, the rest of the pipeline and the drafts are right."""
    factor = 1.0 + settings.presence_penalty

    def additive(x, c, presence, frequency):
        x = repetition_stage(x, c, factor)  # BUG: x - presence * (c > 0), an additive penalty
        return x - frequency * c

    def row(z, h, i):
        if factor <= 0.0:
            return probs(z, settings, h)
        return staged_probs(z, settings, h, additive=additive)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_repetition_penalty_on_probabilities(prefix, draft, target, gamma, rng, settings):
    """The verifier applies the repetition penalty to probabilities: the seen tokens' probabilities
    (of the biased logits) are divided by the penalty and the log of the renormalised row goes on
    through the pipeline, i.e. logit - log r for every seen token instead of the sign rule (logit /
    r when positive, logit * r when negative); the other knobs and the drafts are right."""

    def repetition(x, seen, r):
        if r == 1.0:
            return x
        p = softmax(x)
        p = np.where(seen > 0, p / r, p)  # BUG: the penalty acts on the logits (repetition_stage)
        with np.errstate(divide="ignore"):
            return np.log(p / p.sum())

    def row(z, h, i):
        return staged_probs(z, settings, h, repetition=repetition)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_counts_left_padded_to_vocab(prefix, draft, target, gamma, rng, settings):
    """The verifier's penalty counts come from np.bincount without minlength (as long as the
    largest id in the history plus one) and are padded to the vocabulary on the left instead of
    the right: every count lands on an id V - 1 - max id higher, so the repetition, presence and
    frequency penalties hit other tokens (right when the history holds the last id); the drafts
    are right."""

    def counts(ids, v):
        c = np.bincount(np.asarray(list(ids), dtype=np.int64)).astype(np.float64)
        return np.pad(c, (v - len(c), 0))  # BUG: (0, v - len(c)), zeros after the counted ids

    def row(z, h, i):
        return staged_probs(z, settings, h, counts=counts)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_repetition_penalty_compounds_along_block(prefix, draft, target, gamma, rng, settings):
    """The verifier's penalty scale is a tensor multiplied in place by the repetition penalty at
    each position of the verify block, so row i applies r ** (i + 1) to its seen tokens instead of
    r (row 0 right; the bonus row gets r ** (gamma + 1)); the other knobs and the drafts are
    right."""

    def row(z, h, i):
        def repetition(x, seen, r):
            return repetition_stage(x, seen, r ** (i + 1))  # BUG: r, once per row

        return staged_probs(z, settings, h, repetition=repetition)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def residual_uses_unprocessed_draft_row(prefix, draft, target, gamma, rng, settings):
    """Drafts are drawn from the drafter's processed law q_i and the test uses it, but the residual
    path subtracts the softmax of the drafter's raw logits (no bias, penalties, temperature or
    filters): the replacement is drawn from (p - softmax(raw))+ instead of (p - q)+. The target's
    rows and the bonus are right."""
    prefix = list(prefix)
    xs, qs, raws = [], [], []
    for _ in range(gamma):
        h = prefix + xs
        zq = np.asarray(draft(h), dtype=np.float64)
        q = probs(zq, settings, h)
        xs.append(sample(q, rng))
        qs.append(q)
        raws.append(softmax(zq))
    z = target_logits(prefix, target, xs)
    ps = [probs(z[i], settings, prefix + xs[:i]) for i in range(gamma + 1)]

    def replace(i, p, q):
        return sample_or(residual(p, raws[i]), p, rng)  # BUG: residual(p, q), the row the draft came from

    return chain(xs, qs, ps, rng, replace=replace)


def target_additive_penalties_count_prompt_not_output(prefix, draft, target, gamma, rng, settings):
    """The verifier slices the history the presence and frequency penalties count as
    history[:prompt_len] (the prompt) instead of history[prompt_len:] (the generated tokens); the
    repetition penalty, the rest of the pipeline and the drafts are right."""

    def row(z, h, i):
        seen, _ = histories(settings, h)
        generated = list(h)[: settings.prompt_len]  # BUG: list(h)[settings.prompt_len :]
        z = np.asarray(z, dtype=np.float64)
        v = len(z)
        sc = np.bincount(np.asarray(seen, dtype=np.int64), minlength=v).astype(np.float64)[:v]
        oc = np.bincount(np.asarray(generated, dtype=np.int64), minlength=v).astype(np.float64)[:v]
        return softmax(process_logits(z, settings, seen_counts=sc, output_counts=oc))

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_min_p_relative_to_runner_up(prefix, draft, target, gamma, rng, settings):
    """The verifier's min-p threshold is min_p times the second largest probability (an index slip,
    sorted[-2] for sorted[-1]) instead of the largest: fewer tokens are removed; bias, penalties,
    temperature, top-k, top-p and the drafts are right."""
    keep = settings.min_tokens_to_keep
    no_min_p = dataclasses.replace(settings, min_p=0.0)

    def tail(x, s):
        if s.is_greedy or s.min_p <= 0.0:
            return process_logits(x, tail_knobs(s))
        if s.temperature_last:
            y = process_logits(x, dataclasses.replace(tail_knobs(no_min_p), temperature=1.0))
        else:
            y = process_logits(x, tail_knobs(no_min_p))
        p = softmax(y)
        ref = np.sort(p)[-2]  # BUG: np.sort(p)[-1], the largest probability
        remove = p < s.min_p * ref
        if keep > 1:
            remove[np.argsort(-p, kind="stable")[:keep]] = False
        y = np.where(remove, -np.inf, y)
        return y / s.temperature if s.temperature_last and s.temperature != 1.0 else y

    def row(z, h, i):
        return staged_probs(z, settings, h, tail=tail)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_repetition_skips_ids_drafted_this_round(prefix, draft, target, gamma, rng, settings):
    """The verifier removes the ids drafted in this round from every row's repetition-penalty set
    (meant to avoid counting the block's drafts twice with a spec-penalty kernel): a drafted id is
    not penalised on any target row of the round even when the prompt or earlier output holds it;
    the presence and frequency penalties, the rest of the pipeline and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    drafted = list(set(xs))

    def repetition(x, seen, r):
        seen = seen.copy()
        seen[drafted] = 0.0  # BUG: seen as counted (the history before the row, drafts included)
        return repetition_stage(x, seen, r)

    ps = [staged_probs(z[i], settings, prefix + xs[:i], repetition=repetition) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_penalties_over_fixed_recent_window(prefix, draft, target, gamma, rng, settings):
    """The verifier keeps its penalty histories in a ring buffer of the last 16 tokens (a fixed
    window where the request counts every token): repetition, presence and frequency penalties on
    the target's rows forget what came before; the rest of the pipeline and the drafts are right
    (settings with their own penalty window are processed as the request says)."""

    def row(z, h, i):
        if settings.penalty_window:
            return probs(z, settings, h)
        seen, generated = histories(settings, h)
        seen, generated = seen[-16:], generated[-16:]  # BUG: the whole histories (the request sets no window)
        z = np.asarray(z, dtype=np.float64)
        v = len(z)
        sc = np.bincount(np.asarray(seen, dtype=np.int64), minlength=v).astype(np.float64)[:v]
        oc = np.bincount(np.asarray(generated, dtype=np.int64), minlength=v).astype(np.float64)[:v]
        return softmax(process_logits(z, settings, seen_counts=sc, output_counts=oc))

    return _rounds(prefix, draft, target, gamma, rng, settings, row)
