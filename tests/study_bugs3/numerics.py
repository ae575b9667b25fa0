"""Round steps with numerical shortcuts (truncated rows, thresholds, normalisers) that change
the law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def target_from_top5_logprobs(prefix, draft, target, gamma, rng):
    """The target's rows are rebuilt from the 5 largest probabilities of each row (the rest read
    as 0, nothing renormalised): the ratio, the residual and the bonus use those truncated rows.

    Written for the study: a verifier built on an endpoint's top-k logprobs (OpenAI-style
    ``top_logprobs`` = 5, vLLM's max_logprobs) instead of full rows; the target-side counterpart of
    EAGLE-style drafters that keep top-k draft probabilities (sgl-project/sglang#10308).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    full = target_rows(prefix, target, xs)
    ps = np.zeros_like(full)
    for j, row in enumerate(full):
        keep = np.argsort(-row, kind="stable")[:5]  # BUG: only the top 5 are known
        ps[j, keep] = row[keep]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_small_entries_dropped(prefix, draft, target, gamma, rng):
    """Residual entries below 0.02 are set to 0 before normalising ("denoise float error in
    p - q"), so tokens whose target mass exceeds the draft's by a little are never replacements.

    Written for the study: a tolerance meant for rounding noise (vllm-project/vllm#46665, float32
    loss on the residual path) set at a probability scale; the mirror of vllm-project/vllm#2336
    (B43: an epsilon floor where the rule needs an exact zero).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        r = residual(ps[i], qs[i])
        r = np.where(r < 0.02, 0.0, r)  # BUG: a tolerance at probability scale
        out.append(sample_or(r, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def normaliser_skips_last_id(prefix, draft, target, gamma, rng):
    """The replacement and the bonus are drawn by an inverse CDF whose cumulative sum runs over
    ids 0 .. V - 2 (``range(V - 1)``), so the last vocabulary id is never a replacement or a bonus.

    Written for the study: an off-by-one in a hand-written sampling loop, the edge-id class of
    vLLM's advisory GHSA-8wr5-jm2h-8r4f (B18: the vocabulary's tail tile handled wrongly); the last
    id is often EOS / a stop id.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def draw(w):
        w = np.asarray(w, dtype=np.float64)
        c = np.cumsum(w[: len(w) - 1])  # BUG: the last id is left out of the walk
        if c[-1] <= 0:
            return int(np.argmax(w))
        return int(np.searchsorted(c, rng.random() * c[-1], side="right"))

    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        r = residual(ps[i], qs[i])
        out.append(draw(r if r.sum() > 0 else ps[i]))
        return out
    out.append(draw(ps[gamma]))
    return out
