"""Round steps whose mistake is in request-level state: a draft slot holding a stale placeholder,
a finished flag set by a drafted stop, the target's cache and its positions, and a logit bias kept per
request (``--logits``). They are module-level objects whose ``__call__`` is the step; a round
whose prefix does not continue the previous round's output starts a new request, and their state
is bounded by one request."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import RequestTracker, chain, draft_chain_logits, histories, probs_with, target_logits


class _StalePlaceholderBecomesFirstDraft:
    """After a round with a rejection, the unused draft slots of the request are marked with the
    placeholder -1, and the next round's first draft is read from such a slot instead of being
    proposed: -1 resolves (wrap-around lookup) to id V - 1, which is fed to the target and tested
    with q_0(V - 1) as if it had been drawn from q_0; rounds after a full acceptance are right."""

    def __init__(self):
        self.track = RequestTracker()
        self.slot = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.slot = None
        xs, qs = [], []
        for i in range(gamma):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            x = sample(q, rng)
            if i == 0 and self.slot is not None:
                x = int(np.arange(len(q))[self.slot])  # BUG: a placeholder slot is not a proposal
            xs.append(x)
            qs.append(q)
        out = chain(xs, qs, target_rows(prefix, target, xs), rng)
        self.slot = -1 if len(out) <= gamma else None
        self.track.done(prefix, out)
        return out


stale_placeholder_becomes_first_draft = _StalePlaceholderBecomesFirstDraft()


class _DraftedStopMarksRequestFinished:
    """The request's finished flag is set when a round drafts the end-of-sequence id (the last id),
    whether or not that draft is accepted; the next round of a request so marked takes the finish
    path, which emits the end-of-sequence id (and clears the flag) instead of decoding. Rounds
    that draft no EOS are standard."""

    def __init__(self):
        self.track = RequestTracker()
        self.finished = False

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.finished = False
        if self.finished:
            self.finished = False
            out = [len(draft(prefix)) - 1]
        else:
            xs, qs = draft_chain(prefix, draft, gamma, rng)
            out = chain(xs, qs, target_rows(prefix, target, xs), rng)
            self.finished = len(qs[0]) - 1 in xs  # BUG: only an emitted EOS finishes a request
        self.track.done(prefix, out)
        return out


drafted_stop_marks_request_finished = _DraftedStopMarksRequestFinished()


class _BonusWrittenTwiceIntoTargetCache:
    """The target's context is a per-request cache advanced with each round's output; after a full
    acceptance the bonus is written by the sampler and written again as the next pass's input, so
    from then on every target row of the request (ratio, residual, bonus) conditions on a context
    with each such bonus doubled; the drafter sees the true prefix."""

    def __init__(self):
        self.track = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        out = chain(xs, qs, target_rows(self.ctx, target, xs), rng)
        self.ctx += out
        if len(out) == gamma + 1:
            self.ctx.append(out[-1])  # BUG: the bonus is in the cache once
        self.track.done(prefix, out)
        return out


bonus_written_twice_into_target_cache = _BonusWrittenTwiceIntoTargetCache()


class _TargetPositionAdvancedByKeptDraftsOnly:
    """The target's position counter of a request is advanced by the kept drafts of each round but
    not by the round's final token (replacement or bonus), so after k rounds the verification pass
    runs k positions too low; emulated by running it on the prefix without its first k tokens
    (right last tokens, position k too low). The drafter is right; a request's first round too."""

    def __init__(self):
        self.track = RequestTracker()
        self.pos = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.pos = len(prefix)
        lag = len(prefix) - self.pos
        ctx = prefix[min(lag, len(prefix) - 1) :]
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        out = chain(xs, qs, target_rows(ctx, target, xs), rng)
        self.pos += len(out) - 1  # BUG: every emitted token takes a position, len(out)
        self.track.done(prefix, out)
        return out


target_position_advanced_by_kept_drafts_only = _TargetPositionAdvancedByKeptDraftsOnly()


# ---- a logit bias kept per request (--logits) -------------------------------------------------------------


class _TargetLogitBiasAccumulatesPerRound:
    """The verifier keeps the request's bias vector and adds the request's logit bias to it in
    place at every round (meant: set it once), so round r's target rows carry r times the bias;
    the rest of the pipeline and the drafts are right (a request's first round too)."""

    def __init__(self):
        self.track = RequestTracker()
        self.bias = None

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
        z = target_logits(prefix, target, xs)
        v = z.shape[-1]
        if self.track.is_new(prefix) or self.bias is None or len(self.bias) != v:
            self.bias = np.zeros(v)
        vec = settings.bias_vector(v)
        if vec is not None:
            self.bias += vec  # BUG: the request's bias is added once, not once per round
        knobs = dataclasses.replace(settings, logit_bias=())
        ps = [probs_with(z[i] + self.bias, knobs, *histories(settings, prefix + xs[:i])) for i in range(gamma + 1)]
        out = chain(xs, qs, ps, rng)
        self.track.done(prefix, out)
        return out


target_logit_bias_accumulates_per_round = _TargetLogitBiasAccumulatesPerRound()
