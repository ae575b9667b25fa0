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


def comparison_flipped(prefix, draft, target, gamma, rng):
    """The test is written u > min(1, p(x) / q(x)): a draft is accepted with probability
    1 - min(1, p(x) / q(x)), never when p(x) >= q(x); replacement and bonus are standard.

    Written for the study: a flipped comparison operator, next to sgl-project/sglang#35771 (B21:
    the boundary of the acceptance comparison).
    """

    def accept(ps, qs, xs, i, rng):
        return rng.random() > min(1.0, ps[i][xs[i]] / qs[i][xs[i]])  # BUG: accept iff u < ratio

    return _with_test(prefix, draft, target, gamma, rng, accept)


def match_test_with_residual_replacement(prefix, draft, target, gamma, rng):
    """The verifier samples t_i ~ p_i and keeps the draft iff t_i == x_i (strict acceptance:
    probability p_i(x_i)), but on a mismatch emits the probabilistic rule's replacement from
    (p_i - q_i)+ instead of t_i; the bonus comes from p_gamma.

    Modelled on the two verification modes engines ship side by side (TensorRT-LLM's strict
    acceptance and its rejection-sampling path, engines notes Table A; sgl-project/sglang#31214,
    B22: the verify path silently switched modes): the strict test wired to the other mode's
    recovery.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        t = sample(ps[i], rng)
        if t == x:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))  # BUG: the strict rule emits t here
        return out
    out.append(sample(ps[gamma], rng))
    return out


def ratio_reads_draft_cdf_not_pmf(prefix, draft, target, gamma, rng):
    """The drafter samples by inverse CDF and keeps the cumulative row it searched; the verifier
    reads that array as the draft probabilities, so the ratio is p(x) / Q(x) with
    Q(x) = sum_{v <= x} q(v) >= q(x) (accepting too rarely, more so for high ids). The residual
    uses the probability row.

    Written for the study: the cumulative array of the sampler stored where the probabilities were
    expected (the q-provenance class of deepseek-ai/DeepSpec#31, B34, and llama.cpp's
    examples/speculative, B32).
    """
    xs, qs, cdfs = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        c = np.cumsum(q)
        x = int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), len(q) - 1))
        xs.append(x)
        qs.append(q)
        cdfs.append(c)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / cdfs[i][x]):  # BUG: qs[i][x], not the cumulative cdfs[i][x]
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def ratio_gathered_from_sorted_rows(prefix, draft, target, gamma, rng):
    """Both rows are sorted in descending order (the layout a top-k / top-p kernel works in) and
    the ratio is gathered at the token id x instead of at x's rank: draft x is accepted with
    min(1, p_(x) / q_(x)), the (x+1)-th largest probabilities of the two rows (0 / 0 counts as a
    rejection, a positive / 0 as an acceptance). Replacement and bonus are standard.

    Written for the study from llama.cpp's examples/speculative (B32: index-aligned entries of two
    sorted candidate lists) and sort-based truncation kernels (vLLM's apply_top_k_top_p).
    """

    def accept(ps, qs, xs, i, rng):
        p_sorted = np.sort(ps[i])[::-1]
        q_sorted = np.sort(qs[i])[::-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = p_sorted[xs[i]] / q_sorted[xs[i]]  # BUG: x is an id, not a rank in the sorted rows
        return bool(rng.random() < np.minimum(1.0, r))  # (NaN compares False)

    return _with_test(prefix, draft, target, gamma, rng, accept)


def ratio_reads_last_drafted_token(prefix, draft, target, gamma, rng):
    """The verify loop computes each position's ratio at ``token``, the variable the draft loop
    left behind (the last draft, x_{gamma-1}), instead of at its own draft: x_i is accepted with
    min(1, p_i(x_{gamma-1}) / q_i(x_{gamma-1})) (a zero q_i there counts as an acceptance, 0 / 0
    as a rejection); right at the last position. Replacement and bonus are standard.

    Written for the study: a stale loop variable reused across two loops.
    """
    xs, qs = [], []
    token = None
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        token = sample(q, rng)
        xs.append(token)
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = ps[i][token] / qs[i][token]  # BUG: the draft loop's last token, not x
        if rng.random() < np.minimum(1.0, r):  # (NaN compares False)
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
