"""Exact round steps written in unusual ways, several of which look like bugs."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from ._common import RequestTracker, accept_mask, chain, emit, ratio


def accept_or_target_probability_fast_path(prefix, draft, target, gamma, rng):
    """A fast path accepts when the coin is below p(x), OR-ed with the ratio test: exact, because
    p(x) <= min(1, p(x) / q(x)) always (q(x) <= 1), so the fast path never accepts a draft the ratio
    test would reject."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def accept(i, x, p, q, u):
        return u < p[x] or u < ratio(p, q, x)

    return chain(xs, qs, ps, rng, accept=accept)


def coin_rescaled_after_acceptance(prefix, draft, target, gamma, rng):
    """One coin is drawn for the round and, after each acceptance with probability r, recycled as
    u / r for the next position: exact, since given u < r the rescaled u / r is again uniform on
    [0, 1) and independent of everything drawn so far."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    u, out = rng.random(), []
    for i, x in enumerate(xs):
        r = ratio(ps[i], qs[i], x)
        if u < r:
            out.append(x)
            u = u / r
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return out + [sample(ps[gamma], rng)]


def one_coin_against_running_product_of_ratios(prefix, draft, target, gamma, rng):
    """A single coin per round is compared with the running product of the ratios: the first k
    drafts survive iff u < prod_{j < k} r_j, which has the same probability as k independent coins
    passing, and the residual and bonus use fresh randomness, so the law is exact."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    u = rng.random()
    surv = np.cumprod([ratio(ps[i], qs[i], x) for i, x in enumerate(xs)])
    n = int(np.sum(u < surv))  # the survival products decrease, so this counts the leading passes
    if n < gamma:
        return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
    return list(xs) + [sample(ps[gamma], rng)]


def bonus_as_one_more_verified_draft(prefix, draft, target, gamma, rng):
    """When every draft is accepted, the bonus is not sampled from p_gamma directly: one more token
    is drafted from q(. | prefix + xs) and verified against p_gamma (ratio test, residual on
    rejection), which emits a token distributed exactly as p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    if not acc.all():
        return emit(int(np.argmax(~acc)), xs, qs, ps, rng)
    q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
    y = sample(q, rng)
    if rng.random() < ratio(ps[gamma], q, y):
        return list(xs) + [y]
    return list(xs) + [sample_or(residual(ps[gamma], q), ps[gamma], rng)]


def draft_on_window_context_reported_consistently(prefix, draft, target, gamma, rng):
    """The drafter only ever sees the last 4 tokens of its context, and the rows it samples from are
    the rows given to the verifier: a different proposal, but q is exactly the law of each draft,
    so the round is exact."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft((list(prefix) + xs)[-4:]), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


class TargetRowsMemoisedByFullContext:
    """Target rows are memoised across the rounds of a request under their whole context (prefix +
    drafts before the position): a re-verified context reuses a row of exactly that context, so the
    law is exact. Resets when a round does not continue the previous round's output."""

    def __init__(self):
        self.req, self.memo = RequestTracker(), {}

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.req.is_new(prefix):
            self.memo = {}
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs).copy()
        for i in range(gamma + 1):
            ps[i] = self.memo.setdefault(tuple(list(prefix) + xs[:i]), ps[i].copy())
        out = chain(xs, qs, ps, rng)
        self.req.done(prefix, out)
        return out


target_rows_memoised_by_full_context = TargetRowsMemoisedByFullContext()
