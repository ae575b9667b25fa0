"""Round steps whose mistake is in request-level state: penalty counts rolled back for drafts
they never held (``--logits``), a target cache rolled back one entry too few, prefix-cache
blocks registered while drafts filled them, and a row memo shared by the drafter and the
target. They are module-level objects whose ``__call__`` is the step; a round whose prefix does
not continue the previous round's output starts a new request, and their state is bounded by one
request."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import RequestTracker, chain, histories, probs, target_logits

from specverify.dists import process_logits, softmax

from ._common import count_vector


class _PenaltyCountsDecrementedForRejectedDrafts:
    """The request's penalty counts (seen tokens, generated tokens) are two count vectors kept
    across its rounds, shared by drafter and verifier: row i adds the counts of xs[:i], and after a
    round the emitted tokens are added. After a rejection the rollback also subtracts the rejected
    drafts xs[n:], which were never added: their counts go negative, so later rows of the request
    lose the repetition and presence penalties on those tokens and get a frequency bonus instead
    of a penalty. (Settings with a penalty window recompute the histories each round.)"""

    def __init__(self):
        self.track = RequestTracker()
        self.seen = self.generated = None

    def _row(self, z, settings, history, extra):
        if settings.penalty_window or self.seen is None:
            return probs(z, settings, history)
        v = len(z)
        sc = self.seen + count_vector(extra, v)
        oc = self.generated + count_vector(extra, v)
        return softmax(process_logits(np.asarray(z, dtype=np.float64), settings, seen_counts=sc, output_counts=oc))

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        z0 = np.asarray(draft(prefix), dtype=np.float64)
        if self.track.is_new(prefix) or self.seen is None or len(self.seen) != len(z0):
            seen, generated = histories(settings, prefix)
            self.seen, self.generated = count_vector(seen, len(z0)), count_vector(generated, len(z0))
        xs, qs = [], []
        for i in range(gamma):
            zq = z0 if i == 0 else np.asarray(draft(prefix + xs), dtype=np.float64)
            q = self._row(zq, settings, prefix + xs, xs)
            xs.append(sample(q, rng))
            qs.append(q)
        z = target_logits(prefix, target, xs)
        ps = [self._row(z[i], settings, prefix + xs[:i], xs[:i]) for i in range(gamma + 1)]
        out = chain(xs, qs, ps, rng)
        v = len(z0)
        self.seen = self.seen + count_vector(out, v)
        self.generated = self.generated + count_vector(out, v)
        if len(out) <= gamma:
            rejected = count_vector(xs[len(out) - 1 :], v)
            self.seen = self.seen - rejected  # BUG: nothing to roll back (drafts enter only their rows)
            self.generated = self.generated - rejected
        self.track.done(prefix, out)
        return out


penalty_counts_decremented_for_rejected_drafts = _PenaltyCountsDecrementedForRejectedDrafts()


class _TargetCacheTrimmedOneTooFewAfterRejection:
    """The target's context is a per-request cache; the verification pass appends the round's
    drafts, and after a rejection at n the rollback removes gamma - n - 1 entries (one too few), so
    the rejected draft x_n stays in the cache before the replacement: every later target row of the
    request (ratio, residual, bonus) conditions on a context with one rejected draft inside per
    such round; the drafter sees the true prefix."""

    def __init__(self):
        self.track = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        out = chain(xs, qs, target_rows(self.ctx, target, xs), rng)
        self.ctx += xs  # the verification pass wrote the drafts' slots
        if len(out) <= gamma:
            n = len(out) - 1
            del self.ctx[len(self.ctx) - (gamma - n - 1) :]  # BUG: gamma - n entries, x_n included
            self.ctx.append(out[-1])
        else:
            self.ctx.append(out[-1])
        self.track.done(prefix, out)
        return out


target_cache_trimmed_one_too_few_after_rejection = _TargetCacheTrimmedOneTooFewAfterRejection()


class _TargetPrefixBlockRegisteredWithDraftTokens:
    """The target's prefix cache holds blocks of 4 tokens keyed by their index in the request (not
    by a hash of their content); a block is registered when the verification pass fills it, drafts
    included, and is then served for that index: once a block was registered with drafts that
    were later rejected, every later target row of the request (ratio, residual, bonus) conditions
    on those rejected drafts in place of the emitted tokens; the drafter sees the true prefix."""

    block = 4

    def __init__(self):
        self.track = RequestTracker()
        self.blocks = {}

    def _context(self, prefix):
        b = self.block
        full = len(prefix) // b
        ctx = []
        for k in range(full):
            ctx += list(self.blocks.get(k, prefix[k * b : (k + 1) * b]))
        return ctx + prefix[full * b :]

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.blocks = {}
        ctx = self._context(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        out = chain(xs, qs, target_rows(ctx, target, xs), rng)
        written = ctx + xs  # BUG: ctx + out, the committed tokens (the drafts past a rejection are not)
        b = self.block
        for k in range(len(written) // b):
            self.blocks.setdefault(k, tuple(written[k * b : (k + 1) * b]))
        self.track.done(prefix, out)
        return out


target_prefix_block_registered_with_draft_tokens = _TargetPrefixBlockRegisteredWithDraftTokens()


class _RowMemoSharedByDraftAndTarget:
    """A per-request memo of next-token rows keyed by the context alone, shared by the drafter's
    and the target's wrappers: the drafter fills it for prefix + xs[:i], so the verifier's lookups
    for those contexts return the drafter's rows as p_i (every draft accepted); only the bonus row
    p(. | prefix + xs), which the drafter never computed, is the target's."""

    def __init__(self):
        self.track = RequestTracker()
        self.memo = {}

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.memo = {}
        xs, qs = [], []
        for _ in range(gamma):
            ctx = tuple(prefix + xs)
            q = self.memo.setdefault(ctx, np.asarray(draft(list(ctx)), dtype=np.float64))
            xs.append(sample(q, rng))
            qs.append(q)
        rows = target_rows(prefix, target, xs)
        ps = [self.memo.setdefault(tuple(prefix + xs[:j]), rows[j]) for j in range(gamma + 1)]  # BUG: key (model, ctx)
        out = chain(xs, qs, ps, rng)
        self.track.done(prefix, out)
        return out


row_memo_shared_by_draft_and_target = _RowMemoSharedByDraftAndTarget()
