"""Round steps that get the accepted count, or the tokens emitted from it, wrong."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _accept_mask(xs, qs, ps, rng):
    """All gamma acceptance tests at once (a fresh uniform each), as a vectorised sampler runs
    them: [gamma] booleans, u_i < min(1, p_i(x_i) / q_i(x_i))."""
    u = rng.random(len(xs))
    a = np.array([min(1.0, ps[i][x] / qs[i][x]) for i, x in enumerate(xs)])
    return u < a


def _final(xs, qs, ps, n, rng):
    """The token after n kept drafts: the replacement from (p_n - q_n)+, or the bonus at n = gamma."""
    if n == len(xs):
        return sample(ps[n], rng)
    return sample_or(residual(ps[n], qs[n]), ps[n], rng)


def full_acceptance_default_index_gamma_minus_one(prefix, draft, target, gamma, rng):
    """The first rejection is found with ``next(..., default)`` and the default for "no
    rejection" is gamma - 1 instead of gamma: after a full acceptance the round emits
    xs[:gamma - 1] and then a draw from (p_{gamma-1} - q_{gamma-1})+ (p_{gamma-1} when that is
    empty) in place of the accepted last draft, and never a bonus. Rejections are handled right.

    Written for the study: an off-by-one default of the first-rejection search (next to
    openvinotoolkit/openvino.genai#4190, B38: a rejection handled one iteration off).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _accept_mask(xs, qs, ps, rng)
    n = next((i for i, a in enumerate(acc) if not a), gamma - 1)  # BUG: no rejection means n = gamma
    return xs[:n] + [_final(xs, qs, ps, n, rng)]


def output_buffer_padded_with_zero_not_placeholder(prefix, draft, target, gamma, rng):
    """The round writes into a [gamma + 1] output buffer initialised with zeros, then returns the
    entries that are not the placeholder -1: after a rejection at n the round emits
    xs[:n] + [replacement] + [0] * (gamma - n), the unused slots as id 0.

    vllm-project/vllm#46899 and flashinfer-ai/flashinfer#879 (B19): the -1 placeholder convention
    of batched samplers' outputs, here with the buffer filled with the wrong sentinel.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = np.zeros(gamma + 1, dtype=np.int64)  # BUG: should be np.full(gamma + 1, -1)
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out[i] = x
            continue
        out[i] = sample_or(residual(ps[i], qs[i]), ps[i], rng)
        break
    else:
        out[gamma] = sample(ps[gamma], rng)
    return [int(t) for t in out[out != -1]]


def emitted_slice_includes_last_committed_token(prefix, draft, target, gamma, rng):
    """The verify input is laid out as [last committed token] + drafts (slot 0 is the token the
    pass starts from) and the round emits ``seq[:n]`` plus the final token, where the drafts are
    ``seq[1:n + 1]``: after n >= 1 kept drafts it emits the last committed token again,
    x_0 .. x_{n-2}, then the replacement (or the bonus). Right when n = 0.

    ohdearquant/lattice#243 / #258 (B36: the verify loop shifted by one against the layout that
    starts with the last committed token).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    seq = [int(prefix[-1])] + xs
    n = 0
    while n < gamma and rng.random() < min(1.0, ps[n][xs[n]] / qs[n][xs[n]]):
        n += 1
    return seq[:n] + [_final(xs, qs, ps, n, rng)]  # BUG: the kept drafts are seq[1:n + 1]


def leading_accepts_via_cumsum_arange_off_by_one(prefix, draft, target, gamma, rng):
    """The number of leading acceptances is computed as ``(cumsum(acc) == arange(gamma)).sum()``
    instead of ``arange(1, gamma + 1)``: after a full acceptance it counts 0 (the round emits a
    draw from (p_0 - q_0)+ alone); when the first draft is rejected it counts 1 plus the run of
    acceptances after it (so the rejected x_0 is emitted); otherwise it counts the positions whose
    prefix holds exactly one rejection. The round emits xs[:n] and the token from row n.

    Written for the study: an off-by-one ``torch.arange(k)`` in a vectorised accepted-length
    computation.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _accept_mask(xs, qs, ps, rng)
    n = int((np.cumsum(acc) == np.arange(gamma)).sum())  # BUG: np.arange(1, gamma + 1)
    return xs[:n] + [_final(xs, qs, ps, n, rng)]
