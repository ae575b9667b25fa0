"""Round steps whose mistake lives in state kept across the rounds of a sequence (objects whose
``__call__`` is the step; the audit calls the rounds of one sequence consecutively)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _chain_round(xs, qs, ps, rng, coins=None):
    """The standard chain rule; returns (tokens, n accepted). ``coins`` supplies the acceptance
    uniforms (default: fresh ones from ``rng``)."""
    out = []
    for i, x in enumerate(xs):
        u = rng.random() if coins is None else coins[i]
        if u < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out, i
    out.append(sample(ps[len(xs)], rng))
    return out, len(xs)


class TargetKVNotTrimmed:
    """The target's KV cache is not rolled back after a rejection: the rejected drafts' entries stay
    and the next pass appends the replacement after them, so every later target row is
    p(. | committed prefix with the rejected drafts still inside), one position longer per rejected
    draft and with the wrong preceding tokens. Rounds that accept everything leave it right.

    ml-explore/mlx-lm#1109 / #846 (B25: ``trim`` is a no-op on a non-trimmable cache, so rejected
    drafts stay in the state); the draft side here is right.
    """

    def __init__(self):
        self.expect = None  # the sequence this cache belongs to, as the step last returned it
        self.ctx = None  # what the target's cache holds, plus the token it has still to be fed

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:  # a new request: prefill
            self.ctx = prefix
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(self.ctx, target, xs)
        out, _ = _chain_round(xs, qs, ps, rng)
        self.ctx = self.ctx + xs + [out[-1]]  # BUG: all gamma drafts stay, not xs[: n]
        self.expect = prefix + out
        return out


class RequestRngReplayed:
    """Each request draws its randomness from a generator keyed by its batch slot, and a request
    served alone is always slot 0: every request starts the same stream, so serial requests
    replay the same uniforms round for round (the rule itself is the standard one).

    NVIDIA/TensorRT-LLM#19487 / #19505 (B33: the RNG offset keyed by sequence slot, so serial
    unseeded requests share one stream and give identical samples).
    """

    def __init__(self, slot=0):
        self.slot = slot
        self.expect = None
        self.gen = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:
            self.gen = np.random.default_rng(self.slot)  # BUG: keyed by the slot, not the request
        xs, qs = draft_chain(prefix, draft, gamma, self.gen)
        ps = target_rows(prefix, target, xs)
        out, _ = _chain_round(xs, qs, ps, self.gen)
        self.expect = prefix + out
        return out


class AcceptedCountFromPreviousStep:
    """The round computes its accepted count n and the token after the accepted drafts correctly,
    but the output is sliced with the accepted count of the previous round (a field of the
    scheduler updated after it is read): it emits xs[:m] + [token], m the previous round's n, so
    the token lands at the wrong position and rejected or unverified drafts are emitted when m > n.

    Written for the study, modelled on vllm-project/vllm#52071 (without async scheduling a scheduler
    field was left unset and the output was wrong) and the async-scheduling bookkeeping of accepted
    counts it belongs to.
    """

    def __init__(self):
        self.prev_n = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        out, n = _chain_round(xs, qs, ps, rng)
        m, self.prev_n = self.prev_n, n  # BUG: the slice uses last round's count
        return xs[:m] + [out[-1]]


class CoinOffsetAdvancedByAcceptedCount:
    """Acceptance uniforms come from a per-request stream read at an offset, and the offset advances
    by the number of accepted drafts n instead of the number of coins consumed (n + 1 after a
    rejection): the coin that rejected a draft, known to be >= min(1, p/q) there, is reused as the
    first coin of the next round.

    vllm-project/vllm-ascend#13608 / #13755 (B17: the per-request RNG advanced by the wrong amount,
    there on zero-draft requests), here an offset off by the rejecting coin.
    """

    def __init__(self):
        self.expect = None
        self.coins = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:  # a new request: a fresh stream at offset 0
            self.coins = []
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        while len(self.coins) < gamma:
            self.coins.append(rng.random())
        out, n = _chain_round(xs, qs, ps, rng, coins=self.coins[:gamma])
        del self.coins[:n]  # BUG: consumed n + 1 coins after a rejection
        self.expect = prefix + out
        return out


target_kv_not_trimmed = TargetKVNotTrimmed()
request_rng_replayed = RequestRngReplayed()
accepted_count_from_previous_step = AcceptedCountFromPreviousStep()
coin_offset_advanced_by_accepted_count = CoinOffsetAdvancedByAcceptedCount()
