"""Round steps whose acceptance test is not u < min(1, p_i(x_i) / q_i(x_i))."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _with_test(prefix, draft, target, gamma, rng, accept):
    """The standard round with ``accept(ps, qs, xs, i, rng) -> bool`` as the test of draft i; the
    replacement is (p - q)+ and the bonus comes from row gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if accept(ps, qs, xs, i, rng):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def ratio_hoisted_out_of_loop(prefix, draft, target, gamma, rng):
    """The acceptance probability min(1, p_0(x_0) / q_0(x_0)) of the first draft is computed once,
    before the loop, and every draft is accepted with it (a fresh uniform each); the replacement
    and bonus use the right rows.

    Written for the study: a vectorised ratio ``r = p[0, x[0]] / q[0, x[0]]`` hoisted out of the
    loop as a loop-invariant (the index was meant to be ``[i, x[i]]``); harmless at gamma = 1.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    a = min(1.0, ps[0][xs[0]] / qs[0][xs[0]])  # BUG: position 0's ratio for every position
    out = []
    for i, x in enumerate(xs):
        if rng.random() < a:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def exponential_threshold_flipped(prefix, draft, target, gamma, rng):
    """The test is moved to log space with an exponential variable E = -log u and written
    E < log(p(x) / q(x)); the exact form is E > log(q(x) / p(x)). A draft is then accepted with
    probability 1 - q(x) / p(x) when p(x) > q(x), and never otherwise.

    Written for the study, next to vllm-project/vllm PR #46665 (precision of log(1 - ratio) in the
    sampler's log-space arithmetic): a sign lost when the comparison moved to log space.
    """

    def accept(ps, qs, xs, i, rng):
        e = rng.exponential()
        with np.errstate(divide="ignore"):
            return e < np.log(ps[i][xs[i]]) - np.log(qs[i][xs[i]])  # BUG: should be e > log(q / p)

    return _with_test(prefix, draft, target, gamma, rng, accept)


def strict_match_against_target_argmax(prefix, draft, target, gamma, rng):
    """The verifier samples its own token t_i ~ p_i at every position (with the request's
    temperature), but the strict acceptance compares the draft with the target's argmax: x_i is
    kept iff x_i == argmax p_i; at the first mismatch t_i is emitted; the bonus is t_gamma.

    sgl-project/sglang#31214 (B22: the verify path silently took the argmax comparison) and
    TensorRT-LLM's strict acceptance (engines notes, Table A), mixed: the greedy match test kept on
    a sampled path whose emitted token is the target's sample.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        t = sample(ps[i], rng)
        if x == int(np.argmax(ps[i])):  # BUG: compared with the argmax, not with t
            out.append(x)
            continue
        out.append(t)
        return out
    out.append(sample(ps[gamma], rng))
    return out


def accept_with_prob_min_p_q(prefix, draft, target, gamma, rng):
    """A draft is accepted with probability min(p(x), q(x)), the overlap of the two laws at the
    drafted token, instead of min(1, p(x) / q(x)); the residual and the bonus are standard.

    Written for the study: the seed article's "the overall acceptance probability is
    beta = sum min(p, q)" read per token, so min(p, q)(x) is taken as the token's acceptance.
    """

    def accept(ps, qs, xs, i, rng):
        x = xs[i]
        return rng.random() < min(ps[i][x], qs[i][x])  # BUG: min(p, q), not min(1, p / q)

    return _with_test(prefix, draft, target, gamma, rng, accept)


def accept_with_row_acceptance_rate(prefix, draft, target, gamma, rng):
    """Every draft is accepted with the position's expected acceptance rate
    beta_i = sum_v min(p_i(v), q_i(v)) = 1 - TV(p_i, q_i), whatever token was drafted; the residual
    and the bonus are standard.

    Written for the study from the acceptance-rate bookkeeping every engine keeps (engines notes,
    Table D: alpha = sum min(p, q)): the row-level rate used as the token's coin.
    """

    def accept(ps, qs, xs, i, rng):
        beta = float(np.minimum(ps[i], qs[i]).sum())
        return rng.random() < beta  # BUG: a rate of the row, not the ratio at x

    return _with_test(prefix, draft, target, gamma, rng, accept)
