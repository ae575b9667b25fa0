"""Round steps whose mistake is in request-level state: the target's cache after a rejection,
a cache of draft rows keyed by position, a target row reused from the previous pass, and a
'trusted' first draft after a full acceptance. They are module-level objects whose ``__call__``
is the step; a round whose prefix does not continue the previous round's output starts a new
request, and their state is bounded by one request."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import RequestTracker, chain, ratio


class _TargetCacheTrimmedOneTooManyAfterRejection:
    """The target's context is a per-request cache advanced with each round's output; after a round
    with a rejection the cache is rolled back one entry more than the rejected drafts (the last kept
    token, or the last committed one when nothing was kept, is lost) before the replacement is
    written, so from then on every target row (ratio, residual, bonus) conditions on a context
    missing one token per such round; the drafter sees the true prefix."""

    def __init__(self):
        self.track = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        out = chain(xs, qs, target_rows(self.ctx, target, xs), rng)
        kept = self.ctx + out[:-1]
        if len(out) <= gamma:
            kept = kept[: max(len(kept) - 1, 1)]  # BUG: the rejected drafts are rewound, not one more
        self.ctx = kept + out[-1:]
        self.track.done(prefix, out)
        return out


target_cache_trimmed_one_too_many_after_rejection = _TargetCacheTrimmedOneTooManyAfterRejection()


class _TargetCacheKeepsRejectedDraftInReplacementSlot:
    """The target's context is a per-request cache; after a rejection at position n the slot of
    x_n (computed by the verification pass) is marked committed, so the cache holds the rejected
    draft where the replacement was emitted: every later target row of the request conditions on
    x_n instead of the replacement; the drafter sees the true prefix."""

    def __init__(self):
        self.track = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        out = chain(xs, qs, target_rows(self.ctx, target, xs), rng)
        if len(out) <= gamma:
            self.ctx += out[:-1] + [xs[len(out) - 1]]  # BUG: the replacement out[-1] takes the slot
        else:
            self.ctx += out
        self.track.done(prefix, out)
        return out


target_cache_keeps_rejected_draft_in_replacement_slot = _TargetCacheKeepsRejectedDraftInReplacementSlot()


class _DraftRowsCachedByPosition:
    """The drafter's rows are cached per request under their absolute position; each draft is
    sampled from the fresh row of its context, but the row reported to the verifier is the cached
    one when the position was drafted before (a previous round's row, computed on a context with
    that round's drafts, rejected ones included)."""

    def __init__(self):
        self.track = RequestTracker()
        self.rows = {}

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.rows = {}
        xs, qs = [], []
        for i in range(gamma):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(self.rows.setdefault(len(prefix) + i, q))  # BUG: the row the draft was drawn from, q
        out = chain(xs, qs, target_rows(prefix, target, xs), rng)
        self.track.done(prefix, out)
        return out


draft_rows_cached_by_position = _DraftRowsCachedByPosition()


class _FirstTargetRowReusedFromPreviousBonusRow:
    """After a full acceptance the pass's last row (the bonus row, p(. | prefix + xs)) is kept and
    used as row 0 of the request's next round, whose context is prefix + xs + [bonus]: that round's
    first position is verified (ratio, residual) with a row one token short; other rows and rounds
    after a rejection are right."""

    def __init__(self):
        self.track = RequestTracker()
        self.last = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.last = None
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs).copy()
        if self.last is not None and len(self.last) == ps.shape[1]:
            ps[0] = self.last  # BUG: the bonus row conditions on the context before the bonus token
        out = chain(xs, qs, ps, rng)
        self.last = ps[gamma].copy() if len(out) == gamma + 1 else None
        self.track.done(prefix, out)
        return out


first_target_row_reused_from_previous_bonus_row = _FirstTargetRowReusedFromPreviousBonusRow()


class _FirstDraftTrustedAfterFullAcceptance:
    """A 'hot streak' heuristic: after a fully accepted round, the request's next round accepts its
    first draft without a coin; every other test is standard, and the flag clears after a round
    with a rejection."""

    def __init__(self):
        self.track = RequestTracker()
        self.trusted = False

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.trusted = False
        trusted = self.trusted
        xs, qs = draft_chain(prefix, draft, gamma, rng)

        def accept(i, x, p, q, u):
            if i == 0 and trusted:
                return True  # BUG: every draft takes its coin
            return u < ratio(p, q, x)

        out = chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)
        self.trusted = len(out) == gamma + 1
        self.track.done(prefix, out)
        return out


first_draft_trusted_after_full_acceptance = _FirstDraftTrustedAfterFullAcceptance()
