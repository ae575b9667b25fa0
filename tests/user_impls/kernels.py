"""Batched verification kernels: ``kernel(draft_tokens, draft_probs, target_probs, generator)``.

draft_tokens int64 [B, g], draft_probs float64 [B, g, V], target_probs float64 [B, g + 1, V];
returns int64 [B, g + 1]: the accepted drafts, then one replacement or bonus token, then -1.
"""

import numpy as np


def _first_rejection(acc):
    """Index of the first rejected draft per row, g when every draft is accepted."""
    g = acc.shape[1]
    return np.where(acc.all(axis=1), g, np.argmin(acc, axis=1))


def _sample_rows(w, generator):
    c = np.cumsum(w, axis=1)
    u = generator.random(len(w))[:, None] * c[:, -1:]
    return np.minimum((c <= u).sum(axis=1), w.shape[1] - 1)


def _emit(draft_tokens, n, last):
    B, g = draft_tokens.shape
    out = np.full((B, g + 1), -1, dtype=np.int64)
    keep = np.arange(g)[None, :] < n[:, None]
    out[:, :g] = np.where(keep, draft_tokens, -1)
    out[np.arange(B), n] = last
    return out


def kernel_vectorised(draft_tokens, draft_probs, target_probs, generator):
    """Correct: fully vectorised numpy rejection sampler (residual, all-zero fallback to p, bonus from row g)."""
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    p_x = target_probs[b, j, draft_tokens]
    q_x = draft_probs[b, j, draft_tokens]
    n = _first_rejection(generator.random((B, g)) < p_x / q_x)
    rows = np.arange(B)
    p_n = target_probs[rows, n]
    q_n = np.where((n < g)[:, None], draft_probs[rows, np.minimum(n, g - 1)], 0.0)
    w = np.maximum(p_n - q_n, 0.0)
    empty = w.sum(axis=1) <= 0
    w[empty] = p_n[empty]
    return _emit(draft_tokens, n, _sample_rows(w, generator))


def kernel_loop(draft_tokens, draft_probs, target_probs, generator):
    """Correct: a per-row Python loop with its own inverse CDF."""
    B, g = draft_tokens.shape
    out = np.full((B, g + 1), -1, dtype=np.int64)
    for i in range(B):
        for j in range(g + 1):
            p = target_probs[i, j]
            if j == g:
                w = p
            else:
                x = draft_tokens[i, j]
                q = draft_probs[i, j]
                if generator.random() < p[x] / q[x]:
                    out[i, j] = x
                    continue
                w = np.maximum(p - q, 0)
                if w.sum() <= 0:
                    w = p
            c = np.cumsum(w)
            out[i, j] = min(int(np.searchsorted(c, generator.random() * c[-1], side="right")), len(w) - 1)
            break
    return out


def kernel_bonus_wrong_row(draft_tokens, draft_probs, target_probs, generator):
    """Bug: the bonus (all drafts accepted) is drawn from target row g - 1 instead of row g."""
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    acc = generator.random((B, g)) < target_probs[b, j, draft_tokens] / draft_probs[b, j, draft_tokens]
    n = _first_rejection(acc)
    rows, k = np.arange(B), np.minimum(n, g - 1)
    p_n = target_probs[rows, k]  # bug: row g - 1 for the bonus
    w = np.where((n < g)[:, None], np.maximum(p_n - draft_probs[rows, k], 0.0), p_n)
    empty = w.sum(axis=1) <= 0
    w[empty] = p_n[empty]
    return _emit(draft_tokens, n, _sample_rows(w, generator))


def kernel_residual_from_p(draft_tokens, draft_probs, target_probs, generator):
    """Bug: the replacement after a rejection is drawn from p instead of (p - q)+."""
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    acc = generator.random((B, g)) < target_probs[b, j, draft_tokens] / draft_probs[b, j, draft_tokens]
    n = _first_rejection(acc)
    return _emit(draft_tokens, n, _sample_rows(target_probs[np.arange(B), n], generator))


def kernel_shared_uniform(draft_tokens, draft_probs, target_probs, generator):
    """Bug: one acceptance uniform per row, shared by every position of the round."""
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    u = generator.random((B, 1))  # broadcast over positions
    n = _first_rejection(u < target_probs[b, j, draft_tokens] / draft_probs[b, j, draft_tokens])
    rows = np.arange(B)
    p_n = target_probs[rows, n]
    q_n = np.where((n < g)[:, None], draft_probs[rows, np.minimum(n, g - 1)], 0.0)
    w = np.maximum(p_n - q_n, 0.0)
    empty = w.sum(axis=1) <= 0
    w[empty] = p_n[empty]
    return _emit(draft_tokens, n, _sample_rows(w, generator))


def kernel_unnormalised_residual(draft_tokens, draft_probs, target_probs, generator):
    """Bug: samples the replacement from the unnormalised residual with a uniform on [0, 1) (no scaling by its
    mass), so the missing mass goes to the last id.
    """
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    acc = generator.random((B, g)) < target_probs[b, j, draft_tokens] / draft_probs[b, j, draft_tokens]
    n = _first_rejection(acc)
    rows = np.arange(B)
    p_n = target_probs[rows, n]
    q_n = np.where((n < g)[:, None], draft_probs[rows, np.minimum(n, g - 1)], 0.0)
    c = np.cumsum(np.maximum(p_n - q_n, 0.0), axis=1)
    last = np.minimum((c <= generator.random(B)[:, None]).sum(axis=1), c.shape[1] - 1)
    return _emit(draft_tokens, n, last)


def kernel_float16(draft_tokens, draft_probs, target_probs, generator):
    """Bug (tiny): casts the probabilities to float16 "to save memory"; ratio, residual and CDF are computed in
    half precision (TV ~ 1e-3).
    """
    B, g = draft_tokens.shape
    P, Q = target_probs.astype(np.float16), draft_probs.astype(np.float16)
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = P[b, j, draft_tokens] / Q[b, j, draft_tokens]
    n = _first_rejection(generator.random((B, g)).astype(np.float16) < ratio)
    rows = np.arange(B)
    p_n = P[rows, n]
    q_n = np.where((n < g)[:, None], Q[rows, np.minimum(n, g - 1)], np.float16(0))
    w = np.maximum(p_n - q_n, np.float16(0))
    empty = w.sum(axis=1, dtype=np.float16) <= 0
    w[empty] = p_n[empty]
    c = np.cumsum(w, axis=1, dtype=np.float16)
    u = (generator.random(B).astype(np.float16) * c[:, -1])[:, None]
    return _emit(draft_tokens, n, np.minimum((c <= u).sum(axis=1), w.shape[1] - 1))


def kernel_padded_tile(draft_tokens, draft_probs, target_probs, generator):
    """Bug (vllm-project/vllm#44744, a security advisory): the recovered token is sampled over the
    vocabulary padded to the kernel's tile of 64, and the padding holds stale values instead of
    zeros, so an id >= V comes back when V is not a multiple of 64 (exact when it is)."""
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    n = _first_rejection(generator.random((B, g)) < target_probs[b, j, draft_tokens] / draft_probs[b, j, draft_tokens])
    rows = np.arange(B)
    p_n = target_probs[rows, n]
    q_n = np.where((n < g)[:, None], draft_probs[rows, np.minimum(n, g - 1)], 0.0)
    w = np.maximum(p_n - q_n, 0.0)
    w[w.sum(axis=1) <= 0] = p_n[w.sum(axis=1) <= 0]
    v = w.shape[1]
    tile = -(-v // 64) * 64
    stale = np.where((n < g)[:, None], 1e-3, 0.0)  # the padding is read on the residual path only
    padded = np.concatenate([w, np.broadcast_to(stale, (B, tile - v))], axis=1)
    return _emit(draft_tokens, n, _sample_rows(padded, generator))


def kernel_zero_id_as_padding(draft_tokens, draft_probs, target_probs, generator):
    """Bug (a value-dependent shortcut: id 0 doubles as the padding id of the draft buffer): a
    drafted id 0 is taken for padding and rejected without a test, so id 0 is under-sampled wherever
    the draft proposes it."""
    B, g = draft_tokens.shape
    b, j = np.arange(B)[:, None], np.arange(g)[None, :]
    ratio = target_probs[b, j, draft_tokens] / draft_probs[b, j, draft_tokens]
    n = _first_rejection((generator.random((B, g)) < ratio) & (draft_tokens != 0))
    rows = np.arange(B)
    p_n = target_probs[rows, n]
    q_n = np.where((n < g)[:, None], draft_probs[rows, np.minimum(n, g - 1)], 0.0)
    w = np.maximum(p_n - q_n, 0.0)
    w[w.sum(axis=1) <= 0] = p_n[w.sum(axis=1) <= 0]
    return _emit(draft_tokens, n, _sample_rows(w, generator))
