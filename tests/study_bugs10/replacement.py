"""Round steps whose mistake is in the law of the token drawn after a rejection."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample_or, target_rows

from ._common import chain


def residual_reweighted_by_target_probability(prefix, draft, target, gamma, rng):
    """The replacement is drawn proportionally to (p - q)+ * p (the residual weighted by the target
    probability once more, an importance weight copied from the acceptance test) instead of
    (p - q)+: ids where the target is confident are favoured."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = residual(p, q) * p  # BUG: the replacement's weights are (p - q)+ alone
        return sample_or(w, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def residual_over_draft_support_only(prefix, draft, target, gamma, rng):
    """The residual is computed over the draft row's support (the ids with q > 0, a sparse draft
    row), so ids the drafter gives no mass, where (p - q)+ = p, are never replacements; p when that
    leaves nothing."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = residual(p, q) * (q > 0)  # BUG: the residual's support includes the ids with q = 0
        return sample_or(w, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def race_multiplies_by_exponential_noise(prefix, draft, target, gamma, rng):
    """The replacement is drawn by an exponential race written argmax(w * E) instead of
    argmax(w / E) (E ~ Exp(1), w = (p - q)+): multiplying by the noise does not give an id with
    probability proportional to w (the largest weights win too often)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = residual(p, q)
        e = rng.exponential(size=len(w))
        return int(np.argmax(w * e)) if w.sum() > 0 else sample_or(w, p, rng)  # BUG: the race divides by E

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)
