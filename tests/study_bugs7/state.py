"""Round steps whose state across rounds (caches, random streams) is wrong.

The stateful ones are module-level objects whose ``__call__`` is the step; they reset when a round's
prefix does not continue the previous round's output (a new request), so a seeded request reproduces
unless the bug is in the randomness itself.
"""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from study_bugs7._common import RequestTracker, verify

#: a process-wide generator, created once at import (unseeded: fresh entropy per process)
_PROCESS_RNG = np.random.default_rng()


def coins_from_process_wide_generator(prefix, draft, target, gamma, rng):
    """The acceptance coins come from a generator created once for the process instead of the request's
    rng (drafts, replacements and the bonus use the request's rng): the law is right, but a seeded
    request does not reproduce."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if _PROCESS_RNG.random() < min(1.0, ps[i][x] / qs[i][x]):  # BUG: not the request's rng
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def round_generator_seeded_from_truncated_float(prefix, draft, target, gamma, rng):
    """Each round forks a generator for its acceptance coins from a seed meant to be a random 32-bit
    integer, int(rng.random() * 2**32), written int(rng.random()) * 2**32, which is always 0: every
    round of every request tests its drafts against the same coins (those of default_rng(0))."""
    seed = int(rng.random()) * 2**32  # BUG: int() of a float in [0, 1) is 0
    coins = np.random.default_rng(seed)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if coins.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


class DraftCacheKeepsRejectedProposals:
    """The drafter proposes from its own cached context, which ran every proposal and is never trimmed
    after a rejection (only the round's final token is appended); the verifier's q rows come from a
    fresh draft pass over the committed context (prefix + xs[:i]). After a round with a rejection, the
    proposals of the request are drawn from q(. | stale context) but tested against the fresh rows."""

    def __init__(self):
        self.tracker = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.tracker.is_new(prefix):
            self.ctx = list(prefix)
        xs = []
        for _ in range(gamma):
            xs.append(sample(draft(self.ctx + xs), rng))
        self.ctx.extend(xs)  # the drafter's cache ran every proposal
        qs = [np.asarray(draft(list(prefix) + xs[:i]), dtype=np.float64) for i in range(gamma)]
        ps = target_rows(prefix, target, xs)
        out = verify(xs, qs, ps, rng)
        self.ctx.append(out[-1])  # BUG: the rejected proposals are not trimmed before the final token goes in
        self.tracker.done(prefix, out)
        return out


class TargetCacheRollbackNegativeZeroSlice:
    """The step keeps the target's context as a cache: the verification pass appends the drafts, and
    the rejected ones are removed with del ctx[-rejected:]. When every draft is accepted, rejected is
    0 and ctx[-0:] is the whole list: the cache is emptied and holds only the bonus token, and every
    later round of the request is verified against rows conditioned on that truncated context."""

    def __init__(self):
        self.tracker = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.tracker.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(self.ctx, target, xs)
        self.ctx.extend(xs)
        out = verify(xs, qs, ps, rng)
        rejected = gamma - (len(out) - 1)
        del self.ctx[-rejected:]  # BUG: -0 is 0: with nothing rejected this deletes everything
        self.ctx.append(out[-1])
        self.tracker.done(prefix, out)
        return out


draft_cache_keeps_rejected_proposals = DraftCacheKeepsRejectedProposals()
target_cache_rollback_negative_zero_slice = TargetCacheRollbackNegativeZeroSlice()
