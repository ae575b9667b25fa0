"""Exact round steps written in unusual ways (several look like bugs); none has a mistake."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from study_bugs6._common import RequestTracker, verify


def target_rows_one_position_at_a_time(prefix, draft, target, gamma, rng):
    """No batched verification pass: each row j is fetched on its own as the first row of
    target(prefix + xs[:j], []), which is the same p(. | prefix + xs[:j])."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = [np.asarray(target(list(prefix) + xs[:j], [])[0], dtype=np.float64) for j in range(gamma + 1)]
    return verify(xs, qs, ps, rng)


def drafts_from_unconditioned_first_row(prefix, draft, target, gamma, rng):
    """Every draft is drawn from the first draft row q(. | prefix) (a "parallel" drafter that never
    conditions on its own drafts), and that same row is reported as q for every position: the rule
    is exact for any proposal whose reported row is the one it sampled from."""
    q0 = np.asarray(draft(list(prefix)), dtype=np.float64)
    xs = [sample(q0, rng) for _ in range(gamma)]
    qs = [q0] * gamma
    ps = target_rows(prefix, target, xs)
    return verify(xs, qs, ps, rng)


def residual_as_p_times_one_minus_ratio(prefix, draft, target, gamma, rng):
    """The residual written as p * (1 - q / p)+ (zero where p = 0), which is (p - q)+."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        p, q = ps[i], qs[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(p > 0, p * np.maximum(1.0 - q / p, 0.0), 0.0)
        out.append(sample_or(w, p, rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def acceptance_via_exponential_clock(prefix, draft, target, gamma, rng):
    """Accept iff E > log(q(x) / p(x)) with E = -log(1 - u) ~ Exp(1): P = min(1, p(x) / q(x)) (a
    rejected draft has p(x) = 0, log(q/p) = inf)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        e = -np.log1p(-rng.random())
        with np.errstate(divide="ignore"):
            t = np.log(qs[i][x]) - np.log(ps[i][x])
        if e > t:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def bonus_as_residual_against_zero_row(prefix, draft, target, gamma, rng):
    """The bonus is produced by the replacement path: a zero draft row is appended for position
    gamma, so the "residual" there is (p_gamma - 0)+ = p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    qs = qs + [np.zeros_like(ps[gamma])]
    out = []
    for i in range(gamma + 1):
        if i < gamma and rng.random() < min(1.0, ps[i][xs[i]] / qs[i][xs[i]]):
            out.append(xs[i])
            continue
        out.append(sample(residual(ps[i], qs[i]), rng))
        return out
    return out


def break_after_first_acceptance(prefix, draft, target, gamma, rng):
    """The verify loop stops at the first acceptance (a misplaced break) and then samples "the bonus"
    from the next target row: after keeping x_0 it draws from p_1 = p(. | prefix + [x_0]), the right
    row for that context, so the round is exact (it wastes the other drafts)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            break
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(out)], rng))
    return out


class StaleFirstDraftRowUsedConsistently:
    """The drafter prefetches the next round's first draft from its stale row q(. | prefix + out[:-1])
    at the end of a round and hands that same stale row to the verifier as q_0: a proposal that does
    not see the last token, reported as what it sampled from, so exact. Resets per request."""

    def __init__(self):
        self.req = RequestTracker()
        self.pending = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.req.is_new(prefix):
            self.pending = None
        if self.pending is None:
            q0 = np.asarray(draft(prefix), dtype=np.float64)
            x0 = sample(q0, rng)
        else:
            x0, q0 = self.pending
        xs, qs = [x0], [q0]
        for _ in range(gamma - 1):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        out = verify(xs, qs, ps, rng)
        stale = np.asarray(draft(prefix + out[:-1]), dtype=np.float64)
        self.pending = (sample(stale, rng), stale)
        self.req.done(prefix, out)
        return out


stale_first_draft_row_used_consistently = StaleFirstDraftRowUsedConsistently()
