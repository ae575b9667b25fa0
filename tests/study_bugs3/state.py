"""Round steps that keep state between rounds (a cache, a memo) and keep it wrongly.

The audit calls the rounds of one sequence consecutively; a prefix that does not continue the
previous round's output starts a new sequence.
"""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, standard_verify, target_rows


class TargetCacheDropsReplacement:
    """After a rejection the target's cache is trimmed to the accepted drafts and the replacement
    is never queued for the next pass (only a bonus is), so from the first rejection on the
    target's context lacks every replacement token the sequence emitted.

    lablup/mlxcel#994 (B30: a KV rewind that trims too much; there on the draft, harmlessly) moved
    to the target's cache, where the missing token changes the rows that verify.
    """

    def __init__(self):
        self.expect = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.expect is None or prefix != self.expect:
            self.cache, self.pending = prefix[:-1], prefix[-1:]
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ctx = self.cache + self.pending
        ps = target_rows(ctx, target, xs)
        out = standard_verify(xs, qs, ps, rng)
        n = len(out) - 1
        self.cache = ctx + xs[:n]
        self.pending = [out[-1]] if n == gamma else []  # BUG: the replacement is not queued
        self.expect = prefix + out
        return out


target_cache_drops_replacement = TargetCacheDropsReplacement()


class FirstRowMemoKeyedByPosition:
    """The first target row of each pass, p(. | prefix), is memoised by the prefix's length (and the
    vocabulary size) only, so a later sequence that reaches the same offset reuses a row computed
    for another sequence's context.

    huggingface/text-generation-inference#2711 (B39: prefix caching assumed contiguous KV slots, so
    wrong slots were read); here a prefix cache whose key is the position, not the tokens.
    """

    def __init__(self):
        self.memo = {}

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = np.array(target_rows(prefix, target, xs))
        key = (len(prefix), ps.shape[1])  # BUG: the tokens are not part of the key
        if key in self.memo:
            ps[0] = self.memo[key]
        else:
            self.memo[key] = ps[0].copy()
        return standard_verify(xs, qs, ps, rng)


first_row_memo_keyed_by_position = FirstRowMemoKeyedByPosition()
