"""The final draw of a batch of rounds as one compiled pass per round (numba).

For round i stopping at position k < gamma, the residual w = max(p[i, k] - q[i, k], 0) is formed
on the fly while the block totals of the two-level inverse CDF (``specverify.dists``) accumulate:
the p and q rows are read once, nothing of size V is written, which is what the memory-bandwidth
bound of ``specverify bench sampler`` assumes. A second, short walk reads the K = 128 entries of the
chosen block. Every sum is formed in the order the contract defines (block totals sequential over
j, cumulative totals sequential over b, partial sums sequential inside the block), in float64 from
the same float64 values, so the tokens are identical to :func:`specverify.dists.inverse_cdf_sample`
on the residual rows, including the fallbacks (a residual that vanished by rounding falls back to
p; ``u * total`` rounding up to the total picks the last positive token in walk order).

Shapes: p [Bp, gamma + 1, V], q [Bq, gamma, V] (Bp, Bq in {1, B}), n_acc [B], u [B], zero_tok [B]
(a token id to remove from p, the one-hot rule's replacement law, or -1), out [B].
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["AVAILABLE", "final_draw_fused", "fused_kernel_available", "numpy_fallback"]

# numba is a dependency; the pure-numpy path stays for platforms without a wheel (or where numba
# fails to import). It is imported at the first batch draw, not here: its import is a tenth of a
# second of every CLI start, and round steps never use it.
AVAILABLE = not os.environ.get("SPECVERIFY_NO_NUMBA") and importlib.util.find_spec("numba") is not None


def fused_kernel_available() -> bool:
    """Whether the batch forms take the compiled final draw (numba importable and not switched off)."""
    global AVAILABLE
    if AVAILABLE and _compiled() is None:
        AVAILABLE = False
    return AVAILABLE


@contextlib.contextmanager
def numpy_fallback() -> Iterator[None]:
    """Inside the block every batch form takes the pure-numpy final draw (benchmarks, tests)."""
    global AVAILABLE
    was = AVAILABLE
    AVAILABLE = False
    try:
        yield
    finally:
        AVAILABLE = was


K = 128  # BLOCK_ROWS of specverify.dists; the layout below must match _layout()


# long: the compiled final draw; one pass over p and q per round (the bandwidth bound assumes it), one body
def _kernel(  # noqa: C901  # pragma: no cover - compiled
    p: np.ndarray,
    q: np.ndarray,
    n_acc: np.ndarray,
    u: np.ndarray,
    zero_tok: np.ndarray,
    p_lead: bool,
    q_lead: bool,
    out: np.ndarray,
) -> None:
    b_total = n_acc.shape[0]
    g = p.shape[1] - 1
    v = p.shape[2]
    k = K if v > K else v
    nb = (v + k - 1) // k
    totals = np.empty(nb)
    for i in range(b_total):
        s = n_acc[i]
        prow = p[i if p_lead else 0, s]
        z = zero_tok[i] if s < g else -1  # the bonus row is p whole
        use_q = s < g and z < 0
        qrow = q[i if q_lead else 0, s if use_q else 0]
        # Pass 1: block totals of the weights (residual, bonus row, or p without one token).
        for _attempt in range(2):
            totals[:] = 0.0
            for j in range(k):
                base = j * nb
                lim = min(nb, v - base)
                if use_q:
                    for b in range(lim):
                        d = np.float64(prow[base + b]) - np.float64(qrow[base + b])
                        totals[b] += d if d > 0.0 else 0.0
                else:
                    for b in range(lim):
                        if base + b != z:
                            totals[b] += np.float64(prow[base + b])
            total = 0.0
            for b in range(nb):
                total += totals[b]
                totals[b] = total  # now the cumulative C_b
            if total > 0.0 or not use_q:
                break
            use_q = False  # the residual vanished (rounding only): fall back to p, as the reference does
        thr = u[i] * total
        blk = 0
        while blk < nb and totals[blk] <= thr:
            blk += 1
        tok = -1
        if blk < nb:
            before = totals[blk - 1] if blk > 0 else 0.0
            part = 0.0
            for j in range(k):
                t = blk + nb * j
                if t >= v:
                    break
                if use_q:
                    w = np.float64(prow[t]) - np.float64(qrow[t])
                    w = w if w > 0.0 else 0.0
                else:
                    w = 0.0 if t == z else np.float64(prow[t])
                part += w
                if before + part > thr:
                    tok = t
                    break
        if tok < 0:  # u * total rounded up to total: the last positive weight in walk order
            tok = 0
            found = False
            for b in range(nb - 1, -1, -1):
                for j in range(k - 1, -1, -1):
                    t = b + nb * j
                    if t >= v:
                        continue
                    if use_q:  # noqa: SIM108 - kept as the two rules read in the module docstring
                        w = np.float64(prow[t]) - np.float64(qrow[t])
                    else:
                        w = 0.0 if t == z else np.float64(prow[t])
                    if w > 0.0:
                        tok = t
                        found = True
                        break
                if found:
                    break
        out[i] = tok


@functools.cache
def _compiled() -> Any:
    try:
        import numba
    except Exception:  # noqa: BLE001 - a broken numba install (e.g. against another numpy): the numpy path
        return None
    return numba.njit(cache=True, nogil=True)(_kernel)


def final_draw_fused(
    p: np.ndarray, q: np.ndarray | None, n_acc: np.ndarray, u_final: ArrayLike, *, zero_tok: ArrayLike | None = None
) -> np.ndarray:
    """Tokens [B] of the final draw (see the module docstring); requires :data:`AVAILABLE`."""
    b = len(n_acc)
    out = np.empty(b, dtype=np.int64)
    if q is None:
        q = p[:, :1]  # never read: every row takes the zero_tok or bonus branch
    zt = np.full(b, -1, dtype=np.int64) if zero_tok is None else np.asarray(zero_tok, dtype=np.int64)
    assert fused_kernel_available(), "final_draw_fused needs numba (see fused_kernel_available)"
    _compiled()(
        p,
        q,
        np.asarray(n_acc, dtype=np.int64),
        np.asarray(u_final, dtype=np.float64),
        zt,
        p.shape[0] != 1,
        q.shape[0] != 1,
        out,
    )
    return out
