"""Chain speculative decoding, vectorised over B independent rounds (numpy, float64).

Same rules and the same uniform contract as :mod:`.chain_reference`; given the same uniforms the
tokens are identical. Shapes:

    draft_tokens  [B, gamma]        int
    q             [B, gamma, V]     draft rows (broadcastable leading dim: [1, gamma, V] is fine)
    p             [B, gamma + 1, V] target rows
    u_accept      [B, gamma]        acceptance uniforms
    u_final       [B]               replacement / bonus uniform
    -> ChainResult.tokens [B, gamma + 1] padded with -1, .num_accepted [B]

Only the row where each round stops is read in full, so the work per round is O(V + gamma), not
O(gamma V): the acceptance test needs the scalars p_i(x_i), q_i(x_i), and the final draw needs one
residual row. Rows are processed in chunks so that the temporaries stay in cache, and float32 input is upcast
to float64 only for the rows actually read (exactly, so the tokens equal the float64 reference on
the same values).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from ..dists import inverse_cdf_sample, inverse_cdf_sample_many
from ..errors import InvalidDraftError, ShapeError
from . import _fused

__all__ = [
    "ChainResult",
    "verify_chain_batch",
    "verify_greedy_batch",
    "verify_sample_and_match_batch",
    "verify_one_hot_batch",
    "draft_and_verify_batch",
]

# Rows per chunk: keeps the [chunk, V] float64 temporaries (a few of them) within a few MiB.
_CHUNK_BYTES = 1 << 21


@dataclasses.dataclass
class ChainResult:
    """tokens [B, gamma + 1] (-1 after the emitted ones) and num_accepted [B] in 0..gamma."""

    tokens: np.ndarray
    num_accepted: np.ndarray

    @property
    def num_emitted(self) -> np.ndarray:
        return self.num_accepted + 1

    def as_lists(self) -> list[list[int]]:
        return [row[: n + 1].tolist() for row, n in zip(self.tokens, self.num_accepted)]


def _floats(a: ArrayLike) -> np.ndarray:
    """Keep float32/float64 input as is (rows are upcast only where read); convert anything else."""
    a = np.asarray(a)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    return a


def _shapes(draft_tokens: ArrayLike, p: np.ndarray, q: np.ndarray | None = None) -> tuple[np.ndarray, int, int, int]:
    x = np.asarray(draft_tokens, dtype=np.int64)
    if x.ndim != 2:
        raise ShapeError(f"draft_tokens must be [B, gamma]; got shape {x.shape}")
    b, g = x.shape
    if p.ndim != 3 or p.shape[1] != g + 1:
        raise ShapeError(f"p must be [B, gamma + 1, V] = [{b}, {g + 1}, V]; got {p.shape}")
    v = p.shape[2]
    if q is not None and (q.ndim != 3 or q.shape[1] != g or q.shape[2] != v):
        raise ShapeError(f"q must be [B, gamma, V] = [{b}, {g}, {v}]; got {q.shape}")
    if x.size and (x.min() < 0 or x.max() >= v):
        raise InvalidDraftError(f"draft_tokens must lie in [0, {v}); got range [{x.min()}, {x.max()}]")
    return x, b, g, v


def _gather(rows: np.ndarray, x: np.ndarray, b: int) -> np.ndarray:
    """rows[b_i, j, x[b_i, j]] for j < gamma, with a broadcastable leading dimension."""
    bi = np.arange(b)[:, None] if rows.shape[0] != 1 else np.zeros((b, 1), dtype=np.int64)
    return np.asarray(rows[bi, np.arange(x.shape[1])[None, :], x], dtype=np.float64)


def _first_false(accept: np.ndarray) -> np.ndarray:
    """Index of the first False per row, gamma if none (the number of accepted drafts)."""
    g = accept.shape[1]
    if g == 0:  # nothing drafted
        return np.zeros(accept.shape[0], dtype=np.int64)
    rejected = ~accept
    return np.asarray(np.where(rejected.any(axis=1), rejected.argmax(axis=1), g))


def _emit(x: np.ndarray, n_acc: np.ndarray, final: np.ndarray) -> np.ndarray:
    b, g = x.shape
    tokens = np.full((b, g + 1), -1, dtype=np.int64)
    pos = np.arange(g + 1)[None, :]
    tokens[:, :g] = np.where(pos[:, :g] < n_acc[:, None], x, -1)
    tokens[np.arange(b), n_acc] = final
    return tokens


def _final_draw(
    p: np.ndarray, q: np.ndarray | None, n_acc: np.ndarray, u_final: np.ndarray, *, one_hot_x: np.ndarray | None = None
) -> np.ndarray:
    """Residual (or bonus) draw at each row's stopping position, chunked over rows.

    Work buffers are allocated once and written with ``out=`` (fresh multi-MiB temporaries would
    cost a page fault per 4 KiB on every chunk), and float32 rows are upcast by a copy into the
    float64 buffer before any arithmetic (mixed-dtype ufuncs are several times slower).
    With numba installed (a dependency) the compiled single pass of :mod:`._fused` does the same
    draw reading each stopping row once; this numpy path is the fallback and the cross-check.
    """
    if _fused.fused_kernel_available():
        return _fused.final_draw_fused(p, q, n_acc, u_final, zero_tok=one_hot_x)
    b = n_acc.shape[0]
    v = p.shape[2]
    g = p.shape[1] - 1
    out = np.empty(b, dtype=np.int64)
    chunk = max(1, min(b, _CHUNK_BYTES // (8 * v)))
    w = np.empty((chunk, v))
    tmp = np.empty(v)
    p_lead = p.shape[0] != 1
    q_lead = q is not None and q.shape[0] != 1
    for s in range(0, b, chunk):
        e = min(b, s + chunk)
        stopped = []
        for i in range(s, e):
            k = n_acc[i]
            row = w[i - s]
            row[...] = p[i if p_lead else 0, k]  # the row where the round stopped, as float64
            if k == g:  # all accepted: the bonus draw from p_{gamma+1}
                continue
            if one_hot_x is not None:
                row[one_hot_x[i]] = 0.0
                continue
            assert q is not None  # only the one-hot rule (one_hot_x) goes without q
            tmp[...] = q[i if q_lead else 0, k]
            np.subtract(row, tmp, out=row)
            np.maximum(row, 0.0, out=row)
            stopped.append(i - s)
        for j in stopped:
            if not w[j].any():  # rounding only: the residual vanished; fall back to p, as the reference does
                w[j] = p[s + j if p_lead else 0, n_acc[s + j]]
        out[s:e] = inverse_cdf_sample(w[: e - s], u_final[s:e])
    return out


def _shared_rows(a: np.ndarray) -> bool:
    """True when every round sees the same rows (leading dim 1, or broadcast with stride 0)."""
    return bool(a.shape[0] == 1 or a.strides[0] == 0)


def _final_draw_shared(p: np.ndarray, q: np.ndarray, n_acc: np.ndarray, u_final: np.ndarray) -> np.ndarray:
    """Final draw when all rounds share their rows: the residual of each stopping position is
    formed once and sampled for all the rounds that stopped there (the same rows and uniforms
    give the same tokens as the general path)."""
    g = p.shape[1] - 1
    out = np.empty(len(n_acc), dtype=np.int64)
    for k in np.unique(n_acc):
        sel = np.nonzero(n_acc == k)[0]
        w = p[0, k].astype(np.float64)
        if k < g:
            r = np.maximum(w - q[0, k].astype(np.float64), 0.0)
            if r.any():  # else rounding only: fall back to p, as the reference does
                w = r
        out[sel] = inverse_cdf_sample_many(w, u_final[sel])
    return out


def verify_chain_batch(
    draft_tokens: ArrayLike, q: ArrayLike, p: ArrayLike, u_accept: ArrayLike, u_final: ArrayLike
) -> ChainResult:
    """B rounds of the full rule (accept iff u < p(x)/q(x); residual (p - q)+; bonus from p)."""
    p, q = _floats(p), _floats(q)
    x, b, g, v = _shapes(draft_tokens, p, q)
    px = _gather(p[:, :g], x, b)  # [B, g]
    qx = _gather(q, x, b)  # [B, g]
    if (qx <= 0).any():
        i, j = np.argwhere(qx <= 0)[0]
        raise InvalidDraftError(
            f"draft token {x[i, j]} (round {i}, position {j}) has q = 0; it cannot have been drawn "
            "from q. Pass the distribution the draft was actually sampled from"
        )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        accept = np.asarray(u_accept) < px / qx
    n_acc = _first_false(accept)
    u_final = np.asarray(u_final, dtype=np.float64)
    if _shared_rows(p) and _shared_rows(q):
        tok = _final_draw_shared(p, q, n_acc, u_final)
    else:
        tok = _final_draw(p, q, n_acc, u_final)
    return ChainResult(_emit(x, n_acc, tok), n_acc)


def verify_one_hot_batch(draft_tokens: ArrayLike, p: ArrayLike, u_accept: ArrayLike, u_final: ArrayLike) -> ChainResult:
    """B rounds of the one-hot rule (accept iff u < p(x); else p without x)."""
    p = _floats(p)
    x, b, g, v = _shapes(draft_tokens, p)
    px = _gather(p[:, :g], x, b)
    n_acc = _first_false(np.asarray(u_accept) < px)
    xs = np.concatenate([x, np.zeros((b, 1), dtype=np.int64)], axis=1)[np.arange(b), n_acc]
    tok = _final_draw(p, None, n_acc, np.asarray(u_final, dtype=np.float64), one_hot_x=xs)
    return ChainResult(_emit(x, n_acc, tok), n_acc)


def verify_greedy_batch(draft_tokens: ArrayLike, p: ArrayLike) -> ChainResult:
    """B rounds of greedy verification; argmax ties to the lowest id."""
    p = np.asarray(p, dtype=np.float64)
    x, b, g, v = _shapes(draft_tokens, p)
    best = np.argmax(p, axis=-1)  # [B or 1, g + 1]
    best = np.broadcast_to(best, (b, g + 1))
    n_acc = _first_false(x == best[:, :g])
    return ChainResult(_emit(x, n_acc, best[np.arange(b), n_acc]), n_acc)


def verify_sample_and_match_batch(draft_tokens: ArrayLike, p: ArrayLike, u_target: ArrayLike) -> ChainResult:
    """B rounds of sample-and-match; u_target [B, gamma + 1]."""
    p = np.asarray(p, dtype=np.float64)
    x, b, g, v = _shapes(draft_tokens, p)
    u = np.asarray(u_target, dtype=np.float64)
    y = inverse_cdf_sample(np.broadcast_to(p, (b, g + 1, v)), u)  # [B, g + 1]
    n_acc = _first_false(x == y[:, :g])
    return ChainResult(_emit(x, n_acc, y[np.arange(b), n_acc]), n_acc)


def draft_and_verify_batch(
    p: ArrayLike, q: ArrayLike, gamma: int, n: int, rng: np.random.Generator, *, rule: str = "full"
) -> tuple[np.ndarray, ChainResult]:
    """n rounds with position-independent rows p [V] and q [V]: draw drafts from q, then verify.

    Returns (draft_tokens [n, gamma], result). This is the hot path of the statistical tests; p and
    q are shared by all rounds, so nothing of size [n, gamma, V] is materialised.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if rule == "greedy":
        x = np.full((n, gamma), int(np.argmax(q)), dtype=np.int64)
    else:
        cq = np.cumsum(q)
        x = np.searchsorted(cq, rng.random((n, gamma)) * cq[-1], side="right").astype(np.int64)
        x = np.minimum(x, len(q) - 1)
    P = np.broadcast_to(p, (1, gamma + 1, len(p)))
    Q = np.broadcast_to(q, (1, gamma, len(q)))
    if rule == "full":
        res = verify_chain_batch(x, Q, P, rng.random((n, gamma)), rng.random(n))
    elif rule == "one_hot":
        res = verify_one_hot_batch(x, P, rng.random((n, gamma)), rng.random(n))
    elif rule == "sample_and_match":
        res = verify_sample_and_match_batch(x, P, rng.random((n, gamma + 1)))
    elif rule == "greedy":
        res = verify_greedy_batch(x, P)
    else:
        raise ValueError(f"unknown rule {rule!r}; use 'full', 'one_hot', 'sample_and_match' or 'greedy'")
    return x, res
