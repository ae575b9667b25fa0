"""Round steps that compute the number of kept drafts wrongly, or stop (or fail to stop)
verification in the wrong place."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _coins(xs, qs, ps, rng):
    """The accept mask of every draft's standard test (all coins drawn up front)."""
    px = np.array([ps[i][x] for i, x in enumerate(xs)])
    qx = np.array([qs[i][x] for i, x in enumerate(xs)])
    return rng.random(len(xs)) < np.minimum(1.0, px / qx)


def count_trailing_accepts(prefix, draft, target, gamma, rng):
    """The count is the number of trailing accepts of the mask (the mask was flipped for a
    right-aligned buffer and the leading-run count taken on the flipped copy), and the round emits
    that many drafts, then a residual draw at that position or the bonus.

    Written for the study: batched kernels right-align variable-length draft blocks and flip masks
    to do it; the flip survived where the count of the leading run is taken.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _coins(xs, qs, ps, rng)
    n = int(np.cumprod(acc[::-1]).sum())  # BUG: trailing run, not leading run
    if n == gamma:
        return list(xs) + [sample(ps[gamma], rng)]
    return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]


def replacement_gathered_at_count_minus_one(prefix, draft, target, gamma, rng):
    """At a rejection after n accepted drafts, the replacement is gathered from the recovered-token
    buffer at index n - 1, the residual (p - q)+ of the last accepted position (index -1 wraps to the
    bonus row and the last draft row when n = 0).

    Written for the study: in vLLM's rejection sampler the recovered tokens are computed for every
    position and one is gathered by the accepted count (engines notes 1.4); here the gather uses
    "the index of the last accepted token".
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    recovered = [sample_or(residual(ps[i], qs[i]), ps[i], rng) for i in range(gamma)]
    acc = _coins(xs, qs, ps, rng)
    n = int(np.cumprod(acc).sum())
    if n == gamma:
        return list(xs) + [sample(ps[gamma], rng)]
    return list(xs[:n]) + [recovered[n - 1]]  # BUG: should be recovered[n]


def verify_window_shorter_than_block(prefix, draft, target, gamma, rng):
    """Only the first gamma // 2 drafts are verified (the verifier's window is configured shorter
    than the drafter's block); when they all pass, the remaining drafts are appended unverified and
    the bonus is drawn from row gamma.

    Written for the study: the drafter's num_speculative_tokens and the verifier's max_draft_len
    are separate settings in several engines (TensorRT-LLM's draft-target config, vLLM's proposer
    vs sampler metadata); the verifier loops over its own length and the output copies the block.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    window = max(1, gamma // 2)
    out = []
    for i in range(window):  # BUG: the verifier's window, not the block
        x = xs[i]
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return list(xs) + [sample(ps[gamma], rng)]


def rejection_handled_one_late(prefix, draft, target, gamma, rng):
    """A rejection at position i is acted on one iteration late: the replacement takes x_i's place,
    but the next draft x_{i+1} (the rejected token's continuation) is still emitted before the round
    ends.

    openvinotoolkit/openvino.genai#4190 (B38): non-greedy rejection handled one iteration late, "a
    word dropped, with its continuation kept".
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    rejected = False
    for i, x in enumerate(xs):
        if rejected:  # BUG: the stop flag is checked after this draft is emitted
            out.append(x)
            return out
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        rejected = True
    if rejected:
        return out
    out.append(sample(ps[gamma], rng))
    return out
