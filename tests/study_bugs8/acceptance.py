"""Round steps whose acceptance test has the wrong form (drafts, rows, residual and bonus right)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows

from ._common import chain, ratio


def ratio_of_peak_normalised_rows(prefix, draft, target, gamma, rng):
    """Both rows are scaled by their own peak before the ratio ("confidence relative to the top
    token"): the test is u < min(1, (p(x) / max p) / (q(x) / max q))."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def accept(i, x, p, q, u):
        return u < ratio(p / p.max(), q / q.max(), x)  # BUG: the peaks do not cancel; use p and q as they are

    return chain(xs, qs, ps, rng, accept=accept)


def rejected_draft_given_second_coin(prefix, draft, target, gamma, rng):
    """A rejected draft is retried once with a second coin before the residual is drawn, so a draft
    is accepted with probability 1 - (1 - r)^2 instead of r = min(1, p / q)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def accept(i, x, p, q, u):
        r = ratio(p, q, x)
        return u < r or rng.random() < r  # BUG: one coin per draft; the retry accepts more often

    return chain(xs, qs, ps, rng, accept=accept)


def target_prob_maxed_over_block_rows(prefix, draft, target, gamma, rng):
    """The target probabilities of the drafts are gathered from ps.max(axis=0) (an axis slip for the
    per-row gather): a draft is tested against max_j p_j(x) over every row of the pass, so a token
    its own row gives little or no mass is accepted whenever another position's row favours it."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    pmax = ps.max(axis=0)  # BUG: p_i(x_i) is ps[i, x_i], not the column maximum

    def accept(i, x, p, q, u):
        return u < ratio(pmax, q, x)

    return chain(xs, qs, ps, rng, accept=accept)


def rows_agreeing_on_top_token_accept_any_draft(prefix, draft, target, gamma, rng):
    """A fast path accepts the draft outright when the draft and target rows have the same argmax
    (meant: when the draft is the target's argmax), whatever token was drafted; otherwise the ratio
    test."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def accept(i, x, p, q, u):
        agree = int(np.argmax(p)) == int(np.argmax(q))  # BUG: compares the rows' argmaxes, not x with argmax p
        return agree or u < ratio(p, q, x)

    return chain(xs, qs, ps, rng, accept=accept)


def repeat_of_previous_token_accepted_outright(prefix, draft, target, gamma, rng):
    """A prompt-lookup style heuristic accepts a draft that repeats the token before it without the
    test (repetitions "are cheap to verify"); other drafts get the ratio test."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ctx = list(prefix) + xs

    def accept(i, x, p, q, u):
        before = ctx[len(prefix) + i - 1] if len(prefix) + i > 0 else None
        return x == before or u < ratio(p, q, x)  # BUG: a repeat must pass the ratio test too

    return chain(xs, qs, ps, rng, accept=accept)
