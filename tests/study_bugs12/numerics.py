"""Round steps whose mistake is numerical: log-probabilities taken with log1p, target rows
normalised by their maximum."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import chain


def log_probabilities_via_log1p(prefix, draft, target, gamma, rng):
    """The test is done in log space with the log-probabilities taken by np.log1p (for 'accuracy
    near 0') instead of np.log: a draft is accepted with probability min(1, (1 + p(x)) / (1 +
    q(x))) >= 1/2 instead of min(1, p(x) / q(x)), even when p(x) = 0. Replacement and bonus are
    standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return np.log(u) < min(0.0, np.log1p(p[x]) - np.log1p(q[x]))  # BUG: np.log(p[x]) - np.log(q[x])

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def target_rows_scaled_by_their_max(prefix, draft, target, gamma, rng):
    """The target's rows are normalised by their largest entry (p / max p, a 'stable' scaling)
    instead of left as probabilities, and used for the ratio and the residual: the ratio is
    inflated by 1 / max p; the bonus sampler renormalises its row."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ps = ps / ps.max(axis=1, keepdims=True)  # BUG: the rows are probabilities already
    return chain(xs, qs, ps, rng)
