"""Stateful round steps whose state across the rounds of a request is wrong.

Each is a module-level object whose ``__call__`` is the step; it resets when a round's prefix does not
continue the previous round's output (a new request), so a seeded request reproduces.
"""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from study_bugs6._common import RequestTracker, verify


def _verify_with_flag(xs, qs, ps, rng):
    """The standard rule; returns (tokens, number of kept drafts)."""
    out = verify(xs, qs, ps, rng)
    return out, len(out) - 1


class TargetCacheDropsBonus:
    """The target's cache (the token list its passes continue from) is advanced by the kept drafts
    plus the replacement after a rejection, but by the drafts only after a full acceptance: from then
    on every pass of the request lacks each earlier bonus token, target row j being
    p(. | committed tokens minus the bonus tokens + xs[:j]). Drafts use the true prefix."""

    def __init__(self):
        self.req = RequestTracker()
        self.ctx = None

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.req.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(self.ctx, target, xs)
        out, n = _verify_with_flag(xs, qs, ps, rng)
        if n < gamma:
            self.ctx += out
        else:
            self.ctx += xs  # BUG: the bonus token out[-1] is never fed to the target's cache
        self.req.done(prefix, out)
        return out


target_cache_drops_bonus = TargetCacheDropsBonus()


class CommittedLengthAdvancedWithoutFinalToken:
    """A position counter slices the committed context for the target: it starts at the prompt's
    length and is advanced by len(out) - 1 per round (the kept drafts, not the final token), so the
    target's context is prefix[:pos], missing the last k tokens after k rounds of the request."""

    def __init__(self):
        self.req = RequestTracker()
        self.pos = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.req.is_new(prefix):
            self.pos = len(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(list(prefix)[: self.pos], target, xs)
        out = verify(xs, qs, ps, rng)
        self.pos += len(out) - 1  # BUG: the replacement / bonus token is not counted
        self.req.done(prefix, out)
        return out


committed_length_advanced_without_final_token = CommittedLengthAdvancedWithoutFinalToken()


class PrefetchedFirstDraftWithFreshRow:
    """The drafter prefetches the next round's first draft at the end of a round from its row
    q(. | prefix + out[:-1]) (before the final token is known), but the verifier is given the fresh
    row q(. | prefix + out) as q_0: the first draft's law and the q_0 used in its ratio and residual
    differ (the first round of a request is standard)."""

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
            x0 = self.pending
            q0 = np.asarray(draft(prefix), dtype=np.float64)  # BUG: x0 was drawn from the stale row, not this one
        xs, qs = [x0], [q0]
        for _ in range(gamma - 1):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        out = verify(xs, qs, ps, rng)
        stale = np.asarray(draft(prefix + out[:-1]), dtype=np.float64)
        self.pending = sample(stale, rng)
        self.req.done(prefix, out)
        return out


prefetched_first_draft_with_fresh_row = PrefetchedFirstDraftWithFreshRow()


class AdaptiveSharpeningReportsRawQ:
    """The drafter sharpens its rows as the request's acceptance rate grows (drafts from q^s / Z with
    s = 1 + 2 * rate so far), but reports the raw row q to the verifier: the ratio and the residual
    use q while the drafts follow q^s / Z (the first round of a request, s = 1, is standard)."""

    def __init__(self):
        self.req = RequestTracker()
        self.kept = 0
        self.tried = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.req.is_new(prefix):
            self.kept = self.tried = 0
        s = 1.0 + 2.0 * (self.kept / self.tried if self.tried else 0.0)
        xs, qs = [], []
        for _ in range(gamma):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            sharp = q**s
            xs.append(sample(sharp, rng))
            qs.append(q)  # BUG: the verifier gets the raw row, not the sharpened one the draft came from
        ps = target_rows(prefix, target, xs)
        out = []
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            break
        else:
            out.append(sample(ps[gamma], rng))
        self.kept += len(out) - 1
        self.tried += gamma
        self.req.done(prefix, out)
        return out


adaptive_sharpening_reports_raw_q = AdaptiveSharpeningReportsRawQ()
