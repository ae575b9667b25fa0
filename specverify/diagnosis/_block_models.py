"""Round models of block verification's mutants (:mod:`specverify.catalogue.block`): each is the
exact law of a round under one :class:`~specverify.algorithms.block_verification.BlockVariant`,
in the events of :mod:`._evidence`.

Block verification keeps tau drafts with P(tau = i | x) = h_i prod_{j > i} (1 - h_j); as events
read front to back, keeping x_j given x_0 .. x_{j-1} kept has probability A_j = S_{j+1} / S_j, with
S_i = P(tau >= i | x) (S_0 = 1), so the scorer's product prod_{j<k} A_j (1 - A_k) is P(tau = k | x).
The last token is drawn from the variant's stop row, the bonus from p_gamma.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.block_verification import BlockVariant, block_stop_rows, block_tau_law
from ._models import Chunk, RoundModel

__all__ = ["BlockVariantModel"]


class BlockVariantModel(RoundModel):
    """The law of a round under block verification implemented as ``variant``."""

    def __init__(self, name: str, variant: BlockVariant) -> None:
        self.name = name
        self.variant = variant
        self._cache: tuple[Chunk, np.ndarray, np.ndarray] | None = None

    def _laws(self, c: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """(w [n, g + 1], P(tau = i | x) [n, g + 1]) of the chunk's rounds (kept for the chunk)."""
        if self._cache is None or self._cache[0] is not c:
            w, law = block_tau_law(c.P, c.Qr, np.maximum(c.X, 0), self.variant)
            self._cache = (c, w, law)
        return self._cache[1], self._cache[2]

    def accept(self, c: Chunk) -> np.ndarray:
        _, law = self._laws(c)
        surv = np.cumsum(law[:, ::-1], axis=1)[:, ::-1]  # S_i = P(tau >= i), i = 0..g
        with np.errstate(divide="ignore", invalid="ignore"):
            out: np.ndarray = np.where(surv[:, :-1] > 0, surv[:, 1:] / surv[:, :-1], 0.0)
        return np.clip(out, 0.0, 1.0)

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        w, _ = self._laws(c)
        return block_stop_rows(c.P[rows], c.Qr[rows], w[rows], j, self.variant)
