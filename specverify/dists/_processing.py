"""The one logits-processing pipeline that draft and target share (numpy form, float64).

Order (transformers' default for ``generate``, with vLLM's logit bias first):

0. logit bias: the request's bias added to the raw logits;
1. repetition penalty over every seen token (prompt and generated): logit < 0 -> logit * r,
   else logit / r;
2. presence and frequency penalties over generated tokens: logit -= presence * [count > 0]
   + frequency * count (OpenAI / vLLM semantics; not part of transformers);
3. greedy (temperature 0): one-hot at the lowest-id argmax of the penalised logits; stop;
4. temperature: logit / T;
5. top-k: keep tokens whose logit is >= the k-th largest (ties at the boundary are all kept);
6. top-p: sort ascending, remove tokens whose cumulative softmax mass is <= 1 - top_p, always
   keeping the last ``min_tokens_to_keep``. Among exactly equal logits the higher id is removed
   first, so ties keep the lowest ids, as greedy does (transformers uses an unstable sort here, so
   which of several tied tokens it removes at the boundary is unspecified; the count is the same);
7. min-p: remove tokens with softmax probability < min_p * max probability.

With ``temperature_last`` (llama.cpp's order) step 4 moves after step 7.

Removed tokens get logit -inf. The torch form in :mod:`specverify.dists.torch_ops` follows the
same steps and agrees to float64 rounding; both are tested against transformers' own processors.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._settings import SamplingSettings
from ._validate import validate_logits

__all__ = ["process_logits", "softmax", "probs_from_logits", "token_counts", "running_counts"]


def token_counts(token_ids: ArrayLike, vocab_size: int) -> np.ndarray:
    """Counts [V] of each id in a 1-D sequence of token ids (the history used by penalties)."""
    ids = np.asarray(token_ids, dtype=np.int64).ravel()
    return np.bincount(ids, minlength=vocab_size)[:vocab_size].astype(np.float64)


def running_counts(token_ids: ArrayLike, vocab_size: int, *, window: int = 0, first: int = 0) -> np.ndarray:
    """Counts [len(ids) - first, V] of the ids before each position ``first``, ``first`` + 1, ...:
    row j counts ``ids[:first + j]``, the last ``window`` of them (0: all); penalties' histories
    for every position of a sequence at once."""
    ids = np.asarray(token_ids, dtype=np.int64).ravel()
    n = len(ids)
    cum = np.zeros((n + 1, vocab_size))
    cum[np.arange(1, n + 1), ids] = 1.0
    np.cumsum(cum, axis=0, out=cum)
    at = np.arange(first, n)
    out: np.ndarray = cum[at] - cum[np.maximum(at - window, 0)] if window else cum[at]
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable softmax along the last axis; -inf logits get probability 0."""
    x = np.asarray(logits, dtype=np.float64)
    # ufunc reductions, not np.max / ndarray.sum: their Python wrappers cost more than a row of 64
    if x.ndim == 1:  # one row (per-token callers): scalar reductions, no keepdims
        e1 = np.exp(x - np.maximum.reduce(x))
        one: np.ndarray = e1 / np.add.reduce(e1)
        return one
    e = np.exp(x - np.maximum.reduce(x, axis=-1, keepdims=True))
    out: np.ndarray = e / np.add.reduce(e, axis=-1, keepdims=True)
    return out


def _apply_penalties(
    x: np.ndarray, s: SamplingSettings, seen_counts: ArrayLike | None, output_counts: ArrayLike | None
) -> np.ndarray:
    """The logit bias, then the penalties (the steps before temperature)."""
    if (bias := s.bias_vector(x.shape[-1])) is not None:
        x = x + bias
    if s.repetition_penalty != 1.0 and seen_counts is not None:
        seen = _shaped(seen_counts, x.shape) > 0
        pen = np.where(x < 0, x * s.repetition_penalty, x / s.repetition_penalty)
        x = np.where(seen, pen, x)
    if (s.presence_penalty or s.frequency_penalty) and output_counts is not None:
        c = _shaped(output_counts, x.shape)
        x = x - s.presence_penalty * (c > 0) - s.frequency_penalty * c
    return x


def _shaped(counts: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``counts`` broadcast to the logits' shape (an error if it cannot be), without a copy."""
    arr = np.asarray(counts)
    return arr if arr.shape == shape else np.broadcast_to(arr, shape)


def _top_k(x: np.ndarray, k: int) -> np.ndarray:
    v = x.shape[-1]
    if k <= 0 or k >= v:
        return x
    kth = -np.partition(-x, k - 1, axis=-1)[..., k - 1 : k]  # k-th largest, [..., 1]
    return np.where(x < kth, -np.inf, x)


def _top_p(x: np.ndarray, top_p: float, keep: int) -> np.ndarray:
    if top_p >= 1.0:
        return x
    # Ascending by logit; among ties the higher id first (stable sort of the reversed row).
    v = x.shape[-1]
    order = (v - 1) - np.argsort(x[..., ::-1], axis=-1, kind="stable")
    if x.ndim == 1:  # one row: the removed tokens are a prefix of the ascending order, cut at one search
        cum1 = np.cumsum(softmax(x[order]))
        cut = min(int(cum1.searchsorted(1.0 - top_p, side="right")), max(v - keep, 0))
        out1: np.ndarray = x.copy()
        out1[order[:cut]] = -np.inf
        return out1
    sorted_x = np.take_along_axis(x, order, axis=-1)
    cum = np.cumsum(softmax(sorted_x), axis=-1)
    remove_sorted = cum <= (1.0 - top_p)
    remove_sorted[..., -keep:] = False
    remove = np.empty_like(remove_sorted)
    np.put_along_axis(remove, order, remove_sorted, axis=-1)
    return np.where(remove, -np.inf, x)


def _min_p(x: np.ndarray, min_p: float, keep: int) -> np.ndarray:
    if min_p <= 0.0:
        return x
    probs = softmax(x)
    remove = probs < min_p * np.maximum.reduce(probs, axis=-1, keepdims=True)
    if keep > 1:  # (one: the most likely token is never removed, as min_p <= 1)
        top = np.argsort(-probs, axis=-1, kind="stable")[..., :keep]
        np.put_along_axis(remove, top, False, axis=-1)
    return np.where(remove, -np.inf, x)


def process_logits(
    logits: ArrayLike,
    settings: SamplingSettings,
    *,
    seen_counts: ArrayLike | None = None,
    output_counts: ArrayLike | None = None,
) -> np.ndarray:
    """Apply ``settings`` to ``logits`` [..., V]; returns float64 logits with removed tokens at -inf.

    ``seen_counts`` [..., V] counts every token seen so far (prompt and generated; used by the
    repetition penalty); ``output_counts`` [..., V] counts generated tokens only (presence and
    frequency penalties). For greedy settings the result is 0 at the chosen token and -inf elsewhere.
    """
    x = validate_logits(logits)
    s = settings
    x = _apply_penalties(x, s, seen_counts, output_counts)
    if s.is_greedy:
        top = np.argmax(x, axis=-1)[..., None]
        out = np.full_like(x, -np.inf)
        np.put_along_axis(out, top, 0.0, axis=-1)
        return out
    if s.temperature != 1.0 and not s.temperature_last:
        x = x / s.temperature
    x = _top_k(x, max(s.top_k, s.min_tokens_to_keep) if s.top_k else 0)
    x = _top_p(x, s.top_p, s.min_tokens_to_keep)
    x = _min_p(x, s.min_p, s.min_tokens_to_keep)
    if s.temperature != 1.0 and s.temperature_last:
        x = x / s.temperature
    return x


def probs_from_logits(
    logits: ArrayLike,
    settings: SamplingSettings | None = None,
    *,
    seen_counts: ArrayLike | None = None,
    output_counts: ArrayLike | None = None,
) -> np.ndarray:
    """softmax(process_logits(...)): the distribution actually sampled from under ``settings``."""
    if settings is None:
        return softmax(validate_logits(logits))
    return softmax(process_logits(logits, settings, seen_counts=seen_counts, output_counts=output_counts))
