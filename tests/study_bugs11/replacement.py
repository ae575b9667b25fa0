"""Round steps whose mistake is in the token drawn after a rejection."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample_or, target_rows
from study_bugs10._common import chain


def residual_of_cumulative_rows(prefix, draft, target, gamma, rng):
    """The verifier keeps the rows as running sums (for inverse-CDF sampling) and forms the
    residual from them: the replacement is drawn proportionally to (P - Q)+ with P and Q the
    cumulative sums of p and q, instead of (p - q)+. Test and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = np.maximum(np.cumsum(p) - np.cumsum(q), 0.0)  # BUG: the residual is of the rows, not their sums
        return sample_or(w, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def drafter_runner_up_as_replacement(prefix, draft, target, gamma, rng):
    """After a rejection the drafter's best other candidate (argmax of q with the rejected draft
    excluded, a sibling in tree terms) is emitted whenever (p - q)+ gives it positive weight, and a
    draw from (p - q)+ otherwise. Test and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = residual(p, q)
        alt = q.copy()
        alt[xs[i]] = -1.0
        sibling = int(np.argmax(alt))
        if w[sibling] > 0:
            return sibling  # BUG: a sibling must be drawn with its weight, not taken outright
        return sample_or(w, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def draft_entry_zeroed_before_residual(prefix, draft, target, gamma, rng):
    """The residual is formed as (p - q')+ with q' the draft row whose entry at the rejected draft
    is zeroed (the one-hot path's step, for drafts without a row), so the rejected draft keeps
    residual weight p(x) and can be its own replacement. Test and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        q = q.copy()
        q[xs[i]] = 0.0  # BUG: with a draft row, the residual is (p - q)+ as it is
        return sample_or(np.maximum(p - q, 0.0), p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def residual_scanned_in_id_order(prefix, draft, target, gamma, rng):
    """The replacement is drawn by scanning the ids in order with one fresh coin each and taking
    the first id v whose coin falls below w(v) / max w (w = (p - q)+; the scan repeats if no id
    passes): an id is taken with probability (w(v) / max w) times the chance that every lower id
    failed, which favours low ids, instead of w(v) / sum w. Test and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = residual(p, q)
        if w.sum() <= 0:
            w = p
        scaled = w / w.max()
        while True:
            hits = np.flatnonzero(rng.random(len(w)) < scaled)
            if len(hits):
                return int(hits[0])  # BUG: a scan by id order is not a draw from w; propose ids uniformly

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)
