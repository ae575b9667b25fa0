"""Round steps whose replacement (after a rejection) is drawn from the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, sample_or, target_rows


def _with_residual(prefix, draft, target, gamma, rng, weights):
    """The standard round with ``weights(ps, qs, i, x)`` as the replacement's weights."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(weights(ps, qs, i, x), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_abs(prefix, draft, target, gamma, rng):
    """The replacement is drawn from |p - q| (normalised): the max(., 0) clamp was replaced by abs
    "to keep the weights non-negative".

    Written for the study: |p - q| is the total-variation integrand, and code that also reports
    the TV distance reuses it; the class of vllm-project/vllm-ascend#7807 (an unadjusted residual).
    """
    return _with_residual(prefix, draft, target, gamma, rng, lambda ps, qs, i, x: np.abs(ps[i] - qs[i]))


def residual_next_target_row(prefix, draft, target, gamma, rng):
    """The replacement at position i is drawn from (p_{i+1} - q_i)+: the residual gathers the
    target row one past the one the ratio used.

    Written for the study: the ratio reads ``target_probs[pos]`` and the recovery kernel
    ``target_probs[pos + 1]`` (the bonus-row offset), the split-index class of
    vllm-project/vllm#51812.
    """
    return _with_residual(prefix, draft, target, gamma, rng, lambda ps, qs, i, x: np.maximum(ps[i + 1] - qs[i], 0.0))


def residual_q_without_x(prefix, draft, target, gamma, rng):
    """The replacement is drawn from (p - q')+, where q' is the draft row with the rejected token
    removed and renormalised ("the draft would not propose x again").

    Written for the study: a mix of the one-hot rule's "remove x" (vllm-project/vllm#40149) and
    the full rule's residual, applied to the draft row.
    """

    def weights(ps, qs, i, x):
        q = np.array(qs[i])
        q[x] = 0.0
        s = q.sum()
        q = q / s if s > 0 else q
        return np.maximum(ps[i] - q, 0.0)

    return _with_residual(prefix, draft, target, gamma, rng, weights)
