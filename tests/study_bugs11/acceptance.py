"""Round steps whose mistake is in the acceptance test."""

from __future__ import annotations

from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import chain, ratio

THRESHOLD_SINGLE = 0.2
TOLERANCE = 0.1
P_MIN = 0.1


def target_confidence_threshold_accepts_outright(prefix, draft, target, gamma, rng):
    """SGLang's ``threshold_single`` set below 1: a draft the target gives p(x) >= 0.2 is accepted
    without its coin; the others take u < min(1, p(x) / q(x)). Replacement and bonus are
    standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return p[x] >= THRESHOLD_SINGLE or u < ratio(p, q, x)  # BUG: a threshold below 1 is lossy

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def ratio_with_additive_tolerance(prefix, draft, target, gamma, rng):
    """The test is u < min(1, p(x) / q(x) + 0.1), a tolerance added so that 'numerical noise' does
    not reject drafts: every draft with p(x) / q(x) < 1 is accepted 0.1 more often. Replacement
    and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return u < min(1.0, ratio(p, q, x) + TOLERANCE)  # BUG: no tolerance in an exact test

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def low_probability_drafts_rejected_outright(prefix, draft, target, gamma, rng):
    """llama.cpp's draft cut p_min applied in the verifier as a rejection: a draft with q(x) < 0.1
    is rejected without its coin (and a token drawn from (p - q)+ at its position) instead of
    being tested; the others take u < min(1, p(x) / q(x)). Bonus standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return q[x] >= P_MIN and u < ratio(p, q, x)  # BUG: a low-q draft must still take its test

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)
