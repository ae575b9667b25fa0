"""Round steps whose acceptance test is not min(1, p(x) / q(x))."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def _finish(out, ps, gamma, rng):
    out.append(sample(ps[gamma], rng))
    return out


def inverted_ratio(prefix, draft, target, gamma, rng):
    """Accepts with min(1, q(x) / p(x)): the ratio is upside down.

    The user wrote ``draft_p / target_p`` from memory of "the ratio of the two probabilities"; the
    rest of the rule is the standard one. A p(x) = 0 gives an infinite ratio, so the draft is
    accepted. Written for the study: the misremembered-formula class of rtp-llm#1295 (a wrong
    acceptance expression that still looks like a ratio test).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore"):
            ratio = qs[i][x] / ps[i][x]  # BUG: q / p
        if rng.random() < min(1.0, ratio):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, ps, gamma, rng)


def accept_iff_p_ge_q(prefix, draft, target, gamma, rng):
    """Accepts deterministically when p(x) >= q(x) and rejects otherwise.

    No uniform is drawn: the user read "accept with probability min(1, p/q)" as "accept when the
    target likes the token at least as much as the draft". The threshold of TensorRT-LLM's
    ``constantThreshold`` mode (engines notes, externalDraftTokensKernels.cu: accept if
    p/q >= threshold, the threshold a constant instead of a uniform) set to 1.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if ps[i][x] >= qs[i][x]:  # BUG: no coin
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, ps, gamma, rng)


def accept_with_prob_p(prefix, draft, target, gamma, rng):
    """Accepts the draft with probability p(x), but replaces from (p - q)+.

    The user copied the one-hot rule's acceptance (vLLM treats an argmax draft as q = one-hot and
    accepts with p(x), vllm-project/vllm#40149) into a path that has the real q and kept the full
    rule's residual: the two halves belong to different rules.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < ps[i][x]:  # BUG: p(x), not min(1, p(x) / q(x))
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, ps, gamma, rng)


def accept_if_argmax_or_ratio(prefix, draft, target, gamma, rng):
    """Accepts when the draft is the target's argmax OR when the ratio test passes.

    An exact-match fast path OR-ed with the stochastic test: a draft equal to the target's top
    token is kept without its coin. alibaba/rtp-llm#1295: acceptance was
    ``same_token OR (do_sample AND u * P_draft < P_target)``.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        same = x == int(np.argmax(ps[i]))
        if same or rng.random() * qs[i][x] < ps[i][x]:  # BUG: the fast path skips the test
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, ps, gamma, rng)


def typical_acceptance(prefix, draft, target, gamma, rng, epsilon=0.09, delta=0.3):
    """Medusa's typical acceptance: keep x when p(x) > min(epsilon, delta * exp(-H(p))).

    The user adopted Medusa's "typical acceptance" (Cai et al., 2024; vLLM V0's
    TypicalAcceptanceSampler) as a drop-in speed-up, believing it lossless; at the first refusal it
    samples the target's row. Lossy by design (engines notes, section 5: "Medusa typical
    acceptance ... lossy by design").
    """
    xs, _qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p = ps[i]
        nz = p[p > 0]
        entropy = float(-(nz * np.log(nz)).sum())
        if p[x] > min(epsilon, delta * np.exp(-entropy)):  # BUG: a threshold, not a coin
            out.append(x)
            continue
        out.append(sample(p, rng))
        return out
    return _finish(out, ps, gamma, rng)


def log_ratio_without_exp(prefix, draft, target, gamma, rng):
    """Works in log space and forgets the exponential: accepts iff u < log p(x) - log q(x).

    The correct log-space test is ``log(u) < logp - logq``; the user compared the raw uniform
    with the log-ratio, so a draft is accepted only when p(x) > q(x) by a margin (p > e^u q).
    Written for the study: log-space verification is how transformers and vLLM hold their
    scores (``log_softmax``), and mixing a linear uniform with log-probabilities is an easy slip.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore"):
            log_ratio = np.log(ps[i][x]) - np.log(qs[i][x])
        if rng.random() < log_ratio:  # BUG: should be np.log(u) < log_ratio
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return _finish(out, ps, gamma, rng)
