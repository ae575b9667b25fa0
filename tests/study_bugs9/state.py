"""Round steps whose mistake is in state kept across rounds or requests. The stateful ones are
module-level objects whose ``__call__`` is the step; a round whose prefix does not continue the
previous round's output starts a new request."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, target_rows

from ._common import (
    RequestTracker,
    chain,
    draft_chain_logits,
    histories,
    probs,
    probs_with,
    target_logits,
)


class _TargetPositionsNotResetPerRequest:
    """The target's position counter continues from the previous request instead of restarting at
    0: from the second request of a process on, the verification pass sees the prefix shifted by the
    previous request's final length (emulated by left-padding the context with that many id-0
    slots), so its rows are those of another position; the drafter is right."""

    def __init__(self):
        self.track = RequestTracker()
        self.offset = 0
        self.last_len = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.track.is_new(prefix):
            self.offset = self.last_len  # BUG: a new request's positions must start at 0
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows([0] * self.offset + list(prefix), target, xs)
        out = chain(xs, qs, ps, rng)
        self.track.done(prefix, out)
        self.last_len = len(prefix) + len(out)
        return out


target_positions_not_reset_per_request = _TargetPositionsNotResetPerRequest()


class _RaceNoiseDrawnOncePerRequest:
    """The replacement is drawn by the exponential race argmax((p - q)+ / E), exact for one draw,
    but the noise vector E is drawn once when a request starts and reused for every replacement of
    the request, so the request's replacements are coupled through one E."""

    def __init__(self):
        self.track = RequestTracker()
        self.noise = None

    def __call__(self, prefix, draft, target, gamma, rng):
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        if self.track.is_new(prefix) or self.noise is None:
            self.noise = rng.exponential(size=ps.shape[1])  # BUG: per request; it must be fresh per draw

        def replace(i, p, q):
            w = residual(p, q)
            return int(np.argmax(w / self.noise)) if w.sum() > 0 else sample(p, rng)

        out = chain(xs, qs, ps, rng, replace=replace)
        self.track.done(prefix, out)
        return out


race_noise_drawn_once_per_request = _RaceNoiseDrawnOncePerRequest()


DRAFT_SEED = 1234


def draft_generator_reseeded_each_round(prefix, draft, target, gamma, rng):
    """The drafter builds its seeded generator inside the round, so every round replays the same
    gamma uniforms: each draft is the inverse-CDF image of a fixed uniform under its row (a
    deterministic function of the context), while the row is reported as the draft's law q."""
    drafter_rng = np.random.default_rng(DRAFT_SEED)  # BUG: created per call; it must persist (or be rng)
    xs, qs = draft_chain(prefix, draft, gamma, drafter_rng)
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


class _PrefillTokenDroppedFromFirstRound:
    """At a request's first round the target's first token t ~ p(. | prefix) is sampled (the
    prefill's token) and the round is run on prefix + [t], but t is never returned: the first round
    emits tokens drawn for the context prefix + [t] as if they followed prefix."""

    def __init__(self):
        self.track = RequestTracker()

    def __call__(self, prefix, draft, target, gamma, rng):
        ctx = list(prefix)
        if self.track.is_new(prefix):
            t = sample(target_rows(prefix, target, [])[0], rng)
            ctx = ctx + [t]  # BUG: t enters the context but not the output
        xs, qs = draft_chain(ctx, draft, gamma, rng)
        ps = target_rows(ctx, target, xs)
        out = chain(xs, qs, ps, rng)
        self.track.done(prefix, out)
        return out


prefill_token_dropped_from_first_round = _PrefillTokenDroppedFromFirstRound()


class _FirstTokenOfRequestIsPrefillArgmax:
    """A request's first round returns the prefill's token, argmax p(. | prompt), whatever the
    request's temperature (the prefill path picks greedily); every later round of the request follows
    the standard rule."""

    def __init__(self):
        self.track = RequestTracker()

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.track.is_new(prefix):
            p0 = target_rows(prefix, target, [])[0]
            out = [int(np.argmax(p0))]  # BUG: the first token must be sampled from p0 like every other
        else:
            xs, qs = draft_chain(prefix, draft, gamma, rng)
            out = chain(xs, qs, target_rows(prefix, target, xs), rng)
        self.track.done(prefix, out)
        return out


first_token_of_request_is_prefill_argmax = _FirstTokenOfRequestIsPrefillArgmax()


# ---- penalty state (--logits) ----------------------------------------------------------------------------


class _OutputCountsCarriedAcrossRequests:
    """The generated-token log that presence and frequency penalties count is kept in the step and
    extended with each round's output; when a new request starts the log is extended with the new
    request's generated tokens instead of replaced by them, so every request after the first is
    penalised (draft and target alike) for the tokens the earlier requests of the process generated.
    The repetition penalty (over the prefix) is right."""

    def __init__(self):
        self.track = RequestTracker()
        self.generated = []

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.generated.extend(prefix[settings.prompt_len :])  # BUG: must be reset to these tokens
        xs, qs = [], []
        for _ in range(gamma):
            h = prefix + xs
            q = probs_with(draft(h), settings, histories(settings, h)[0], self.generated + xs)
            xs.append(sample(q, rng))
            qs.append(q)
        z = target_logits(prefix, target, xs)
        ps = [
            probs_with(z[i], settings, histories(settings, prefix + xs[:i])[0], self.generated + xs[:i])
            for i in range(gamma + 1)
        ]
        out = chain(xs, qs, ps, rng)
        self.generated.extend(out)
        self.track.done(prefix, out)
        return out


output_counts_carried_across_requests = _OutputCountsCarriedAcrossRequests()


class _PenaltySnapshotOneRoundStale:
    """The target's penalty state is a snapshot refreshed at the start of each round but read by the
    next round's verification: the target's rows are penalised over the prefix as it was one round
    earlier (the previous round's output missing) plus the drafts before the position; the drafter
    counts the whole prefix. The first round of a request is right."""

    def __init__(self):
        self.track = RequestTracker()
        self.snapshot = []

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        if self.track.is_new(prefix):
            self.snapshot = list(prefix)
        stale, self.snapshot = self.snapshot, list(prefix)  # BUG: verification reads last round's snapshot
        xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
        z = target_logits(prefix, target, xs)
        ps = [probs(z[i], settings, stale + xs[:i]) for i in range(gamma + 1)]
        out = chain(xs, qs, ps, rng)
        self.track.done(prefix, out)
        return out


penalty_snapshot_one_round_stale = _PenaltySnapshotOneRoundStale()
