"""Round steps whose mistake is in the acceptance test: a ratio divided by a rejection-sampling
envelope, a running minimum of the ratios, sorted coins, a coin with too few bits."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import chain, ratio


def ratio_divided_by_envelope_constant(prefix, draft, target, gamma, rng):
    """Textbook rejection sampling mixed into the rule: a draft is accepted with probability
    (p(x) / q(x)) / M, M = max_v p(v) / q(v) over the ids the drafter proposes (M >= 1), instead of
    min(1, p(x) / q(x)); the replacement is (p - q)+ and the bonus is standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        on = q > 0
        m = float(np.max(p[on] / q[on]))
        return u < (p[x] / q[x]) / m  # BUG: u < min(1, p(x) / q(x)); M belongs to sampling p from q alone

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def coins_sorted_ascending(prefix, draft, target, gamma, rng):
    """The round's gamma coins are drawn at once and sorted ascending (np.sort meant for another
    array), so draft i is tested with the i-th smallest of gamma uniforms: early drafts are
    accepted too often, late ones too rarely; replacement and bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    coins = np.sort(rng.random(gamma))  # BUG: the coins in draw order (no sort)

    def accept(i, x, p, q, u):
        return coins[i] < ratio(p, q, x)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def coin_drawn_from_normal_not_uniform(prefix, draft, target, gamma, rng):
    """The coin is rng.standard_normal() where rng.random() was meant (randn for rand): a draft
    with ratio r is accepted with probability Phi(r) >= 1/2 (r = 0 -> 0.5, r = 1 -> 0.84) instead
    of r. Replacement and bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return rng.standard_normal() < ratio(p, q, x)  # BUG: the uniform u

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def ratio_of_cumulative_rows(prefix, draft, target, gamma, rng):
    """The verifier keeps the rows as CDFs (for inverse-CDF sampling) and the test reads them: a
    draft is accepted with probability min(1, P(x) / Q(x)), P and Q the running sums of p and q up
    to x, instead of min(1, p(x) / q(x)). Replacement and bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        big_p, big_q = np.cumsum(p), np.cumsum(q)
        return u < min(1.0, big_p[x] / big_q[x])  # BUG: the probabilities p[x] / q[x]

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)
