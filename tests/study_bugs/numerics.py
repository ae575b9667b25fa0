"""Round steps with numerical shortcuts that change the law."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def smoothed_ratio(prefix, draft, target, gamma, rng, eps=1e-3):
    """Adds an epsilon to numerator and denominator of the ratio: (p + eps) / (q + eps).

    "Avoid 0/0 and huge ratios" (the user's comment): a token the target forbids (p = 0) is now
    accepted with probability eps / (q + eps), large when the draft gave it little mass. Modelled
    on vllm-project/vllm#2336 (B43: an epsilon where the rule needs an exact zero), with an eps of
    the size fp16 code uses (about its machine epsilon, 9.8e-4).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, (ps[i][x] + eps) / (qs[i][x] + eps)):  # BUG: smoothing
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_floor(prefix, draft, target, gamma, rng, floor=1e-3):
    """Clamps the residual at a small positive floor instead of 0 before normalising.

    ``torch.clamp(p - q, min=floor)`` so that the normaliser can never be zero: every token,
    including those the target forbids, gets mass ``floor`` in the replacement. vLLM V0 clamped at
    the smallest positive float (vllm-project/vllm#2336, B43, invisible); this user clamped at
    fp16's epsilon, 1e-3.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample(np.maximum(ps[i] - qs[i], floor), rng))  # BUG: floor instead of 0
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _fp8_e4m3(x):
    """Round finite float64 values to FP8 E4M3 (3 explicit mantissa bits), as an FP8 tensor stores them."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))  # x = m * 2**e, 0.5 <= |m| < 1
    return np.ldexp(np.round(m * 16.0) / 16.0, e)


def draft_sampled_in_fp8(prefix, draft, target, gamma, rng):
    """Samples each draft from FP8-rounded log-probabilities while q stays in float64.

    The drafter is served quantised (FP8 E4M3 outputs) and samples from its own rounded scores; the
    verifier recomputes q in full precision from the float64 copy. Relative errors of up to 1/16 in
    a log-probability become errors of several percent in the law the draft is drawn from.
    deepseek-ai/DeepSpec#31: draft sampled from bf16 logits while the ratio and residual used fp32
    probabilities (there about 1e-3).

    NOT in ``STUDY``: it PASSes at eps 0.1 (with and without ``--full-rule``); the per-row TV of the
    rounded law is about 0.04 and the output deviation smaller still. A bf16 version passed too.
    """
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        with np.errstate(divide="ignore"):
            logq = np.log(q)
        fin = np.isfinite(logq)
        lq = np.where(fin, _fp8_e4m3(np.where(fin, logq, 0.0)), -np.inf)
        w = np.exp(lq - lq.max())
        xs.append(sample(w, rng))  # BUG: drawn from the FP8 law, q is the float64 one
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def ratio_denominator_clamped(prefix, draft, target, gamma, rng, floor=1e-2):
    """Divides by max(q(x), 0.01): small draft probabilities are clamped "for stability".

    The clamp lowers the acceptance of every draft with q(x) < 0.01 while the residual stays
    (p - q)+, so those tokens lose mass. Written for the study: denominator clamps are the usual
    guard against division by zero in hand-written verifiers (vLLM's ``q > 0 and p / q >= u`` is
    the exact form).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / max(qs[i][x], floor)):  # BUG: clamped denominator
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
