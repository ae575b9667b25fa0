"""Round steps whose mistake is in request-level state: a generator shared across requests, the
KV blocks a request owns, the penalty counts kept for a request, and a stop token drafted inside a
block. The stateful ones are module-level objects whose ``__call__`` is the step; a round whose
prefix does not continue the previous round's output starts a new request. Their state is bounded
by one request."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, sample_or, target_rows

from ._common import RequestTracker, chain, histories, probs_with, target_logits


class _GeneratorRestoredAtEachRequest:
    """One generator serves the process; its state is saved when it is created and restored
    whenever a request starts (meant to make a request reproducible), so every request replays
    the same stream of draws for its drafts, coins, replacements and bonuses."""

    def __init__(self):
        self.track = RequestTracker()
        self.gen = None
        self.saved = None

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.gen is None:
            self.gen = np.random.default_rng(int(rng.integers(2**62)))
            self.saved = self.gen.bit_generator.state
        if self.track.is_new(prefix):
            self.gen.bit_generator.state = self.saved  # BUG: each request needs its own stream
        xs, qs = draft_chain(prefix, draft, gamma, self.gen)
        out = chain(xs, qs, target_rows(prefix, target, xs), self.gen)
        self.track.done(prefix, out)
        return out


generator_restored_at_each_request = _GeneratorRestoredAtEachRequest()


BLOCK = 16


class _DraftsSpillIntoUnallocatedBlock:
    """The request's KV blocks (16 slots each) are allocated before each verification pass for the
    committed length only, not for the gamma drafts about to be written: drafts whose slots fall
    past the allocated blocks are written to the null block and read back as id 0, so every target
    row after the first spilled slot (ratio, residual, bonus) conditions on 0 instead of the draft;
    rounds that stay inside the allocated blocks are right."""

    def __init__(self):
        self.track = RequestTracker()
        self.blocks = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.track.is_new(prefix):
            self.blocks = 0
        need = -(-len(prefix) // BLOCK)  # BUG: must cover len(prefix) + gamma slots
        self.blocks = max(self.blocks, need)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        room = self.blocks * BLOCK - len(prefix)
        seen = [x if j < room else 0 for j, x in enumerate(xs)]
        out = chain(xs, qs, target_rows(prefix, target, seen), rng)
        self.track.done(prefix, out)
        return out


drafts_spill_into_unallocated_block = _DraftsSpillIntoUnallocatedBlock()


def drafter_bans_eos_but_reports_unmasked_row(prefix, draft, target, gamma, rng):
    """The drafter never proposes the end-of-sequence token (the last id, the model's EOS; drafting
    past it is wasted) and samples each draft from its row with EOS removed and renormalised, but
    hands the unmasked row to the verifier: other drafts are tested against q instead of the law they
    were drawn from, and EOS can then only come out of the residual (p - q)+ or the bonus, so
    requests end at EOS too rarely."""
    ctx = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx + xs), dtype=np.float64)
        banned = q.copy()
        banned[len(q) - 1] = 0.0  # BUG: the row reported as q must be the banned row, renormalised
        xs.append(sample_or(banned, q, rng))
        qs.append(q)
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


# ---- penalty counts (--logits) ----------------------------------------------------------------------------


class _PenaltyCountsMissBonusTokens:
    """The request's penalty counts are updated with each round's accepted drafts (and replacement)
    before the bonus is sampled, and the bonus is never added: from then on every row of the request,
    draft and target alike, is penalised over a history that lacks the request's bonus tokens
    (repetition, presence and frequency penalties)."""

    def __init__(self):
        self.track = RequestTracker()
        self.uncounted = set()

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.uncounted = set()
        counted = [t for k, t in enumerate(prefix) if k not in self.uncounted]
        xs, qs = [], []
        for _ in range(gamma):
            seen, generated = histories(settings, counted + xs)
            q = probs_with(draft(prefix + xs), settings, seen, generated)
            xs.append(sample(q, rng))
            qs.append(q)
        z = target_logits(prefix, target, xs)
        ps = [probs_with(z[i], settings, *histories(settings, counted + xs[:i])) for i in range(gamma + 1)]
        out = chain(xs, qs, ps, rng)
        if len(out) == gamma + 1:
            self.uncounted.add(len(prefix) + gamma)  # BUG: the bonus must enter the counts like every token
        self.track.done(prefix, out)
        return out


penalty_counts_miss_bonus_tokens = _PenaltyCountsMissBonusTokens()
