"""Round steps that take raw logits and the request's settings (``--logits``) and apply them
differently on the target side than the request's law (the library's pipeline) does."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, probs, residual, sample, sample_or

from specverify.dists import process_logits, softmax


def _draft(prefix, draft, gamma, rng, settings):
    """gamma drafts, each from the draft's processed row: (tokens, rows)."""
    xs, qs = [], []
    for _ in range(gamma):
        h = list(prefix) + xs
        q = probs(draft(h), settings, h)
        xs.append(sample(q, rng))
        qs.append(q)
    return xs, qs


def _verify(xs, qs, ps, rng):
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


def _penalised_tempered(logits, settings, history):
    """The request's pipeline up to temperature (bias, penalties, temperature), no truncation."""
    s = dataclasses.replace(settings, top_k=0, top_p=1.0, min_p=0.0)
    v = len(logits)
    return process_logits(
        logits,
        s,
        seen_counts=counts(history, v),
        output_counts=counts(list(history)[settings.prompt_len :], v),
    )


def _filters(x, settings, *, top_k=0, top_p=1.0, min_p=0.0):
    """The truncations alone (top-k, top-p, min-p) on already penalised, tempered logits."""
    s = dataclasses.replace(
        settings,
        temperature=1.0,
        logit_bias=(),
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
    )
    return process_logits(x, s)


def ratio_from_unnormalised_logits(prefix, draft, target, gamma, rng, settings):
    """The test runs in log space on the processed logits (bias, penalties, temperature and
    truncations applied, no log-softmax): log u < z_p(x) - z_q(x), i.e. acceptance
    min(1, (p(x) / q(x)) * (Z_p / Z_q)) with Z = sum exp(z) of each row, instead of
    min(1, p(x) / q(x)). Drafts, residual and bonus use the processed probabilities.

    Written for the study: log-softmax dropped from a log-space test because "softmax is
    shift-invariant" (it is not, for a difference of two rows' logits); next to
    huggingface/transformers#47932 (B04: logits in place of the distribution) and
    vllm-project/vllm PR #46665.
    """
    xs, qs = _draft(prefix, draft, gamma, rng, settings)
    prefix = list(prefix)
    rows = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [probs(rows[j], settings, prefix + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        h = prefix + xs[:i]
        v = rows.shape[1]
        z_p = process_logits(
            rows[i], settings, seen_counts=counts(h, v), output_counts=counts(h[settings.prompt_len :], v)
        )
        z_q = process_logits(
            draft(h), settings, seen_counts=counts(h, v), output_counts=counts(h[settings.prompt_len :], v)
        )
        with np.errstate(invalid="ignore"):
            log_ratio = z_p[x] - z_q[x]  # BUG: log_softmax(z_p)[x] - log_softmax(z_q)[x]
        if np.log(rng.random()) < log_ratio:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def target_top_k_threshold_over_block(prefix, draft, target, gamma, rng, settings):
    """The verifier applies top-k to the whole [gamma + 1, V] block of tempered target logits at
    once, with the k-th largest value taken over the flattened block instead of per row (each
    row keeps at least its own maximum); top-p and min-p follow per row. The draft uses the
    library's pipeline.

    Written for the study: the reduction axis of a batched top-k (a kth value without axis=-1),
    next to sgl-project/sglang#36173 (B23: the verifier's truncation differed from the sampler's).
    """
    if settings.is_greedy or not settings.top_k:
        return _chain_library(prefix, draft, target, gamma, rng, settings)
    xs, qs = _draft(prefix, draft, gamma, rng, settings)
    prefix = list(prefix)
    rows = np.asarray(target(prefix, xs), dtype=np.float64)
    z = np.stack([_penalised_tempered(rows[j], settings, prefix + xs[:j]) for j in range(gamma + 1)])
    k = settings.top_k
    kth = np.sort(z, axis=None)[-k]  # BUG: np.sort(z, axis=-1)[:, -k:-k + 1], per row
    keep = (z >= kth) | (z == z.max(axis=-1, keepdims=True))
    z = np.where(keep, z, -np.inf)
    ps = [softmax(_filters(z[j], settings, top_p=settings.top_p, min_p=settings.min_p)) for j in range(gamma + 1)]
    return _verify(xs, qs, ps, rng)


def _chain_library(prefix, draft, target, gamma, rng, settings):
    """The exact round, every row through the library's pipeline."""
    xs, qs = _draft(prefix, draft, gamma, rng, settings)
    prefix = list(prefix)
    rows = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [probs(rows[j], settings, prefix + xs[:j]) for j in range(gamma + 1)]
    return _verify(xs, qs, ps, rng)


def target_top_p_unsorted_with_gather(prefix, draft, target, gamma, rng, settings):
    """The verifier's top-p sorts each tempered, top-k'd target row in descending order, masks
    the tail past mass top_p in sorted order, and maps the row back with ``sorted[order]`` (a
    gather) instead of scattering it to ``order`` (``out[order] = sorted``): id v receives the
    value of id order[order[v]], so with top-p on the target's law is a permutation of the
    truncated row. The draft uses the library's pipeline; min-p follows.

    Written for the study from sort-based top-p (vLLM's apply_top_k_top_p scatters the sorted
    logits back; gather for scatter is the classic slip), next to sgl-project/sglang#36173 (B23).
    """
    if settings.is_greedy or settings.top_p >= 1.0:
        return _chain_library(prefix, draft, target, gamma, rng, settings)
    xs, qs = _draft(prefix, draft, gamma, rng, settings)
    prefix = list(prefix)
    rows = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = []
    for j in range(gamma + 1):
        z = _filters(_penalised_tempered(rows[j], settings, prefix + xs[:j]), settings, top_k=settings.top_k)
        order = np.argsort(-z, kind="stable")
        z_sorted = z[order]
        w = softmax(z_sorted)
        z_sorted = np.where(np.cumsum(w) - w < settings.top_p, z_sorted, -np.inf)
        z = z_sorted[order]  # BUG: a scatter, z[order] = z_sorted
        ps.append(softmax(_filters(z, settings, min_p=settings.min_p)))
    return _verify(xs, qs, ps, rng)


def target_repetition_penalty_masks_unseen_tokens(prefix, draft, target, gamma, rng, settings):
    """The verifier's repetition penalty selects the tokens to penalise with ``counts >= 0``
    instead of ``counts > 0``: every logit of the target rows is penalised (divided by the
    penalty when positive, multiplied when negative), not only those of tokens seen in the
    prompt or output. Everything else follows the library's pipeline; the draft uses it whole.

    Written for the study: a wrong comparison in a hand-written penalty on the verify path, next
    to sgl-project/sglang#21258 (B24: the repetition penalty lost on a speculative path).
    """
    if settings.is_greedy or settings.repetition_penalty == 1.0:
        return _chain_library(prefix, draft, target, gamma, rng, settings)
    xs, qs = _draft(prefix, draft, gamma, rng, settings)
    prefix = list(prefix)
    rows = np.asarray(target(prefix, xs), dtype=np.float64)
    r = settings.repetition_penalty
    no_rep = dataclasses.replace(settings, repetition_penalty=1.0)
    ps = []
    for j in range(gamma + 1):
        h = prefix + xs[:j]
        x = rows[j] + (0.0 if settings.bias_vector(len(rows[j])) is None else settings.bias_vector(len(rows[j])))
        seen = counts(h, len(x)) >= 0  # BUG: > 0
        x = np.where(seen, np.where(x < 0, x * r, x / r), x)
        s = dataclasses.replace(no_rep, logit_bias=())
        ps.append(probs(x, s, h))
    return _verify(xs, qs, ps, rng)
