"""Round steps with numerical shortcuts that change the law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _standard(xs, qs, ps, rng, gamma):
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ps[i][x] / qs[i][x]
        if rng.random() < min(1.0, float(np.nan_to_num(ratio, nan=0.0, posinf=1.0))):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def draft_probs_stored_top8(prefix, draft, target, gamma, rng):
    """Only the 8 largest entries of each draft row are stored for verification (the rest read as
    0), so a draft drawn outside them is accepted outright and the residual is (p - q_top8)+.

    Modelled on EAGLE-style drafters that keep top-k draft probabilities only (sgl-project/sglang
    #10308: the draft's distribution is reduced before verification), with the full row sampled.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    stored = []
    for q in qs:
        keep = np.argsort(-q, kind="stable")[:8]
        s = np.zeros_like(q)
        s[keep] = q[keep]
        stored.append(s)
    return _standard(xs, stored, ps, rng, gamma)


def p_clamped_at_1e2(prefix, draft, target, gamma, rng):
    """The target's probabilities are clamped from below at 1e-2 ("avoid log(0) downstream") and
    used unnormalised in the ratio, the residual and the bonus.

    Written for the study: a probability floor for a later log, the class of vllm-project/vllm#2336
    (B43: a positive floor where the rule needs an exact zero) at a coarse, fp8-sized floor.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = np.maximum(target_rows(prefix, target, xs), 1e-2)
    return _standard(xs, qs, ps, rng, gamma)


def softmax_fixed_shift_float32(prefix, draft, target, gamma, rng):
    """The target's rows are renormalised through a float32 softmax of log-probabilities with a
    fixed shift of -100 (to "avoid overflow") instead of the row's max: exp(log p - 100) lands in
    float32's subnormal range, so every probability is quantised to a few bits and small ones
    become 0.

    Written for the study: a constant shift instead of the row max is a common shortcut when
    logits are known to be bounded; vllm-project/vllm#46665 shows the same float32 precision loss
    in a log-space residual.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    with np.errstate(divide="ignore", under="ignore"):
        e = np.exp(np.log(ps).astype(np.float32) - np.float32(100.0))
    ps32 = (e / e.sum(axis=-1, keepdims=True)).astype(np.float64)
    return _standard(xs, qs, ps32, rng, gamma)
