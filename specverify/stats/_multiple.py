"""Multiple testing across contexts, positions and settings.

Holm controls the family-wise error rate (use it to gate: the verdict's alpha is family-wise);
Benjamini-Hochberg controls the false discovery rate (use it to triage findings in a report).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["holm", "benjamini_hochberg"]


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values (reject H_i at family-wise level alpha iff adjusted_i <= alpha)."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty_like(adj)
    out[order] = adj
    return out


def benjamini_hochberg(pvalues: ArrayLike) -> np.ndarray:
    """BH-adjusted p-values (scipy.stats.false_discovery_control)."""
    p = np.asarray(pvalues, dtype=np.float64)
    from scipy import stats

    return p if p.size == 0 else np.asarray(stats.false_discovery_control(p, method="bh"))
