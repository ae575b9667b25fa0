"""Round steps whose replacement (the token emitted at the first rejection) has the wrong law."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def _round(prefix, draft, target, gamma, rng, replace):
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(replace(ps[i], qs[i], x))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def replacement_from_p(prefix, draft, target, gamma, rng):
    """At a rejection, resamples from the target's row p instead of (p - q)+.

    "The target decides, so sample the target": the common simplification that double counts the
    tokens the draft already had the chance to propose. The residual skipped in the same way is
    the root of vllm-ascend#7807 (block verification with an unadjusted residual).
    """
    return _round(prefix, draft, target, gamma, rng, lambda p, q, x: sample(p, rng))


def replacement_from_q_minus_p(prefix, draft, target, gamma, rng):
    """Residual with the operands swapped: (q - p)+ instead of (p - q)+.

    The user wrote ``clamp(draft - target, min=0)``, the mass "the draft over-proposed", which is
    exactly the part the replacement must avoid. Falls back to p when that is empty. Written for
    the study: the swapped-operand version of TensorRT-LLM's ``clamp(p - q)`` residual (engines
    notes, TensorRT-LLM kernel).
    """
    return _round(prefix, draft, target, gamma, rng, lambda p, q, x: sample_or(np.maximum(q - p, 0.0), p, rng))


def replacement_log_space_subtraction(prefix, draft, target, gamma, rng):
    """Forms the residual in log space: softmax(log p - log q), i.e. p / q renormalised.

    The user kept every row as log-probabilities and translated "p minus q" into a subtraction of
    logs, which is a division. Tokens with q = 0 get infinite weight, so they are excluded (log p -
    log q is +inf there) by a finite mask. Written for the study: the log-space slip of code that
    holds ``log_softmax`` scores (transformers, vLLM's logprobs path).
    """

    def replace(p, q, x):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.log(p) - np.log(q)  # BUG: a ratio, not a difference of probabilities
        z = np.where(np.isfinite(z), z, -np.inf)
        if not np.isfinite(z).any():
            return sample(p, rng)
        w = np.exp(z - z[np.isfinite(z)].max())
        return sample(w, rng)

    return _round(prefix, draft, target, gamma, rng, replace)


def replacement_onehot_residual(prefix, draft, target, gamma, rng):
    """Accepts with min(1, p/q) but replaces from p with the rejected draft zeroed.

    The residual of vLLM's one-hot path (no draft probabilities: "recover from p with x zeroed",
    engines notes 1.4, vllm-project/vllm#40149) combined with the full rule's acceptance: each
    half is exact in its own rule, not together.
    """

    def replace(p, q, x):
        w = np.array(p, dtype=np.float64)
        w[x] = 0.0
        return sample_or(w, p, rng)

    return _round(prefix, draft, target, gamma, rng, replace)


def replacement_unnormalised_inverse_cdf(prefix, draft, target, gamma, rng):
    """Draws the replacement by inverse CDF on the residual without dividing by its sum.

    The article's ``sample(d, u)`` walks the cumulative sum until it exceeds u and returns the last
    id when it never does; the article normalises the residual first (``r / z``), this user did
    not, so with probability 1 - z the walk falls through to the last id. Modelled on the seed
    article's code and on vllm GHSA-8wr5-jm2h-8r4f / vllm#44744 (a recovered token decided by
    the tail of the vocabulary).
    """

    def replace(p, q, x):
        r = residual(p, q)  # BUG: not divided by r.sum()
        c = np.cumsum(r)
        u = rng.random()
        j = int(np.searchsorted(c, u, side="right"))
        return min(j, len(r) - 1)

    return _round(prefix, draft, target, gamma, rng, replace)
