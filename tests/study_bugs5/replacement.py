"""Round steps whose token after a rejection is not drawn from (p - q)+."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _with_replacement(prefix, draft, target, gamma, rng, replace):
    """The standard round with ``replace(ps, qs, xs, i, rng) -> id`` as the token after a rejection
    at position i; acceptance and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(int(replace(ps, qs, xs, i, rng)))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def zero_accepted_falls_back_to_plain_decoding(prefix, draft, target, gamma, rng):
    """When the first draft is rejected the round treats the step as "nothing speculated" and
    samples the token from the target row p_0 (the plain decoding path) instead of from
    (p_0 - q_0)+; rejections at later positions use the residual.

    Written for the study: a no-draft-accepted fast path routed to the regular sampler (the
    regular sampler serves the bonus in vLLM V1, engines notes section 1.3; vllm-project/vllm-ascend
    #16396: mixed-batch rows routed through the wrong path).
    """

    def replace(ps, qs, xs, i, rng):
        if i == 0:
            return sample(ps[0], rng)  # BUG: the first position's replacement is (p_0 - q_0)+ too
        return sample_or(residual(ps[i], qs[i]), ps[i], rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def race_exponential_sign_dropped(prefix, draft, target, gamma, rng):
    """The replacement is argmax_v w(v) / E_v with w = (p - q)+ (the exponential race), but the
    noise is E = log(u) instead of -log(u): every E_v is negative, so the ids with w = 0 score 0
    and beat every id of the residual's support (the lowest such id wins); only when w > 0
    everywhere does the race pick among the support, by the smallest w(v) / |log u_v|.

    vLLM V1's recovered-token sampling argmax(prob / E), E ~ Exp(1) (engines notes, section 1.4),
    with the minus sign of E = -log(u) lost.
    """

    def replace(ps, qs, xs, i, rng):
        w = residual(ps[i], qs[i])
        e = np.log(rng.random(len(w)))  # BUG: E = -log(u)
        with np.errstate(divide="ignore", invalid="ignore"):
            return int(np.argmax(w / e))

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_subtracts_scalar_q_of_draft(prefix, draft, target, gamma, rng):
    """The residual is written ``maximum(p - q[x], 0)``: the rejected draft's probability q(x), a
    scalar, is subtracted from every entry of p, so the replacement is drawn from
    (p(v) - q(x))+ normalised (p when that is empty) instead of (p(v) - q(v))+.

    Written for the study: an index left on the draft row (q[x] for q), which broadcasting
    accepts silently; the residual line of transformers' _speculative_sampling, clamp(p - q, 0).
    """

    def replace(ps, qs, xs, i, rng):
        w = np.maximum(ps[i] - qs[i][xs[i]], 0.0)  # BUG: qs[i], the whole row
        return sample_or(w, ps[i], rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_sampled_over_flattened_block(prefix, draft, target, gamma, rng):
    """The residuals of the whole block, R = (P[:gamma] - Q)+ of shape [gamma, V], are computed at
    once and the replacement is drawn from the flattened R and reduced modulo V, instead of from
    row i: the token after a rejection at i follows the mixture sum_j (p_j - q_j)+ / sum_j R_j over
    every position of the block (later ones included), not (p_i - q_i)+.

    Written for the study: a batched residual sampled over the wrong extent (the row of the
    rejected position never selected), next to the vectorised recovered-token kernels of vLLM V1
    (engines notes, section 1.4).
    """

    def replace(ps, qs, xs, i, rng):
        r = np.maximum(ps[: len(xs)] - np.stack(qs), 0.0)  # [gamma, V]
        if r.sum() <= 0:
            return sample(ps[i], rng)
        return sample(r.ravel(), rng) % r.shape[1]  # BUG: sample_or(r[i], ps[i], rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_support_mask_passed_as_weights(prefix, draft, target, gamma, rng):
    """The replacement sampler is handed ``residual > 0``, the support mask computed for the
    empty-residual check, instead of the residual: the replacement is uniform over the ids with
    p(v) > q(v) (drawn from p when there is none) instead of proportional to (p - q)+.

    Written for the study: a boolean mask passed where weights are expected (sampling helpers
    that normalise their input accept it silently).
    """

    def replace(ps, qs, xs, i, rng):
        w = residual(ps[i], qs[i])
        support = w > 0
        if not support.any():
            return sample(ps[i], rng)
        return sample(support, rng)  # BUG: sample(w, rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)
