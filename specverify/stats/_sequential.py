"""Anytime-valid sequential testing: an e-process for goodness of fit against a known law.

For a stream of cells c_1, c_2, ... whose null law m_t (over C cells) is known before c_t is seen
(a projection of the target law, e.g. sorted-mass bins), the predictable plug-in likelihood ratio

    M_t = prod_{s <= t} qhat_s(c_s) / m_s(c_s),   qhat_s(c) = (N_{s-1}(c) + k m_s(c)) / (s - 1 + k)

is a test martingale under H0 (E[qhat_s(C)/m_s(C) | past] = sum_c qhat_s(c) = 1), for any prior
concentration k. Averaging over a grid of k is again a test martingale. By Ville's inequality,
P(sup_t M_t >= 1/alpha) <= alpha under H0, so an audit may look after every batch and stop the
moment M_t >= 1/alpha, keeping its false-fail rate (Robbins and Siegmund; Ramdas et al. 2023).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

__all__ = ["MultinomialEProcess"]

DEFAULT_GRID = (16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0)


@dataclasses.dataclass
class MultinomialEProcess:
    """Mixture plug-in e-process over ``n_cells`` cells; feed it batches with :meth:`update`."""

    n_cells: int
    grid: tuple[float, ...] = DEFAULT_GRID
    counts: np.ndarray = None  # type: ignore[assignment]  # [G, C] per group, set in __post_init__
    t: int = 0
    log_m: np.ndarray = None  # type: ignore[assignment]  # per grid point, set in __post_init__
    max_log_e: float = 0.0

    def __post_init__(self) -> None:
        self.counts = (
            np.zeros((1, self.n_cells))
            if self.counts is None
            else np.asarray(self.counts, dtype=float).reshape(-1, self.n_cells)
        )
        self.log_m = np.zeros(len(self.grid)) if self.log_m is None else np.asarray(self.log_m, dtype=float)

    @property
    def log_e(self) -> float:
        """log of the current mixture e-value (mean over the grid)."""
        return float(logsumexp(self.log_m) - math.log(len(self.grid)))

    @property
    def e_value(self) -> float:
        return math.exp(min(self.log_e, 700.0))

    def anytime_pvalue(self) -> float:
        return min(1.0, math.exp(-self.max_log_e))

    def rejects(self, alpha: float) -> bool:
        return self.max_log_e >= math.log(1 / alpha)

    def update(self, cells: ArrayLike, null_mass: ArrayLike, groups: ArrayLike | None = None) -> MultinomialEProcess:
        """cells [n] observed cell ids; null_mass [n, C] (or [C]) their null laws; groups [n]
        (optional) which law each token follows; all in stream order."""
        cells = np.asarray(cells, dtype=np.int64)
        n = len(cells)
        if n == 0:
            return self
        m = np.broadcast_to(np.asarray(null_mass, dtype=float), (n, self.n_cells))
        grp = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
        if grp.max() >= self.counts.shape[0]:
            self.counts = np.vstack([self.counts, np.zeros((grp.max() + 1 - self.counts.shape[0], self.n_cells))])
        m_obs = m[np.arange(n), cells]
        if (m_obs <= 0).any():
            self.max_log_e = math.inf
            self.log_m[:] = math.inf
            return self
        n_before = np.empty(n)
        s_before = np.empty(n)
        for g in np.unique(grp):
            idx = np.nonzero(grp == g)[0]
            onehot = np.zeros((len(idx), self.n_cells))
            onehot[np.arange(len(idx)), cells[idx]] = 1.0
            before = self.counts[g][None, :] + np.cumsum(onehot, axis=0) - onehot
            n_before[idx] = before[np.arange(len(idx)), cells[idx]]
            s_before[idx] = self.counts[g].sum() + np.arange(len(idx))
            self.counts[g] += onehot.sum(0)
        traj = []
        for i, k in enumerate(self.grid):
            step = np.log((n_before + k * m_obs) / (s_before + k)) - np.log(m_obs)
            path = self.log_m[i] + np.cumsum(step)
            traj.append(path)
            self.log_m[i] = path[-1]
        mix = logsumexp(np.stack(traj), axis=0) - math.log(len(self.grid))
        self.max_log_e = max(self.max_log_e, float(mix.max()))
        self.t += n
        return self

    def state(self) -> dict[str, Any]:
        return {
            "n_cells": self.n_cells,
            "grid": list(self.grid),
            "counts": self.counts.tolist(),
            "t": self.t,
            "log_m": self.log_m.tolist(),
            "max_log_e": self.max_log_e,
        }

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> MultinomialEProcess:
        return cls(d["n_cells"], tuple(d["grid"]), np.array(d["counts"]), d["t"], np.array(d["log_m"]), d["max_log_e"])
