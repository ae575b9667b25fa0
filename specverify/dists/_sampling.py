"""Sampling primitives that draw only from explicit randomness.

Two families, both exact:

* inverse CDF: token = first i with cumsum(w)[i] > u * sum(w), for u ~ U[0, 1). The cumulative sum
  is taken left to right (sequentially), and the threshold uses its last entry as the total, so a
  Python loop, ``numpy.cumsum`` and a CPU ``torch.cumsum`` land on the same token for the same u.
  Tokens with zero weight are never returned.
* exponential race (equivalently Gumbel-max): token = argmax_i w_i / E_i with E_i ~ Exp(1) i.i.d.,
  which needs no normalisation (vLLM's recovered-token sampler uses it).

Weights need not be normalised. All functions take the randomness (uniforms or exponentials) as an
argument or a ``numpy.random.Generator``; nothing reads global random state.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "inverse_cdf_sample",
    "inverse_cdf_sample_scalar",
    "exponential_race_sample",
    "gumbel_max_sample",
    "sample_tokens",
    "uniform",
]


def uniform(rng: np.random.Generator, size) -> np.ndarray:
    """U[0, 1) float64 draws from ``rng`` (a thin alias that documents the contract)."""
    return rng.random(size)


def inverse_cdf_sample_scalar(weights, u: float) -> int:
    """The readable form: walk the cumulative sum until it passes ``u * total``."""
    total = 0.0
    for w in weights:
        total += float(w)
    threshold = u * total
    acc = 0.0
    last_positive = -1
    for i, w in enumerate(weights):
        w = float(w)
        if w > 0.0:
            last_positive = i
        acc += w
        if acc > threshold and w > 0.0:
            return i
    # Only reached when u * total rounds up to total (u within an ulp of 1).
    return last_positive


def inverse_cdf_sample(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Vectorised inverse-CDF draw. weights [..., V] >= 0 with positive row sums; u [...] in [0, 1).

    Returns int64 token ids of shape [...].
    """
    w = np.asarray(weights, dtype=np.float64)
    cum = np.cumsum(w, axis=-1)  # [..., V]
    threshold = np.asarray(u, dtype=np.float64) * cum[..., -1]  # [...]
    # Number of prefix sums <= threshold is the index of the first one above it; zero-weight
    # tokens share their predecessor's prefix sum, so they are skipped.
    idx = np.count_nonzero(cum <= threshold[..., None], axis=-1)
    v = w.shape[-1]
    overflow = idx >= v
    if overflow.any():  # u * total rounded up to total: take the last positive-weight token
        last_pos = v - 1 - np.argmax(w[..., ::-1] > 0, axis=-1)
        idx = np.where(overflow, last_pos, idx)
    return idx.astype(np.int64)


def exponential_race_sample(weights: np.ndarray, exponentials: np.ndarray) -> np.ndarray:
    """argmax_i w_i / E_i; weights [..., V] >= 0, exponentials [..., V] i.i.d. Exp(1). Ties: lowest id."""
    w = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore"):
        score = w / np.asarray(exponentials, dtype=np.float64)
    return np.argmax(score, axis=-1).astype(np.int64)


def gumbel_max_sample(logits: np.ndarray, gumbels: np.ndarray) -> np.ndarray:
    """argmax_i logit_i + G_i with G_i i.i.d. standard Gumbel; -inf logits are never chosen."""
    return np.argmax(np.asarray(logits, dtype=np.float64) + gumbels, axis=-1).astype(np.int64)


def sample_tokens(
    p: np.ndarray, rng: np.random.Generator, *, method: str = "inverse_cdf"
) -> np.ndarray:
    """Draw one token per row of ``p`` [..., V] from ``rng`` by ``method`` ('inverse_cdf' or 'race')."""
    p = np.asarray(p, dtype=np.float64)
    if method == "inverse_cdf":
        return inverse_cdf_sample(p, rng.random(p.shape[:-1]))
    if method == "race":
        return exponential_race_sample(p, rng.exponential(size=p.shape))
    raise ValueError(f"unknown sampling method {method!r}; use 'inverse_cdf' or 'race'")
