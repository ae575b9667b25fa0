"""Round steps whose token after a rejection follows the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, target_rows

from ._common import chain


def replacement_returns_index_into_support(prefix, draft, target, gamma, rng):
    """The replacement is drawn over the residual's support (the ids with (p - q)+ > 0) and the
    position drawn in that support list is emitted as the token id, instead of support[k]."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        w = residual(p, q)
        support = np.flatnonzero(w)
        if support.size == 0:
            return sample(p, rng)
        k = sample(w[support], rng)
        return int(k)  # BUG: a position in the candidate list, not the vocabulary id support[k]

    return chain(xs, qs, ps, rng, replace=replace)


def residual_floored_at_eps(prefix, draft, target, gamma, rng):
    """The residual is clamped from below at 1e-3 (an fp16-safe epsilon) instead of at 0, so every
    token with p <= q, the rejected draft included, keeps weight 1e-3 in the replacement's law."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        w = np.maximum(p - q, 1e-3)  # BUG: the floor belongs at 0 (an epsilon only guards a 0 sum)
        return sample(w, rng)

    return chain(xs, qs, ps, rng, replace=replace)
