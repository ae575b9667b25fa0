"""Round steps whose acceptance test is not u < min(1, p(x)/q(x))."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _with_test(prefix, draft, target, gamma, rng, accept):
    """The standard round with ``accept(p, q, x, rng) -> bool`` as the test; the replacement is
    (p - q)+ and the bonus comes from row gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if accept(ps[i], qs[i], x, rng):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def ratio_squared(prefix, draft, target, gamma, rng):
    """Drafts are accepted with probability min(1, p(x)/q(x)) ** 2.

    Two independent coins are drawn, both against min(1, p/q), and both must pass: the acceptance
    was split in two when the test was moved into a helper and the old call left in place.
    Written for the study (a duplicated test; the class of alibaba/rtp-llm#1295, where the
    acceptance expression was assembled from two conditions).
    """

    def accept(p, q, x, rng):
        a = min(1.0, p[x] / q[x])
        return rng.random() < a and rng.random() < a

    return _with_test(prefix, draft, target, gamma, rng, accept)


def coin_scaled_by_draft_peak(prefix, draft, target, gamma, rng):
    """Accepts iff u * max(q) <= p(x): the uniform is scaled by the draft's peak probability (a
    rejection-sampling envelope) instead of by q(x), so the acceptance is min(1, p(x)/max q).

    Written for the study: textbook rejection sampling with envelope M * q compares u * M with the
    target density; here the envelope constant was taken over the whole row.
    """

    def accept(p, q, x, rng):
        return rng.random() * q.max() <= p[x]

    return _with_test(prefix, draft, target, gamma, rng, accept)


def accept_iff_target_supports(prefix, draft, target, gamma, rng):
    """A draft is accepted iff the target gives it positive probability (p(x) > 0); no coin.

    The acceptance test was reduced to "the token survives the target's filters", the check a
    constrained-decoding / grammar mask does. Written for the study: vllm-project/vllm#19482's
    discussion of processors on the rejection path makes the mask the only target-side check when
    the probabilistic test is switched off.
    """

    def accept(p, q, x, rng):
        return p[x] > 0.0

    return _with_test(prefix, draft, target, gamma, rng, accept)


def accept_with_prob_q(prefix, draft, target, gamma, rng):
    """A draft is accepted with probability q(x), the draft's own probability of it.

    The variables holding the two rows were swapped in the one-hot rule's test (accept with
    probability p(x)): the target row went to the residual, the draft row to the coin. Written for
    the study from vllm-project/vllm#40149 (the one-hot test) with the operands confused.
    """

    def accept(p, q, x, rng):
        return rng.random() < q[x]

    return _with_test(prefix, draft, target, gamma, rng, accept)


def ratio_of_log_probs(prefix, draft, target, gamma, rng):
    """The ratio is formed from log-probabilities: a draft is accepted with probability
    min(1, log q(x) / log p(x)).

    The verifier holds log_softmax scores and divides them as if they were probabilities; since
    both logs are negative the author put the draft's on top so that a likelier target token gives
    a larger value. Written for the study: mlx-lm#1085 and vLLM keep log-probabilities on this path.
    """

    def accept(p, q, x, rng):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.log(q[x]) / np.log(p[x])
        return bool(rng.random() < min(1.0, a)) if np.isfinite(a) or a > 0 else False

    return _with_test(prefix, draft, target, gamma, rng, accept)


def sqrt_ratio(prefix, draft, target, gamma, rng):
    """Drafts are accepted with probability min(1, sqrt(p(x)/q(x))).

    The ratio is computed as exp(0.5 * (log p - log q)): a factor 0.5 left from a geometric-mean
    helper. Written for the study (a "temperature" on the log-ratio; lossy relaxations of the
    test such as vLLM's typical acceptance are tuned exactly this way).
    """

    def accept(p, q, x, rng):
        return rng.random() < min(1.0, float(np.sqrt(p[x] / q[x])))

    return _with_test(prefix, draft, target, gamma, rng, accept)
