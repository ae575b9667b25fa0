"""Stateful round steps whose state kept across the rounds of a request goes wrong.

Each is a module-level object whose ``__call__`` is the step; it resets when a round's prefix does
not continue the previous round's output (a new request)."""

from __future__ import annotations

from study_bugs._util import draft_chain, target_rows

from ._common import RequestTracker, chain


class TargetCacheTrimmedOneTooMany:
    """The target's context cache is rolled back one entry too far after a rejection: rejecting at
    position k trims gamma - k + 1 entries instead of gamma - k, so the last committed token before
    the replacement (x_{k-1}, or the prefix's last token when k = 0) is lost from the cache, and
    every later round of the request is verified against rows of that shortened context."""

    def __init__(self):
        self.req, self.ctx = RequestTracker(), []

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.req.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(self.ctx, target, xs)
        out = chain(xs, qs, ps, rng)
        base = len(self.ctx)
        self.ctx += xs  # the pass wrote the drafts into the cache
        if len(out) <= gamma:
            k = len(out) - 1
            del self.ctx[base + k - 1 :]  # BUG: keep the k accepted drafts: del self.ctx[base + k :]
        self.ctx.append(out[-1])
        self.req.done(prefix, out)
        return out


class FirstTargetRowReusedFromPreviousPass:
    """To save a position, the row that drew the previous round's final token (the residual's row or
    the bonus row) is cached and used as row 0 of the next round, instead of the row that follows
    that token: position 0 (ratio, residual, or the bonus when gamma = 0) sees a row one token stale."""

    def __init__(self):
        self.req, self.row = RequestTracker(), None

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.req.is_new(prefix):
            self.row = None
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs).copy()
        if self.row is not None:
            ps[0] = self.row  # BUG: the cached row predicted the last emitted token, not the next one
        out = chain(xs, qs, ps, rng)
        self.row = ps[len(out) - 1].copy()
        self.req.done(prefix, out)
        return out


class TargetRowMemoKeyedByContextTail:
    """Target rows are memoised across the rounds of a request under the last two tokens of their
    context (a short hash key), so a context whose tail was seen earlier at another position reuses
    that position's row."""

    def __init__(self):
        self.req, self.memo = RequestTracker(), {}

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.req.is_new(prefix):
            self.memo = {}
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs).copy()
        for i in range(gamma + 1):
            key = tuple((list(prefix) + xs[:i])[-2:])  # BUG: the key must be the whole context
            ps[i] = self.memo.setdefault(key, ps[i].copy())
        out = chain(xs, qs, ps, rng)
        self.req.done(prefix, out)
        return out


target_cache_trimmed_one_too_many = TargetCacheTrimmedOneTooMany()
first_target_row_reused_from_previous_pass = FirstTargetRowReusedFromPreviousPass()
target_row_memo_keyed_by_context_tail = TargetRowMemoKeyedByContextTail()
