"""Round steps whose acceptance test is not u < min(1, p(x)/q(x)) on the drafted token."""

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


def coin_fixed_at_zero(prefix, draft, target, gamma, rng):
    """The acceptance uniform is the constant 0.0 and the test is inclusive (u <= p/q), so every
    draft is accepted, even one the target gives probability 0.

    vllm-project/vllm-ascend#13470 / #13730 (B10): u hard-coded to 0.0 on NPU (no tl_rand64), so
    every draft was accepted and the reported acceptance was 1.0.
    """

    def accept(ps, qs, xs, i, rng):
        u = 0.0  # BUG: no random number on this backend
        return u <= ps[i][xs[i]] / qs[i][xs[i]]

    return _with_test(prefix, draft, target, gamma, rng, accept)


def constant_threshold_half(prefix, draft, target, gamma, rng):
    """A draft is accepted deterministically iff p(x)/q(x) >= 0.5: the threshold is a constant
    instead of a uniform.

    NVIDIA/TensorRT-LLM externalDraftTokensKernels (engines notes, Table A): the acceptance
    threshold is a curand uniform or a constant (constantThreshold mode); the constant mode left on.
    """

    def accept(ps, qs, xs, i, rng):
        return ps[i][xs[i]] / qs[i][xs[i]] >= 0.5  # BUG: constant threshold

    return _with_test(prefix, draft, target, gamma, rng, accept)


def confident_draft_fast_path(prefix, draft, target, gamma, rng):
    """A draft the draft model is confident about (q(x) >= 0.4) is accepted without its test; the
    others take the standard test.

    Written for the study from transformers' assistant_confidence_threshold (0.4 by default; engines
    notes, section 2), which only stops drafting and is exact there; here it is misread as "a
    confident draft needs no verification".
    """

    def accept(ps, qs, xs, i, rng):
        x = xs[i]
        if qs[i][x] >= 0.4:  # BUG: confidence of the draft is not a test against the target
            return True
        return rng.random() < min(1.0, ps[i][x] / qs[i][x])

    return _with_test(prefix, draft, target, gamma, rng, accept)


def block_ratio_for_every_draft(prefix, draft, target, gamma, rng):
    """Every draft is tested against min(1, prod_j p_j(x_j)/q_j(x_j)), the likelihood ratio of the
    whole draft block computed up front, instead of its own ratio.

    Written for the study: block verification's sequence-level ratio (Sun et al.; the block and
    token-wise rules mixed as in vllm-project/vllm-ascend#7807) used as each token's acceptance.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    block = float(np.prod([ps[i][x] / qs[i][x] for i, x in enumerate(xs)]))  # BUG: the block's ratio
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, block):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def barker_acceptance(prefix, draft, target, gamma, rng):
    """A draft is accepted with probability p(x) / (p(x) + q(x)), Barker's MCMC acceptance,
    instead of min(1, p(x)/q(x)).

    Written for the study: speculative sampling is often explained as Metropolis-Hastings, and
    Barker's rule is the other textbook MH acceptance; both are valid MCMC moves, only the
    Metropolis form gives the exact one-step law here.
    """

    def accept(ps, qs, xs, i, rng):
        p, q = ps[i][xs[i]], qs[i][xs[i]]
        return rng.random() < p / (p + q)  # BUG: Barker instead of Metropolis

    return _with_test(prefix, draft, target, gamma, rng, accept)


def ratio_at_draft_top_token(prefix, draft, target, gamma, rng):
    """The ratio is evaluated at the draft row's most likely token, not at the drafted token:
    accept with probability min(1, p(t)/q(t)), t = argmax q.

    ggml-org/llama.cpp examples/speculative (B32, code reading): the check reads
    ``cur_p->data[0]``, the top candidate, while the drafted token may be another one.
    """

    def accept(ps, qs, xs, i, rng):
        t = int(np.argmax(qs[i]))  # BUG: the top candidate, not xs[i]
        return rng.random() < min(1.0, ps[i][t] / qs[i][t])

    return _with_test(prefix, draft, target, gamma, rng, accept)


def ratio_reads_previous_token(prefix, draft, target, gamma, rng):
    """Draft i's ratio reads the probabilities of the previous draft token x_{i-1} (at the right
    rows); the first draft uses its own token.

    Written for the study: the token gather uses the verify pass's *input* ids (the last committed
    token followed by the drafts, one position behind the outputs) instead of the draft ids; for
    the first position the two happen to be set to the same token by a special case.
    """

    def accept(ps, qs, xs, i, rng):
        t = xs[i - 1] if i > 0 else xs[0]  # BUG: input ids are one position behind
        with np.errstate(divide="ignore", invalid="ignore"):
            r = ps[i][t] / qs[i][t]
        return rng.random() < min(1.0, float(np.nan_to_num(r, nan=0.0, posinf=1.0)))

    return _with_test(prefix, draft, target, gamma, rng, accept)


def onehot_rule_threshold_half(prefix, draft, target, gamma, rng):
    """The target-only (one-hot) rule with an acceptance threshold below 1: a draft is accepted
    with probability min(1, p(x)/0.5), and a rejection draws from p with x removed.

    sgl-project/sglang's tree_speculative_sampling_target_only (engines notes, Table A): accept when
    coin <= p / threshold_acc; exact only at threshold_acc = 1.0 (--speculative-accept-threshold-acc
    set to 0.5).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / 0.5):  # BUG: threshold_acc = 0.5
            out.append(x)
            continue
        w = np.array(ps[i])
        w[x] = 0.0
        out.append(sample_or(w, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def relaxed_top3_acceptance(prefix, draft, target, gamma, rng):
    """A draft is accepted deterministically when it is among the target's 3 most likely tokens and
    log p(x) >= log max p - 0.6; at the first refusal a token is drawn from p.

    NVIDIA/TensorRT-LLM use_relaxed_acceptance_for_thinking with relaxed_topk = 3 and
    relaxed_delta = 0.6 (engines notes, Table A: a lossy MTP knob), switched on outside thinking.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p = ps[i]
        top3 = np.argsort(-p, kind="stable")[:3]
        with np.errstate(divide="ignore"):
            close = np.log(p[x]) >= np.log(p.max()) - 0.6
        if x in top3 and close:  # BUG: relaxed, deterministic acceptance
            out.append(x)
            continue
        out.append(sample(p, rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
