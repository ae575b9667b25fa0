"""Goodness of fit of counts against a known law: Pearson, G, exact multinomial, Monte Carlo.

Pooling rule (documented, fixed before the data are seen; a function of the expected counts only):
cells with expected count >= ``min_expected`` (default 5) stay as they are; the others are merged,
in increasing order of expected count, into groups that each reach ``min_expected``; a last group
short of it is merged into the previous one. Cells with probability 0 are checked first: any count
there is an exact failure (p-value 0), since a correct sampler cannot emit them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ..dists import validate_probs
from ..errors import ShapeError
from ._results import TV_INTERVAL_DELTA, Cell, GofResult

__all__ = [
    "pool_cells",
    "pearson_test",
    "g_test",
    "exact_multinomial_test",
    "monte_carlo_gof_test",
    "tv_interval",
    "cells_result",
]


def pool_cells(expected: ArrayLike, min_expected: float = 5.0) -> np.ndarray:
    """Group id per cell (the documented pooling rule). Cells with expected 0 get group -1."""
    e = np.asarray(expected, dtype=np.float64)
    group = np.full(e.shape, -1, dtype=np.int64)
    pos = np.nonzero(e > 0)[0]
    big = pos[e[pos] >= min_expected]
    group[big] = np.arange(len(big))
    nxt = len(big)
    small = pos[e[pos] < min_expected]
    small = small[np.argsort(e[small], kind="stable")]
    acc, members = 0.0, []
    groups: list[list[int]] = []
    for i in small:
        members.append(i)
        acc += e[i]
        if acc >= min_expected:
            groups.append(members)
            members, acc = [], 0.0
    if members:
        if groups:
            groups[-1].extend(members)
        elif len(big):
            # Fold the short remainder into the smallest kept cell.
            j = big[np.argmin(e[big])]
            group[members] = group[j]
            return group
        else:
            groups.append(members)
    for g in groups:
        group[g] = nxt
        nxt += 1
    return group


def tv_interval(
    obs_freq: np.ndarray, exp_freq: np.ndarray, n: int, k: int, delta: float = TV_INTERVAL_DELTA
) -> tuple[float, tuple[float, float]]:
    """TV(observed, expected) with a (1 - delta) interval (Weissman et al. L1 bound)."""
    tv = 0.5 * float(np.abs(obs_freq - exp_freq).sum())
    r = 0.5 * math.sqrt(2 * (k * math.log(2) + math.log(1 / delta)) / max(n, 1))
    return tv, (max(0.0, tv - r), min(1.0, tv + r))


def power_divergence(obs: np.ndarray, exp: np.ndarray, lambda_: str) -> tuple[float, float]:
    """(statistic, p-value) of ``scipy.stats.power_divergence(obs, exp, lambda_=lambda_)`` (equal to it;
    tests/test_stats.py checks). Pearson and G are written out with scipy.special because importing
    scipy.stats costs about 0.6 s, a tenth of a short CLI audit, and these two are all a PASS needs."""
    if lambda_ == "pearson":
        stat = float(np.sum((obs - exp) ** 2 / exp))
    elif lambda_ == "log-likelihood":
        stat = float(2.0 * np.sum(special.xlogy(obs, obs / exp)))
    else:
        from scipy import stats

        res = stats.power_divergence(obs, exp, lambda_=lambda_)
        return float(res.statistic), float(res.pvalue)
    return stat, float(special.chdtrc(len(obs) - 1, stat))


def cells_result(
    test: str,
    obs: np.ndarray,
    exp: np.ndarray,
    labels: Sequence[object],
    *,
    lambda_: str,
    pooled_groups: int = 0,
    note: str = "",
    members: list[list[int]] | None = None,
) -> GofResult:
    """Run a power-divergence test on already-formed cells (``members``: which original cells each pools)."""
    n = int(round(obs.sum()))
    k = len(obs)
    if k < 2:
        return GofResult.empty(
            test, n=n, cells=k, pooled_groups=pooled_groups, why="fewer than two cells: nothing to test"
        )
    statistic, pvalue = power_divergence(obs, exp * (obs.sum() / exp.sum()), lambda_)
    tv, iv = tv_interval(obs / max(n, 1), exp / exp.sum(), n, k)
    resid = (obs - exp) / np.sqrt(exp)
    worst = np.argsort(-np.abs(resid))[:5]
    cells = [Cell(str(labels[i]), float(obs[i]), float(exp[i])) for i in worst]
    return GofResult(
        test=test,
        statistic=statistic,
        pvalue=pvalue,
        df=k - 1,
        n=n,
        cells=k,
        tv_estimate=tv,
        tv_interval=iv,
        worst_cells=cells,
        pooled_groups=pooled_groups,
        note=note,
        observed=obs.tolist(),
        expected=exp.tolist(),
        labels=[str(x) for x in labels],
        members=members,
    )


def _prepare(counts: ArrayLike, probs: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(counts, dtype=np.float64)
    p = validate_probs(probs, name="probs", ndim=1)
    if c.shape != p.shape:
        raise ShapeError(f"counts has shape {c.shape} but probs has {p.shape}; pass one count per category")
    if (c < 0).any():
        raise ShapeError("counts must be >= 0")
    return c, p


def _zero_violation(test: str, c: np.ndarray, p: np.ndarray) -> GofResult | None:
    bad = (p == 0) & (c > 0)
    if bad.any():
        n = int(c.sum())
        cells = [Cell(f"token {i}", float(c[i]), 0.0) for i in np.nonzero(bad)[0][:5]]
        frac = float(c[bad].sum() / max(n, 1))
        return GofResult.exact_failure(
            test,
            n=n,
            why="tokens with probability 0 were emitted",
            tv_estimate=frac,
            tv_interval=(frac, 1.0),
            worst_cells=cells,
            cells=int(bad.sum()),
        )
    return None


def _pooled_test(test: str, counts: ArrayLike, probs: ArrayLike, lambda_: str, min_expected: float) -> GofResult:
    c, p = _prepare(counts, probs)
    z = _zero_violation(test, c, p)
    if z:
        return z
    n = c.sum()
    g = pool_cells(n * p, min_expected)
    m = g.max() + 1 if (g >= 0).any() else 0
    obs = np.bincount(g[g >= 0], weights=c[g >= 0], minlength=m)
    exp = np.bincount(g[g >= 0], weights=n * p[g >= 0], minlength=m)
    labels = []
    for j in range(m):
        members = np.nonzero(g == j)[0]
        labels.append(f"token {members[0]}" if len(members) == 1 else f"{len(members)} pooled tokens")
    pooled = sum(1 for j in range(m) if (g == j).sum() > 1)
    return cells_result(test, obs, exp, labels, lambda_=lambda_, pooled_groups=pooled)


def pearson_test(counts: ArrayLike, probs: ArrayLike, *, min_expected: float = 5.0) -> GofResult:
    """Pearson chi-square with the pooling rule of this module."""
    return _pooled_test("pearson", counts, probs, "pearson", min_expected)


def g_test(counts: ArrayLike, probs: ArrayLike, *, min_expected: float = 5.0) -> GofResult:
    """G-test (likelihood ratio) with the same pooling."""
    return _pooled_test("g-test", counts, probs, "log-likelihood", min_expected)


def exact_multinomial_test(counts: ArrayLike, probs: ArrayLike, *, max_tables: int = 500_000) -> GofResult:
    """Exact multinomial test for tiny samples: the p-value sums the probabilities of all count
    vectors whose Pearson statistic is at least the observed one (Radlow and Alf's ordering)."""
    c, p = _prepare(counts, probs)
    z = _zero_violation("exact-multinomial", c, p)
    if z:
        return z
    keep = p > 0
    c, p = c[keep].astype(int), p[keep]
    n, k = int(c.sum()), len(c)
    if math.comb(n + k - 1, k - 1) > max_tables:
        raise ShapeError(
            f"exact test would enumerate {math.comb(n + k - 1, k - 1):,} tables (n={n}, k={k}); "
            "use pearson_test or monte_carlo_gof_test for samples this large"
        )

    def x2(v: ArrayLike) -> float:
        return float(((np.asarray(v) - n * p) ** 2 / (n * p)).sum())

    obs = x2(c)
    logp = np.log(p)
    total = 0.0
    for cut in itertools.combinations(range(n + k - 1), k - 1):
        v = np.diff((-1,) + cut + (n + k - 1,)) - 1
        if x2(v) >= obs - 1e-9:
            total += math.exp(math.lgamma(n + 1) - sum(math.lgamma(x + 1) for x in v) + float((v * logp).sum()))
    tv, iv = tv_interval(c / n, p, n, k)
    return GofResult(
        test="exact-multinomial",
        statistic=obs,
        pvalue=min(1.0, total),
        df=k - 1,
        n=n,
        cells=k,
        tv_estimate=tv,
        tv_interval=iv,
        worst_cells=[],
        pooled_groups=0,
    )


def monte_carlo_gof_test(
    counts: ArrayLike,
    probs: ArrayLike,
    rng: np.random.Generator,
    *,
    n_resamples: int = 9999,
    statistic: str = "pearson",
) -> GofResult:
    """Pearson or G statistic on all positive-probability cells, p-value by simulation under the
    known null: (1 + #{T_b >= T_obs}) / (B + 1), valid at any n (Phipson and Smyth)."""
    c, p = _prepare(counts, probs)
    z = _zero_violation("monte-carlo", c, p)
    if z:
        return z
    keep = p > 0
    c, p = c[keep], p[keep]
    n = int(c.sum())
    lam = "pearson" if statistic == "pearson" else "log-likelihood"

    def stat(x: np.ndarray) -> np.ndarray:
        e = n * p
        if lam == "pearson":
            return np.asarray(((x - e) ** 2 / e).sum(-1))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(x > 0, x * np.log(x / e), 0.0)
        return np.asarray(2 * t.sum(-1))

    t_obs = float(stat(c))
    sims = np.empty(n_resamples)
    step = max(1, 2_000_000 // max(1, len(p)))
    for s in range(0, n_resamples, step):
        sims[s : s + step] = stat(rng.multinomial(n, p, size=min(step, n_resamples - s)))
    pval = (1 + int((sims >= t_obs - 1e-12).sum())) / (n_resamples + 1)
    tv, iv = tv_interval(c / max(n, 1), p, n, len(p))
    return GofResult(
        test=f"monte-carlo-{statistic}",
        statistic=t_obs,
        pvalue=pval,
        df=len(p) - 1,
        n=n,
        cells=len(p),
        tv_estimate=tv,
        tv_interval=iv,
        worst_cells=[],
        pooled_groups=0,
        note=f"{n_resamples} null simulations",
    )
