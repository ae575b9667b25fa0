"""Validation of probability vectors and logits.

Every public entry point of specverify validates its input here first (scipy.stats style), so that a
bad array raises a :mod:`specverify.errors` class naming the problem and the fix instead of producing
a silent wrong verdict.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import (
    InvalidDistributionError,
    InvalidLogitsError,
    ShapeError,
    VocabularyMismatchError,
)

__all__ = [
    "SUM_TOLERANCE",
    "as_float64",
    "validate_probs",
    "validate_logits",
    "check_same_vocab",
    "check_token_ids",
]

#: Default tolerance on |sum(p) - 1| per row. float32 softmax over 128k entries sums to within about
#: 1e-6 of one; 1e-5 admits that and rejects anything that is not a normalised distribution.
SUM_TOLERANCE = 1e-5


def as_float64(x: Any, *, name: str) -> np.ndarray:
    """Convert a list, numpy array or torch tensor (any device, any float dtype) to float64 numpy."""
    if type(x) is np.ndarray and x.dtype == np.float64:
        return x  # the common case, as np.asarray would return it (per-row callers pay for the checks below)
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu().double().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ShapeError(
            f"{name} could not be read as an array of floats ({exc}); pass a list, numpy array or "
            "torch tensor of numbers"
        ) from exc
    return arr


def _where(mask: np.ndarray) -> str:
    mask = np.atleast_1d(mask)
    idx = np.argwhere(mask)
    first = tuple(int(i) for i in idx[0])
    more = f" and {len(idx) - 1} more" if len(idx) > 1 else ""
    return f"at index {first if len(first) > 1 else first[0]}{more}"


def validate_probs(
    p: Any,
    *,
    name: str = "p",
    ndim: int | None = None,
    atol: float = SUM_TOLERANCE,
    renormalize: bool = True,
) -> np.ndarray:
    """Check that ``p`` holds probability vectors along its last axis and return it as float64.

    Raises :class:`InvalidDistributionError` for NaN or infinite entries, negative entries, or rows
    whose sum differs from one by more than ``atol``; :class:`ShapeError` for an empty vocabulary or a
    wrong number of dimensions. With ``renormalize`` (default) rows are divided by their float64 sum,
    which removes the rounding of lower-precision inputs.
    """
    arr = as_float64(p, name=name)
    if arr.ndim == 0:
        raise ShapeError(f"{name} is a scalar; pass a probability vector over the vocabulary")
    if ndim is not None and arr.ndim != ndim:
        raise ShapeError(f"{name} must have {ndim} dimension(s) (..., V); got shape {arr.shape}")
    if arr.shape[-1] == 0:
        raise ShapeError(f"{name} has an empty vocabulary (shape {arr.shape}); V must be >= 1")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidDistributionError(
            f"{name} contains NaN or infinite values {_where(bad)}; a probability vector must be "
            "finite. If these are logits, pass them through specverify.dists.softmax first"
        )
    neg = arr < 0
    if neg.any():
        raise InvalidDistributionError(
            f"{name} has negative entries {_where(neg)} (min {arr.min():.3g}); probabilities must be "
            ">= 0. If these are logits or log-probabilities, convert them with softmax / exp"
        )
    sums = arr.sum(axis=-1)
    off = np.abs(sums - 1.0) > atol
    if off.any():
        worst = float(sums.flat[np.argmax(np.abs(sums - 1.0))])
        raise InvalidDistributionError(
            f"{name} rows must sum to 1 within {atol:g}; row {_where(off)} sums to {worst!r}. "
            "Normalise it (p / p.sum(-1, keepdims=True)) or, if the rounding is expected, raise atol"
        )
    if renormalize:
        arr = arr / sums[..., None]
    return arr


def validate_logits(logits: Any, *, name: str = "logits") -> np.ndarray:
    """Check logits: no NaN, no +inf, and at least one finite entry per row (-inf marks a masked token)."""
    arr = as_float64(logits, name=name)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ShapeError(f"{name} must have a non-empty last (vocabulary) axis; got shape {arr.shape}")
    # one reduction settles the common case: a row's max is finite only when the row holds no NaN
    # (max propagates it), no +inf and at least one finite entry; the checks below say which failed
    if arr.ndim == 1 and arr.shape[0] and math.isfinite(np.maximum.reduce(arr)):
        return arr  # one row (the per-token caller's case), without an array of one maximum
    if np.isfinite(np.maximum.reduce(arr, axis=-1)).all():
        return arr
    nan = np.isnan(arr)
    if nan.any():
        raise InvalidLogitsError(
            f"{name} contains NaN {_where(nan)}; this usually means an overflow or a 0/0 upstream "
            "(for example temperature 0 handled as a division). Fix the producer of the logits"
        )
    pinf = arr == np.inf
    if pinf.any():
        raise InvalidLogitsError(
            f"{name} contains +inf {_where(pinf)}; logits must be finite or -inf (masked). "
            "Clamp the producer's output or compute in float32/float64"
        )
    dead = np.all(arr == -np.inf, axis=-1)
    if dead.any():
        raise InvalidLogitsError(
            f"{name} row {_where(dead)} is entirely -inf, so no token can be sampled; the masking "
            "(top-k, top-p, min-p, bad words) removed every token"
        )
    return arr


def check_same_vocab(p: np.ndarray, q: np.ndarray, *, p_name: str = "p", q_name: str = "q") -> int:
    """Raise :class:`VocabularyMismatchError` unless ``p`` and ``q`` share their last-axis size."""
    vp, vq = np.shape(p)[-1], np.shape(q)[-1]
    if vp != vq:
        raise VocabularyMismatchError(
            f"{p_name} has vocabulary size {vp} but {q_name} has {vq}; draft and target must share "
            "one tokenizer. If one model pads its embedding matrix, slice both to the tokenizer's "
            "vocabulary size before comparing"
        )
    return int(vp)


def check_token_ids(tokens: Any, vocab_size: int, *, name: str = "tokens") -> np.ndarray:
    """Integer token ids in [0, vocab_size), returned as int64."""
    arr = np.asarray(tokens)
    if arr.size and not np.issubdtype(arr.dtype, np.integer) and not np.all(np.equal(np.mod(arr, 1), 0)):
        raise ShapeError(f"{name} must be integer token ids; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= vocab_size)
    if bad.any():
        raise ShapeError(
            f"{name} has ids outside [0, {vocab_size}) {_where(bad)} (value {int(arr[bad][0])}); "
            "check for padding ids (-1) or a vocabulary-size mismatch"
        )
    return arr
