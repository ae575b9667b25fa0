"""Round steps whose bonus token (after every draft was kept) is not drawn from p_gamma."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def bonus_from_stale_loop_variable(prefix, draft, target, gamma, rng):
    """The verify loop binds ``p, q = ps[i], qs[i]`` and the bonus after the loop is sampled from
    ``p``, the loop's last binding, p_{gamma-1} = p(. | prefix + xs[:-1]), instead of ps[gamma];
    acceptance and replacement are standard.

    Written for the study: a Python loop variable read after the loop (the bonus-row class of
    vllm-project/vllm#42744, B11, and huggingface/transformers#30042, B05).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    p = None
    for i, x in enumerate(xs):
        p, q = ps[i], qs[i]
        if rng.random() < min(1.0, p[x] / q[x]):
            out.append(x)
            continue
        out.append(sample_or(residual(p, q), p, rng))
        return out
    out.append(sample(p, rng))  # BUG: ps[gamma]
    return out


def bonus_read_at_padded_block_end(prefix, draft, target, gamma, rng, threshold=0.4):
    """The drafter stops at its first draft with q(x) < 0.4 (keeping it, which is exact), and the
    short block of k drafts is padded with id 0 to the static length gamma before the
    verification pass. The k drafts are verified on the right rows, but the bonus is read at row
    gamma of the padded pass, p(. | prefix + xs + [0] * (gamma - k)), instead of row k.

    Written for the study from static-shape verification (padded blocks for CUDA graphs; the
    padding rows of HabanaAI/vllm-fork#1780, B41, and the placeholders of vllm-project/vllm#46899).
    """
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        x = sample(q, rng)
        xs.append(x)
        qs.append(q)
        if q[x] < threshold:
            break
    k = len(xs)
    ps = target_rows(prefix, target, xs + [0] * (gamma - k))
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))  # BUG: the bonus row of a block of k drafts is ps[k]
    return out


def _generation_defaults(p, top_k=20, top_p=0.8):
    """Top-k then top-p on a probability row (the model's generation_config defaults)."""
    w = np.asarray(p, dtype=np.float64).copy()
    order = np.argsort(-w, kind="stable")
    w[order[top_k:]] = 0.0
    w = w / w.sum()
    srt = w[order]
    keep = np.cumsum(srt) - srt < top_p
    w[order[~keep]] = 0.0
    return w


def bonus_sampler_uses_model_generation_defaults(prefix, draft, target, gamma, rng):
    """The bonus is drawn by the engine's regular sampler, which falls back to the model's
    generation_config defaults (top_k = 20, top_p = 0.8, Qwen2.5's) when the request leaves them
    unset: the bonus comes from p_gamma truncated to its top 20 ids, then to the smallest prefix of
    mass >= 0.8, renormalised. Verified positions use the rows as given.

    vllm-project/vllm#42744 (B11: settings applied at the bonus position only) and
    google-ai-edge/LiteRT-LM#3017 (B42: the speculative path not using the request's parameters).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(_generation_defaults(ps[gamma]), rng))  # BUG: the request's row is ps[gamma] as is
    return out
