"""Exact round steps written in unusual ways; several look like bugs (some are twins of buggy
steps of this set)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, target_rows
from study_bugs10._common import RequestTracker, chain, draft_chain_logits, ratio, target_logits

from ._common import pipeline_with_repetition


class _DrafterCacheRewoundTwoTooMany:
    """Exact (stateful, resets per request): the drafter keeps its own context, and after every
    round it is rolled back two tokens further than the kept drafts (never below one token) before
    the round's final token is appended, so its context lags the request's; each draft is reported
    with the row it was drawn from, and the target's rows are those of prefix + xs[:i]."""

    def __init__(self):
        self.track = RequestTracker()
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.ctx = list(prefix)
        xs, qs = [], []
        for _ in range(gamma):
            q = np.asarray(draft(self.ctx + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(q)
        out = chain(xs, qs, target_rows(prefix, target, xs), rng)
        kept = self.ctx + out[:-1]
        self.ctx = kept[: max(len(kept) - 2, 1)] + out[-1:]
        self.track.done(prefix, out)
        return out


drafter_cache_rewound_two_too_many = _DrafterCacheRewoundTwoTooMany()


def race_noise_shared_by_the_positions_of_a_round(prefix, draft, target, gamma, rng):
    """Exact: the replacement is the exponential race argmax((p_i - q_i)+ / E) with one noise vector
    E drawn per round and shared by every position; only the first rejection's replacement is
    emitted, so the noise it uses has been used by nothing else."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    e = rng.exponential(size=len(qs[0]))

    def replace(i, p, q):
        w = residual(p, q)
        return int(np.argmax((w if w.sum() > 0 else p) / e))

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def ratio_capped_before_the_division(prefix, draft, target, gamma, rng):
    """Exact: the test is u < min(1, p(x)) / q(x), the cap taken before the division; p(x) <= 1, and
    u < 1 makes u < p(x) / q(x) the same event as u < min(1, p(x) / q(x))."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return u < np.minimum(1.0, p[x]) / q[x]

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def last_draft_left_unverified_final_token_from_its_row(prefix, draft, target, gamma, rng):
    """Exact: gamma drafts are sent to the target, but only the first gamma - 1 are verified; after
    they are all accepted the final token is drawn from row gamma - 1, p(. | prefix + xs[:gamma - 1]),
    the row of the context emitted (the last draft is never emitted)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    return chain(xs[:-1], qs[:-1], ps[:gamma], rng)


def coin_as_square_of_max_of_two_uniforms(prefix, draft, target, gamma, rng):
    """Exact: the coin is max(u1, u2) ** 2; P(max(u1, u2) < t) = t ** 2, so P(max(u1, u2) ** 2 < r)
    = r and the coin is uniform on [0, 1)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return max(u, rng.random()) ** 2 < ratio(p, q, x)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def target_repetition_penalty_loop_over_distinct_ids(prefix, draft, target, gamma, rng, settings):
    """Exact (--logits): the verifier applies the repetition penalty by a loop over the distinct
    ids of the history (dict.fromkeys keeps each once), the same as the library's mask; bias, the
    additive penalties, temperature and filters as the request says."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)

    def ids_of(seen):
        return list(dict.fromkeys(seen))

    ps = [pipeline_with_repetition(z[i], settings, prefix + xs[:i], ids_of) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)
