"""Round steps that keep state between the rounds of a sequence and keep it wrongly.

Each is a callable object (the audit calls the rounds of one sequence consecutively); a prefix that
does not continue the previous round's output starts a new sequence and resets the state.
"""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, probs, residual, sample, sample_or, standard_verify, target_rows


class _Sequential:
    """Detects the start of a new sequence: the prefix is not the last prefix plus the last output."""

    def __init__(self):
        self.expect = None

    def new_sequence(self, prefix):
        return self.expect is None or list(prefix) != self.expect

    def done(self, prefix, out):
        self.expect = list(prefix) + list(out)
        return out


class TargetCacheNotRolledBack(_Sequential):
    """The target's KV cache keeps the rejected drafts: nothing is trimmed after a rejection.

    The step feeds the target only what its cache lacks (the last emitted token) and the drafts,
    and never trims the cache back to the accepted prefix, so after a rejection the next pass
    conditions on the rejected drafts as if they had been emitted. ml-explore/mlx-lm#846 / #1109:
    a non-trimmable cache keeps rejected drafts.
    """

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.new_sequence(prefix):
            self.cache, pending = prefix[:-1], prefix[-1:]
        else:
            pending = self.pending
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ctx = self.cache + pending
        ps = target_rows(ctx, target, xs)
        out = standard_verify(xs, qs, ps, rng)
        self.cache = ctx + xs  # BUG: should be ctx + out[:-1] (trim the rejected drafts)
        self.pending = [out[-1]]
        return self.done(prefix, out)


target_cache_not_rolled_back = TargetCacheNotRolledBack()


class RecycledDraftsRescored(_Sequential):
    """Reuses the drafts left after a rejection as the next round's first drafts, with q re-read.

    After a rejection at k the drafts x_{k+1}.. were computed already, so the step proposes them
    again next round (saving draft calls), but looks their q up from the draft at the new prefix:
    the tokens were drawn from rows that conditioned on the rejected draft, not from the rows used
    in the ratio. Modelled on vllm-project/vllm#46899 (stale drafts fed back as draft tokens).
    """

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.new_sequence(prefix):
            self.leftover = []
        xs, qs = [], []
        for i in range(gamma):
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(self.leftover[i] if i < len(self.leftover) else sample(q, rng))  # BUG: q is not their law
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        out = []
        self.leftover = []
        for i, x in enumerate(xs):
            if qs[i][x] > 0 and rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            self.leftover = xs[i + 1 :]
            return self.done(prefix, out)
        out.append(sample(ps[gamma], rng))
        return self.done(prefix, out)


recycled_drafts_rescored = RecycledDraftsRescored()


def target_window_cache(prefix, draft, target, gamma, rng, window=256):
    """The target sees only the last 256 tokens: a rotating KV cache that drops the oldest.

    The target's cache is a ring buffer of 256 slots (no "keep" tokens, positions re-based), so
    from token 256 on the verification pass conditions on a truncated, re-positioned context; the
    draft keeps the full prefix. ml-explore/mlx-swift-lm#542: greedy divergence after about 200
    tokens (the equivalence test ran 32); the KV-block rotation the long unit crosses.
    """
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix[-window:], target, xs)  # BUG: truncated context
    return standard_verify(xs, qs, ps, rng)


class PenaltyHistoryKeepsRejected(_Sequential):
    """The penalty context is one shared list that the draft appends to; rejected drafts stay in it.

    Draft and target hold the same reference to the generated-token history; each drafted token is
    recorded when it is drawn and nothing is removed after a rejection, so penalties count tokens
    that were never emitted (in every later row, draft and target alike). Takes ``--logits``.
    vmlx-swift#357: penalty contexts are shared references, so rejected drafts are recorded.
    """

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        if self.new_sequence(prefix):
            self.history = prefix[:]  # the penalty context
        else:
            self.history.append(prefix[-1])  # the last token of the previous round
        base = self.history[:]
        xs, qs = [], []
        for _ in range(gamma):
            q = probs(draft(prefix + xs), settings, base + xs)
            x = sample(q, rng)
            xs.append(x)
            qs.append(q)
            self.history.append(x)  # BUG: recorded at drafting, never removed
        zs = np.asarray(target(prefix, xs), dtype=np.float64)
        ps = [probs(zs[j], settings, base + xs[:j]) for j in range(gamma + 1)]
        out = standard_verify(xs, qs, ps, rng)
        return self.done(prefix, out)


penalty_history_keeps_rejected = PenaltyHistoryKeepsRejected()


class PenaltyLastTokenOnly(_Sequential):
    """The penalty state is updated with only the last token of each round.

    The penalizer is fed once per verification step with the step's last output, so accepted
    drafts are never counted in later rounds: a frequency penalty acts at about nominal / mean
    accepted length. Takes ``--logits``. sgl-project/sglang#33643: "penalties fed only the last
    token of each verification step".
    """

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        if self.new_sequence(prefix):
            self.history = prefix[:]
        else:
            self.history.append(prefix[-1])  # BUG: one token per round; the accepted drafts are lost
        base = self.history[:]
        xs, qs = [], []
        for _ in range(gamma):
            q = probs(draft(prefix + xs), settings, base + xs)
            xs.append(sample(q, rng))
            qs.append(q)
        zs = np.asarray(target(prefix, xs), dtype=np.float64)
        ps = [probs(zs[j], settings, base + xs[:j]) for j in range(gamma + 1)]
        out = standard_verify(xs, qs, ps, rng)
        return self.done(prefix, out)


penalty_last_token_only = PenaltyLastTokenOnly()
