"""Token ids as an implementation under audit returns them, validated before anything is tested.

Ids are integers: Python ``int`` (not ``bool``), numpy integer scalars, or arrays / tensors of an
integer dtype. Anything else (floats, even 37.0; strings such as "37"; booleans; nested lists;
None) is malformed output, a finding that names what came back: coercing it with ``int()`` would
audit ids the implementation never returned, and a malformed output must never PASS.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import MalformedOutputError

__all__ = ["as_token_ids"]


_INT64 = np.iinfo(np.int64)


def _describe(x: Any) -> str:
    try:
        text = repr(x)
    except Exception:  # noqa: BLE001 - the implementation's object may not even print
        text = "(its repr raised)"
    return f"{type(x).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


def _from_tensor(out: Any, what: str) -> Any:
    """A torch (or other framework's) tensor as a numpy array; anything else unchanged. A tensor
    numpy cannot hold (bfloat16) is malformed: ids are integers."""
    if not (hasattr(out, "detach") and hasattr(out, "cpu")):
        return out
    try:
        return out.detach().cpu().numpy()
    except (TypeError, RuntimeError) as exc:
        raise MalformedOutputError(
            f"{what} returned a tensor of dtype {getattr(out, 'dtype', '?')}; token ids must have an integer dtype"
        ) from exc


def _is_id(x: Any) -> bool:
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _from_sequence(out: list[Any] | tuple[Any, ...], what: str, ndim: int) -> npt.NDArray[np.int64]:
    """A list (of lists, for ndim 2) of ints as an int64 array; the first non-int element is named."""
    rows = [_from_tensor(row, what) for row in out] if ndim == 2 else [out]
    for r, row in enumerate(rows):
        if ndim == 2 and not isinstance(row, (list, tuple, np.ndarray)):
            raise MalformedOutputError(f"{what} returned a row that is a {_describe(row)}; expected a list of ids")
        for i, x in enumerate(row):
            if isinstance(x, (list, tuple, np.ndarray)):
                raise MalformedOutputError(
                    f"{what} returned a nested list ({_describe(out)}); expected a flat list of token ids"
                    if ndim == 1
                    else f"{what} returned a row with a nested list at [{r}][{i}]; expected [B, gamma + 1] ids"
                )
            if not _is_id(x):
                where = f"[{r}][{i}]" if ndim == 2 else f"[{i}]"
                raise MalformedOutputError(
                    f"{what} returned a {_describe(x)} at {where} ({_describe(out)}); token ids must be integers "
                    "(Python int or a numpy integer dtype), not floats, strings or booleans"
                )
            if not _INT64.min <= int(x) <= _INT64.max:
                where = f"[{r}][{i}]" if ndim == 2 else f"[{i}]"
                raise MalformedOutputError(f"{what} returned the id {int(x)} at {where}, outside any vocabulary")
    if ndim == 2 and len({len(row) for row in rows}) > 1:
        raise MalformedOutputError(f"{what} returned rows of different lengths; expected [B, gamma + 1] ids")
    return np.asarray(rows, dtype=np.int64).reshape((-1,) if ndim == 1 else (len(out), -1))


def as_token_ids(out: Any, what: str, *, ndim: int = 1) -> npt.NDArray[np.int64]:
    """``out`` as an int64 array of ``ndim`` dimensions (1: one round's or one sequence's ids; 2: a
    kernel's [B, gamma + 1]), or MalformedOutputError naming what came back."""
    out = _from_tensor(out, what)
    if isinstance(out, np.ndarray):
        if out.dtype.kind not in "iu":
            raise MalformedOutputError(
                f"{what} returned an array of dtype {out.dtype} ({_describe(out)}); token ids must have an "
                "integer dtype (cast with .astype(np.int64) only if the values are ids)"
            )
        if out.ndim != ndim:
            raise MalformedOutputError(
                f"{what} returned an array of {out.ndim} dimension(s), shape {out.shape}; expected "
                + ("a 1-D list of token ids" if ndim == 1 else "[B, gamma + 1]")
            )
        return out.astype(np.int64, copy=False)
    if isinstance(out, (list, tuple)):
        return _from_sequence(out, what, ndim)
    raise MalformedOutputError(
        f"{what} returned a {_describe(out)}; expected "
        + ("a list (or 1-D integer array) of token ids" if ndim == 1 else "a [B, gamma + 1] integer array")
    )
