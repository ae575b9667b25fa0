"""Exact round steps written in unusual ways; several look like bugs (some are twins of buggy
steps of this set)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from specverify.dists import process_logits, softmax

from ._common import (
    RequestTracker,
    chain,
    counts,
    draft_chain_logits,
    head_knobs,
    histories,
    probs,
    ratio,
    tail_knobs,
    target_logits,
)


def replacement_predrawn_accepts_matching_draft(prefix, draft, target, gamma, rng):
    """Exact: the replacement y ~ (p - q)+ is drawn before the coin, and a draft equal to y is kept
    without its coin. (p - q)+ is 0 at x whenever p(x) < q(x), so y == x only when p(x) >= q(x),
    where the coin would accept x anyway: the shortcut never changes a decision."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        y = sample_or(residual(ps[i], qs[i]), ps[i], rng)
        if y == x or rng.random() < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        out.append(y)
        return out
    out.append(sample(ps[gamma], rng))
    return out


MAX_PER_ROUND = 3


def round_output_capped_at_three_tokens(prefix, draft, target, gamma, rng):
    """Exact: a per-step token budget keeps at most the first 3 tokens of the round (a fully
    accepted round of 4 drafts loses its last draft and its bonus). The cut is at a fixed index,
    and every token of the chain rule follows p given the tokens before it, so a prefix of a
    round's output is exact; the next round continues from it."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    return chain(xs, qs, target_rows(prefix, target, xs), rng)[:MAX_PER_ROUND]


def drafter_sharpened_and_reported_sharpened(prefix, draft, target, gamma, rng):
    """Exact: the drafter samples at temperature 0.5 (its row squared and renormalised) and reports
    that same sharpened row as q to the verifier: a different proposal, but q is exactly each
    draft's law."""
    ctx = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx + xs), dtype=np.float64) ** 2
        q = q / q.sum()
        xs.append(sample(q, rng))
        qs.append(q)
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def verification_pass_in_two_chunks(prefix, draft, target, gamma, rng):
    """Exact: the verification runs as two passes, target(prefix, xs[:2]) and target(prefix +
    xs[:2], xs[2:]); the first pass's rows 0 and 1 and all rows of the second are the rows of
    prefix + xs[:i] (row 2 of the first pass, the same row, is dropped)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    k = min(2, gamma)
    head = target_rows(prefix, target, xs[:k])
    rest = target_rows(list(prefix) + xs[:k], target, xs[k:])
    ps = np.concatenate([head[:k], rest], axis=0)
    return chain(xs, qs, ps, rng)


class _PenaltyCountsKeptIncrementally:
    """Exact (stateful, resets per request): the penalty counts of a request are kept as two count
    vectors (seen, generated) updated with each round's emitted tokens, bonus included, and row i
    adds the counts of xs[:i]; where the settings need a window or a prompt-free repetition count
    the histories are recomputed from the prefix."""

    def __init__(self):
        self.track = RequestTracker()
        self.seen = None
        self.generated = None

    def _row(self, logits, settings, extra_ids):
        z = np.asarray(logits, dtype=np.float64)
        v = len(z)
        if self.seen is None or len(self.seen) != v:
            raise ValueError("counts not initialised for this vocabulary")
        extra = counts(extra_ids, v)
        x = process_logits(z, settings, seen_counts=self.seen + extra, output_counts=self.generated + extra)
        return softmax(x)

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        if settings.penalty_window or not settings.penalize_prompt:
            xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
            z = target_logits(prefix, target, xs)
            out = chain(xs, qs, [probs(z[i], settings, prefix + xs[:i]) for i in range(gamma + 1)], rng)
            self.track.done(prefix, out)
            return out
        z0 = np.asarray(draft(prefix), dtype=np.float64)
        if self.track.is_new(prefix) or self.seen is None or len(self.seen) != len(z0):
            seen, generated = histories(settings, prefix)
            self.seen, self.generated = counts(seen, len(z0)), counts(generated, len(z0))
        xs, qs = [], []
        for i in range(gamma):
            q = self._row(z0 if i == 0 else draft(prefix + xs), settings, xs)
            xs.append(sample(q, rng))
            qs.append(q)
        z = target_logits(prefix, target, xs)
        ps = [self._row(z[i], settings, xs[:i]) for i in range(gamma + 1)]
        out = chain(xs, qs, ps, rng)
        add = counts(out, len(z0))
        self.seen = self.seen + add
        self.generated = self.generated + add
        self.track.done(prefix, out)
        return out


penalty_counts_kept_incrementally = _PenaltyCountsKeptIncrementally()


def temperature_applied_to_log_softmax(prefix, draft, target, gamma, rng, settings):
    """Exact: the target's bias and penalties are applied, the row is turned into log-probabilities
    (log_softmax), and temperature and the filters are applied to those; log_softmax only shifts a
    row by a constant, which no later stage sees. Greedy requests take the plain pipeline."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    if settings.is_greedy:  # greedy takes the plain pipeline (no float rounding near exact ties)
        return chain(xs, qs, [probs(z[i], settings, prefix + xs[:i]) for i in range(gamma + 1)], rng)
    ps = []
    for i in range(gamma + 1):
        seen, generated = histories(settings, prefix + xs[:i])
        v = z.shape[1]
        head = dataclasses.replace(head_knobs(settings), presence_penalty=settings.presence_penalty)
        head = dataclasses.replace(head, frequency_penalty=settings.frequency_penalty)
        x = process_logits(z[i], head, seen_counts=counts(seen, v), output_counts=counts(generated, v))
        m = np.max(x)
        x = x - (m + np.log(np.sum(np.exp(x - m))))
        ps.append(softmax(process_logits(x, tail_knobs(settings))))
    return chain(xs, qs, ps, rng)
