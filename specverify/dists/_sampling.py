"""Sampling primitives that draw only from explicit randomness.

Two families, both exact:

* inverse CDF, two-level: the vocabulary is laid out as a K x nb table (K = ``BLOCK_ROWS`` = 128,
  nb = ceil(V / K), zero weights pad it), so block b holds the tokens b, b + nb, b + 2 nb, ... in
  that order. With T_b the sequential sum of block b, C_b = C_{b-1} + T_b (C_{-1} = 0) and
  threshold t = u * C_{nb-1}, the token is in the first block b with C_b > t, at the first j with
  C_{b-1} + S_{b,j} > t, where S_{b,j} is block b's sequential partial sum. For V <= 128 this is the
  textbook walk "first i with cumsum(w)[i] > u * sum(w)". The two levels are what make the batched
  forms fast (block totals are a vectorised reduction over the table's rows, not a sequential scan
  of V) while a Python loop, numpy and a CPU torch land on the same token for the same u: every
  sum is defined in one order. Tokens with zero weight are never returned.
* exponential race (equivalently Gumbel-max): token = argmax_i w_i / E_i with E_i ~ Exp(1) i.i.d.,
  which needs no normalisation (vLLM's recovered-token sampler uses it).

Weights need not be normalised. All functions take the randomness (uniforms or exponentials) as an
argument or a ``numpy.random.Generator``; nothing reads global random state.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = [
    "BLOCK_ROWS",
    "inverse_cdf_sample",
    "inverse_cdf_sample_many",
    "inverse_cdf_sample_scalar",
    "exponential_race_sample",
    "gumbel_max_sample",
    "sample_tokens",
    "uniform",
]

#: K, the rows of the two-level inverse-CDF table (see the module docstring).
BLOCK_ROWS = 128


def uniform(rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
    """U[0, 1) float64 draws from ``rng`` (a thin alias that documents the contract)."""
    out: np.ndarray = rng.random(size)
    return out


def _layout(v: int) -> tuple[int, int]:
    """(K, nb): rows and blocks of the two-level table for a vocabulary of v tokens."""
    k = BLOCK_ROWS if v > BLOCK_ROWS else v
    nb = -(-v // k)
    return k, nb


def inverse_cdf_sample_scalar(weights: Iterable[float], u: float) -> int:
    """The readable form of the two-level walk (module docstring)."""
    w = [float(x) for x in weights]
    v = len(w)
    k, nb = _layout(v)

    def weight(b: int, j: int) -> float:
        return w[b + nb * j] if b + nb * j < v else 0.0

    totals = []
    for b in range(nb):  # block totals, each summed in its own order
        t = 0.0
        for j in range(k):
            t += weight(b, j)
        totals.append(t)
    total = 0.0
    cum = []
    for t in totals:
        total += t
        cum.append(total)
    threshold = u * total
    before = 0.0
    for b in range(nb):
        if cum[b] > threshold:
            partial = 0.0
            for j in range(k):
                partial += weight(b, j)
                if before + partial > threshold and weight(b, j) > 0.0:
                    return b + nb * j
        before = cum[b]
    # Only reached when u * total rounds up to total: the last positive token in walk order.
    for b in reversed(range(nb)):
        for j in reversed(range(k)):
            if weight(b, j) > 0.0:
                return b + nb * j
    return v - 1


def inverse_cdf_sample(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Vectorised two-level inverse-CDF draw. weights [..., V] >= 0 with positive row sums;
    u [...] in [0, 1). Returns int64 token ids of shape [...]."""
    w = np.asarray(weights, dtype=np.float64)
    lead = w.shape[:-1]
    v = w.shape[-1]
    k, nb = _layout(v)
    w2 = w.reshape(-1, v)
    if k * nb != v:
        w2 = np.concatenate([w2, np.zeros((w2.shape[0], k * nb - v))], axis=1)
    table = w2.reshape(-1, k, nb)  # table[r, j, b] = w[r, b + nb j]
    totals = np.add.reduce(table, axis=1)  # [R, nb]: sequential over j (a reduction over rows)
    cum = np.cumsum(totals, axis=1)  # [R, nb]: sequential over b
    thr = np.asarray(u, dtype=np.float64).reshape(-1) * cum[:, -1]
    blk = np.count_nonzero(cum <= thr[:, None], axis=1)  # first block with C_b > t
    over = blk >= nb
    blk_c = np.minimum(blk, nb - 1)
    r = np.arange(table.shape[0])
    col = table[r, :, blk_c]  # [R, K]: the chosen block's weights, in walk order
    before = np.where(blk_c > 0, cum[r, np.maximum(blk_c - 1, 0)], 0.0)
    prefix = before[:, None] + np.cumsum(col, axis=1)
    j = np.count_nonzero(prefix <= thr[:, None], axis=1)
    tok = blk_c + nb * np.minimum(j, k - 1)
    bad = over | (j >= k)
    if bad.any():  # u * total rounded up to total: the last positive token in walk order
        for i in np.nonzero(bad)[0]:
            tok[i] = _last_positive(table[i], nb, k)
    out: np.ndarray = tok.reshape(lead).astype(np.int64)
    return out


def inverse_cdf_sample_many(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One weight row [V], many uniforms [n]: the same tokens as :func:`inverse_cdf_sample` on the
    row repeated n times, with the table's sums formed once (O(V + n K) instead of O(n V))."""
    w = np.asarray(weights, dtype=np.float64)
    v = w.shape[-1]
    k, nb = _layout(v)
    if k * nb != v:
        w = np.concatenate([w, np.zeros(k * nb - v)])
    table = w.reshape(k, nb)
    partial = np.cumsum(table, axis=0)  # [K, nb] sequential over j; the last row is T_b
    cum = np.cumsum(partial[-1])
    u = np.asarray(u, dtype=np.float64).reshape(-1)
    thr = u * cum[-1]
    blk = np.searchsorted(cum, thr, side="right")  # number of C_b <= t
    over = blk >= nb
    blk_c = np.minimum(blk, nb - 1)
    before = np.where(blk_c > 0, cum[np.maximum(blk_c - 1, 0)], 0.0)
    out = np.empty(len(u), dtype=np.int64)
    step = max(1, (1 << 22) // k)
    for s in range(0, len(u), step):
        sl = slice(s, s + step)
        j = np.count_nonzero(before[None, sl] + partial[:, blk_c[sl]] <= thr[None, sl], axis=0)
        bad = over[sl] | (j >= k)
        tok = blk_c[sl] + nb * np.minimum(j, k - 1)
        if bad.any():
            tok[bad] = _last_positive(table, nb, k)
        out[sl] = tok
    return out


def _last_positive(table_r: np.ndarray, nb: int, k: int) -> int:
    for b in reversed(range(nb)):
        for j in reversed(range(k)):
            if table_r[j, b] > 0:
                return b + nb * j
    return 0


def exponential_race_sample(weights: np.ndarray, exponentials: np.ndarray) -> np.ndarray:
    """argmax_i w_i / E_i; weights [..., V] >= 0, exponentials [..., V] i.i.d. Exp(1). Ties: lowest id."""
    w = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore"):
        score = w / np.asarray(exponentials, dtype=np.float64)
    out: np.ndarray = np.argmax(score, axis=-1).astype(np.int64)
    return out


def gumbel_max_sample(logits: np.ndarray, gumbels: np.ndarray) -> np.ndarray:
    """argmax_i logit_i + G_i with G_i i.i.d. standard Gumbel; -inf logits are never chosen."""
    out: np.ndarray = np.argmax(np.asarray(logits, dtype=np.float64) + gumbels, axis=-1).astype(np.int64)
    return out


def sample_tokens(p: np.ndarray, rng: np.random.Generator, *, method: str = "inverse_cdf") -> np.ndarray:
    """Draw one token per row of ``p`` [..., V] from ``rng`` by ``method`` ('inverse_cdf' or 'race')."""
    p = np.asarray(p, dtype=np.float64)
    if method == "inverse_cdf":
        return inverse_cdf_sample(p, rng.random(p.shape[:-1]))
    if method == "race":
        return exponential_race_sample(p, rng.exponential(size=p.shape))
    raise ValueError(f"unknown sampling method {method!r}; use 'inverse_cdf' or 'race'")
