"""Exact round steps written in unusual ways; several look like bugs (some are twins of buggy
steps of this set)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, sample_or, target_rows
from study_bugs10._common import RequestTracker, chain, draft_chain_logits, ratio, staged_logits, target_logits

from specverify.dists import softmax

from ._common import emit, leading_accepts


def bonus_skipped_when_last_ratio_below_one(prefix, draft, target, gamma, rng):
    """Exact: after a full acceptance the bonus is drawn from p_gamma only when the last draft had
    p(x) >= q(x); otherwise the round ends with its drafts. Whether a bonus follows depends only on
    the emitted context, and the next token is then produced by the next round from the same
    law."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n, _ = leading_accepts(xs, qs, ps, rng)
    if n == gamma and ratio(ps[gamma - 1], qs[gamma - 1], xs[gamma - 1]) < 1.0:
        return list(xs)
    return emit(xs, qs, ps, n, rng)


class _PlainDecodingAfterANothingAcceptedRound:
    """Exact (stateful, resets per request): after a round that kept no draft, the request's next
    round does not speculate and emits one token drawn from the target's row p(. | prefix); the
    round after it speculates again."""

    def __init__(self):
        self.track = RequestTracker()
        self.plain = False

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.plain = False
        if self.plain:
            out = [sample(target_rows(prefix, target, [])[0], rng)]
            self.plain = False
        else:
            xs, qs = draft_chain(prefix, draft, gamma, rng)
            out = chain(xs, qs, target_rows(prefix, target, xs), rng)
            self.plain = len(out) == 1
        self.track.done(prefix, out)
        return out


plain_decoding_after_a_nothing_accepted_round = _PlainDecodingAfterANothingAcceptedRound()


def coin_as_sum_of_two_uniforms_mod_one(prefix, draft, target, gamma, rng):
    """Exact: the coin is (u1 + u2) mod 1, uniform on [0, 1) (the wrap-around of a uniform shifted
    by an independent one); looks like the coin u1 + u2 of an earlier set."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return (u + rng.random()) % 1.0 < ratio(p, q, x)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def kept_count_via_trim_zeros_of_cumprod(prefix, draft, target, gamma, rng):
    """Exact: n = len(np.trim_zeros(np.cumprod(mask), 'b')); the running product is 1 up to the
    first rejection and 0 after it, so trimming its trailing zeros leaves the leading accepts (the
    twin of counting:kept_count_via_trim_zeros)."""
    from study_bugs10._common import accept_mask

    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    mask = accept_mask(xs, qs, ps, rng)
    n = len(np.trim_zeros(np.cumprod(mask.astype(np.int64)), "b"))
    return emit(xs, qs, ps, n, rng)


def drafter_blocks_repeats_and_reports_the_masked_rows(prefix, draft, target, gamma, rng):
    """Exact: the drafter does not propose an id it already drafted in this round, and reports the
    masked, renormalised row it drew from as q (the twin of a buggy step that reported the unmasked
    row; it passed the audit and was replaced; any proposal is exact when q is its law)."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        w = q.copy()
        w[xs] = 0.0
        if w.sum() <= 0:
            w = q.copy()
        w = w / w.sum()
        xs.append(sample_or(w, q, rng))
        qs.append(w)
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def target_presence_penalty_from_clipped_counts(prefix, draft, target, gamma, rng, settings):
    """Exact: the verifier applies the presence penalty as presence * min(count, 1), the presence
    mask written as clipped counts (the exact twin of an earlier set's frequency penalty on clipped
    counts); bias, repetition and frequency penalties, temperature and filters as the request says."""

    def additive(x, c, presence, frequency):
        return x - presence * np.minimum(c, 1.0) - frequency * c

    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = [softmax(staged_logits(z[i], settings, prefix + xs[:i], additive=additive)) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)
