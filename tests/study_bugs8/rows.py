"""Round steps whose target or draft rows are not the ones the position needs."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows

from ._common import chain, icdf


def target_fed_drafts_in_reverse_order(prefix, draft, target, gamma, rng):
    """The drafts are popped off a stack into the verification pass, so the target sees them last
    first: row i is p(. | prefix + reversed(xs)[:i]); row 0 is right."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs[::-1])  # BUG: the pass must see xs in drafting order
    return chain(xs, qs, ps, rng)


def draft_row_zeroed_at_its_sample_in_place(prefix, draft, target, gamma, rng):
    """A no-repeat mask is written into the draft row after sampling, and that same buffer is the q
    handed to the verifier: q_i(x_i) reads 0, so every draft is accepted and the residual is
    (p - q with x_i's mass removed)+."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.array(draft(list(prefix) + xs), dtype=np.float64, copy=True)
        x = sample(q, rng)
        q[x] = 0.0  # BUG: the reported row must be the law x was drawn from
        xs.append(x)
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


def draft_sampled_on_window_context(prefix, draft, target, gamma, rng):
    """The drafter runs with a sliding-window cache of the last 4 tokens, but the q rows given to the
    verifier are recomputed by a full-context draft pass: drafts are drawn from q(. | ctx[-4:])
    and tested against q(. | ctx)."""
    xs, qs = [], []
    for _ in range(gamma):
        ctx = list(prefix) + xs
        xs.append(sample(draft(ctx[-4:]), rng))  # BUG: sampled from another row than the one reported
        qs.append(np.asarray(draft(ctx), dtype=np.float64))
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


def draft_sampled_from_mirrored_cumsum(prefix, draft, target, gamma, rng):
    """The drafter samples by inverse CDF over the reversed row (a descending-id scan) and keeps the
    index found in the reversed row as the token id: the draft is id j with probability q(V - 1 - j),
    while q itself is reported as its law."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(icdf(q[::-1], rng.random()))  # BUG: the index in q[::-1] is id V - 1 - j, not j
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)
