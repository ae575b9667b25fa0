"""Two-sample tests: speculative samples against target-only samples when the law is unknown.

* :func:`homogeneity_test`: chi-square homogeneity on a 2 x k table, cells pooled by their pooled
  expected counts (the module's pooling rule), via ``scipy.stats.chi2_contingency``;
* :func:`binned_homogeneity_test`: for large vocabularies, both samples are first mapped by the same
  predictable projection (salted hash buckets, or rank bins of a known law, ``projection_probs``),
  then tested on the 2 x B table; with ``permutations`` the p-value is calibrated by permuting the
  arm labels (``scipy.stats.permutation_test``) instead of the asymptotic law.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._gof import pool_cells, tv_interval
from ._results import Cell, GofResult

__all__ = ["homogeneity_test", "binned_homogeneity_test"]


def homogeneity_test(counts_a: ArrayLike, counts_b: ArrayLike, *, min_expected: float = 5.0) -> GofResult:
    a = np.asarray(counts_a, dtype=float)
    b = np.asarray(counts_b, dtype=float)
    na, nb = a.sum(), b.sum()
    pooled = (a + b) / (na + nb)
    g = pool_cells(pooled * min(na, nb), min_expected)
    k = g.max() + 1 if (g >= 0).any() else 0
    A = np.bincount(g[g >= 0], weights=a[g >= 0], minlength=k)
    B = np.bincount(g[g >= 0], weights=b[g >= 0], minlength=k)
    if k < 2:
        return GofResult.empty("homogeneity", n=int(na + nb), cells=k, why="fewer than two cells")
    from scipy import stats

    res = stats.chi2_contingency(np.stack([A, B]), correction=False)
    tv = 0.5 * float(np.abs(A / na - B / nb).sum())
    _, iv_a = tv_interval(A / na, A / na, int(na), k)
    r = iv_a[1] * 2  # radius for two estimated laws, conservatively doubled
    worst = np.argsort(-np.abs(A / na - B / nb))[:5]
    cells = [Cell(f"cell {i}", float(A[i]), float(B[i] * na / nb)) for i in worst]
    return GofResult(
        test="homogeneity",
        statistic=float(res.statistic),
        pvalue=float(res.pvalue),
        df=int(res.dof),
        n=int(na + nb),
        cells=k,
        tv_estimate=tv,
        tv_interval=(max(0.0, tv - r), min(1.0, tv + r)),
        worst_cells=cells,
        pooled_groups=0,
        note="expected column: arm B scaled to arm A's size",
    )


def binned_homogeneity_test(
    tokens_a: ArrayLike,
    tokens_b: ArrayLike,
    *,
    vocab_size: int,
    n_bins: int = 32,
    salt: int = 0,
    projection_probs: ArrayLike | None = None,
    permutations: int = 0,
    rng: np.random.Generator | None = None,
) -> GofResult:
    """Homogeneity of two token samples after a shared predictable projection onto ``n_bins`` cells."""
    ta = np.asarray(tokens_a, dtype=np.int64)
    tb = np.asarray(tokens_b, dtype=np.int64)
    if projection_probs is not None:
        p = np.asarray(projection_probs, dtype=float)
        order = np.argsort(-p, kind="stable")
        cum = np.cumsum(p[order]) - p[order] / 2
        cell = np.empty(vocab_size, dtype=np.int64)
        cell[order] = np.minimum((cum * n_bins).astype(np.int64), n_bins - 1)
    else:
        cell = np.random.default_rng(salt).integers(0, n_bins, vocab_size)
    ca = np.bincount(cell[ta], minlength=n_bins)
    cb = np.bincount(cell[tb], minlength=n_bins)
    res = homogeneity_test(ca, cb)
    if permutations:
        rng = rng or np.random.default_rng(salt)

        def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
            xa = np.apply_along_axis(lambda v: np.bincount(v, minlength=n_bins), axis, x)
            ya = np.apply_along_axis(lambda v: np.bincount(v, minlength=n_bins), axis, y)
            tot = xa + ya
            na, nb = xa.sum(-1, keepdims=True), ya.sum(-1, keepdims=True)
            ea = tot * na / (na + nb)
            eb = tot * nb / (na + nb)
            with np.errstate(divide="ignore", invalid="ignore"):
                s = np.where(ea > 0, (xa - ea) ** 2 / ea, 0) + np.where(eb > 0, (ya - eb) ** 2 / eb, 0)
            out: np.ndarray = s.sum(-1)
            return out

        from scipy import stats

        pr = stats.permutation_test(
            (cell[ta], cell[tb]), stat, n_resamples=permutations, alternative="greater", vectorized=True, rng=rng
        )
        res.pvalue, res.test = float(pr.pvalue), "binned-homogeneity-permutation"
    else:
        res.test = "binned-homogeneity"
    return res
