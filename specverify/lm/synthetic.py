"""Seeded synthetic draft/target pairs with a controlled overlap.

Rows are LLM-like: Zipf-shaped logits under a random permutation of the vocabulary (so token id
order says nothing about probability order), and the draft's logits are the target's plus
Gaussian noise whose scale is tuned by bisection to reach a requested mean acceptance
alpha = E[sum min(p, q)].
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from ..dists import SamplingSettings, probs_from_logits

__all__ = [
    "TablePair",
    "MarkovPair",
    "PositionalPair",
    "make_markov_pair",
    "make_positional_pair",
    "llm_like_logits",
    "tune_draft_noise",
]


def llm_like_logits(
    rng: np.random.Generator, rows: int, vocab: int, *, zipf: float = 1.1, spread: float = 1.0
) -> npt.NDArray[np.float64]:
    """[rows, V] logits: log-Zipf(zipf) masses, jittered, under a random permutation per row."""
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    base = -zipf * np.log(ranks)
    out = np.empty((rows, vocab))
    for r in range(rows):
        out[r, rng.permutation(vocab)] = base * spread + rng.normal(0, 0.3, vocab)
    return out


@dataclasses.dataclass(eq=False)
class TablePair:
    """Target and draft logits tables; ``row_index(ctx, pos)`` maps to a table row."""

    target_logits: npt.NDArray[np.float64]  # [M, V]
    draft_logits: npt.NDArray[np.float64]  # [M, V]

    @property
    def vocab_size(self) -> int:
        return int(self.target_logits.shape[1])

    def row_index(self, ctx: ArrayLike, pos: ArrayLike) -> np.ndarray:
        raise NotImplementedError

    # B019: the pairs are few and long-lived; the cache (16 settings a pair) is the point
    @functools.lru_cache(maxsize=16)  # noqa: B019
    def target_table(self, settings: SamplingSettings | None = None) -> np.ndarray:
        """[M, V] processed target probabilities (no history-dependent penalties here)."""
        return probs_from_logits(self.target_logits, settings)

    @functools.lru_cache(maxsize=16)  # noqa: B019
    def draft_table(self, settings: SamplingSettings | None = None) -> np.ndarray:
        return probs_from_logits(self.draft_logits, settings)

    def mean_acceptance(self, settings: SamplingSettings | None = None) -> float:
        p, q = self.target_table(settings), self.draft_table(settings)
        return float(np.minimum(p, q).sum(-1).mean())


@dataclasses.dataclass(eq=False)
class MarkovPair(TablePair):
    """Order-1 Markov pair: row = previous token, or V at the start of a sequence."""

    def row_index(self, ctx: ArrayLike, pos: ArrayLike) -> np.ndarray:
        return np.asarray(ctx)

    @property
    def start_context(self) -> int:
        return self.vocab_size


@dataclasses.dataclass(eq=False)
class PositionalPair(TablePair):
    """Rows by position within the round: target rows 0..gamma, draft rows 0..gamma-1 (row gamma unused)."""

    def row_index(self, ctx: ArrayLike, pos: ArrayLike) -> np.ndarray:
        return np.broadcast_to(np.asarray(pos), np.shape(ctx)) if np.ndim(ctx) else np.asarray(pos)

    @property
    def gamma(self) -> int:
        return int(self.target_logits.shape[0]) - 1

    @property
    def start_context(self) -> int:
        return 0


def tune_draft_noise(
    rng: np.random.Generator,
    target: npt.NDArray[np.float64],
    alpha: float,
    settings: SamplingSettings | None = None,
) -> npt.NDArray[np.float64]:
    """target + s * N(0, 1) noise, with s found by bisection so that the mean acceptance is about alpha."""
    noise = rng.normal(0, 1, target.shape)
    p = probs_from_logits(target, settings)

    def acc(scale: float) -> float:
        q = probs_from_logits(target + scale * noise, settings)
        return float(np.minimum(p, q).sum(-1).mean())

    lo, hi = 0.0, 20.0
    if acc(hi) > alpha:
        return target + hi * noise
    while hi - lo > 1e-6:  # alpha is a target, not a contract: 1e-6 in the scale is plenty
        mid = (lo + hi) / 2
        if acc(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return target + lo * noise


def make_markov_pair(
    vocab: int, *, alpha: float = 0.7, seed: int = 0, settings: SamplingSettings | None = None
) -> MarkovPair:
    """A seeded order-1 pair over ``vocab`` tokens whose mean acceptance is about ``alpha``."""
    rng = np.random.default_rng(seed)
    target = llm_like_logits(rng, vocab + 1, vocab)
    return MarkovPair(target, tune_draft_noise(rng, target, alpha, settings))


def make_positional_pair(
    vocab: int, gamma: int, *, alpha: float = 0.7, seed: int = 0, settings: SamplingSettings | None = None
) -> PositionalPair:
    """A seeded kernel-level pair: gamma + 1 target rows, gamma draft rows (plus an unused one)."""
    rng = np.random.default_rng(seed)
    target = llm_like_logits(rng, gamma + 1, vocab)
    return PositionalPair(target, tune_draft_noise(rng, target, alpha, settings))
