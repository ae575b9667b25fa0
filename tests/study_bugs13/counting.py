"""Round steps whose mistake is in the tokens a round emits from its kept drafts: the drafter's
greedy tokens emitted for the sampled ones, and an accept buffer that keeps earlier rounds'
accepts."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import RequestTracker, ratio

from ._common import emit, leading_accepts


def kept_tokens_read_from_greedy_buffer(prefix, draft, target, gamma, rng):
    """The drafter returns its sampled tokens and, for logging, the argmax of each of its rows; the
    round emits the kept positions from the greedy list: argmax q_i instead of x_i for i < n, then
    the right final token (residual or bonus, computed from the sampled drafts)."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    greedy = [int(np.argmax(q)) for q in qs]
    ps = target_rows(prefix, target, xs)
    n, _ = leading_accepts(xs, qs, ps, rng)
    out = emit(xs, qs, ps, n, rng)
    return greedy[:n] + out[n:]  # BUG: out, whose first n tokens are xs[:n]


class _AcceptBufferNotClearedBetweenRounds:
    """The accept flags live in a [gamma] buffer zeroed when a request starts; the verify loop
    writes True on an acceptance and breaks on a rejection without writing False, and the kept
    count is the cumulative product of the whole buffer: an entry left True by an earlier round of
    the request extends the count past the first rejection (rejected drafts emitted, the final
    token drawn at the later position)."""

    def __init__(self):
        self.track = RequestTracker()
        self.accepted = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix) or self.accepted is None or len(self.accepted) != gamma:
            self.accepted = np.zeros(gamma, dtype=bool)
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        for i, x in enumerate(xs):
            if rng.random() < ratio(ps[i], qs[i], x):
                self.accepted[i] = True
            else:
                break  # BUG: self.accepted[i] = False first (the entry keeps an earlier round's accept)
        n = int(np.cumprod(self.accepted).sum())
        out = emit(xs, qs, ps, n, rng)
        self.track.done(prefix, out)
        return out


accept_buffer_not_cleared_between_rounds = _AcceptBufferNotClearedBetweenRounds()
