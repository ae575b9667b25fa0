"""Baselines the benchmarks compare specverify's tests against: the textbook Pearson test over every
cell, and vLLM's per-position chi-square. For comparison only: not part of the statistics API."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ..stats import GofResult, StreamLaw, tv_interval, zero_mass_failure

__all__ = ["plain_pearson_stream_test", "vllm_position_chi2"]


def plain_pearson_stream_test(law: StreamLaw, tokens: npt.ArrayLike, rows: npt.ArrayLike) -> GofResult:
    """Pearson over every (row, token) cell with positive probability, no pooling, chi-square
    p-value: the textbook test with the sparse-vocabulary blind spot. For comparison only."""
    from scipy import stats

    tokens = np.asarray(tokens, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    m, v = law.table.shape
    obs = np.bincount(rows * v + tokens, minlength=m * v).astype(float)
    exp = (np.bincount(rows, minlength=m)[:, None] * law.table).ravel()
    keep = exp > 0
    if (obs[~keep] > 0).any():
        failure = zero_mass_failure("plain-pearson", law, tokens, rows)
        assert failure is not None  # a token of probability 0 was counted
        return failure
    x2 = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    used_rows = np.unique(rows)
    df = int(sum((law.table[r] > 0).sum() - 1 for r in used_rows))
    n = len(tokens)
    tv, iv = tv_interval(obs[keep] / n, exp[keep] / n, n, int(keep.sum()))
    return GofResult(
        test="plain-pearson",
        statistic=x2,
        pvalue=float(stats.chi2.sf(x2, df)),
        df=df,
        n=n,
        cells=int(keep.sum()),
        tv_estimate=tv,
        tv_interval=iv,
        worst_cells=[],
        pooled_groups=0,
    )


def vllm_position_chi2(law: StreamLaw, tokens: npt.ArrayLike, rows: npt.ArrayLike) -> tuple[bool, GofResult]:
    """The way vLLM tests (MRV2 probabilistic rejection sampler): per position, Pearson with
    cells of expected count < 5 merged into one 'other' cell, rejecting when
    X^2 > df + 10 sqrt(2 df). Returns (rejected, result). For comparison only.

    Faithful to that test, a token of target probability 0 is counted in the merged 'other'
    cell like any rare token (the test has no support check; specverify's tests have one); only
    an 'other' cell of expected count 0 that received tokens makes X^2 infinite."""
    tokens = np.asarray(tokens, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    m, v = law.table.shape
    n = len(tokens)
    cnt = np.bincount(rows, minlength=m)
    # Only rows whose largest cell can reach an expected count of 5 can hold a kept cell.
    cand = np.nonzero(cnt * law.row_max >= 5)[0]
    e_rows = law.table[cand] * cnt[cand, None]
    r_i, t_i = np.nonzero(e_rows >= 5)
    big_codes = cand[r_i] * v + t_i  # sorted: cand and the row-major nonzero scan are ordered
    e_big = e_rows[r_i, t_i]
    codes, counts = np.unique(rows * v + tokens, return_counts=True)
    at = np.minimum(np.searchsorted(codes, big_codes), max(len(codes) - 1, 0))
    o_big = (
        np.where((len(codes) > 0) & (codes[at] == big_codes), counts[at], 0).astype(float)
        if len(codes)
        else np.zeros(len(big_codes))
    )
    # Faithful to that test, a token of probability 0 is counted in 'other' like any rare token.
    o, e = np.append(o_big, n - o_big.sum()), np.append(e_big, max(0.0, n - float(e_big.sum())))
    keep = e > 1e-9 * max(n, 1)
    impossible = bool((o[~keep] > 0).any())
    o, e = o[keep], e[keep]
    x2 = math.inf if impossible else float(((o - e) ** 2 / e).sum())
    df = len(o) - 1
    from scipy import stats

    res = GofResult(
        test="vllm-chi2",
        statistic=x2,
        pvalue=float(stats.chi2.sf(x2, df)) if df > 0 else 1.0,
        df=df,
        n=len(tokens),
        cells=len(o),
        tv_estimate=0.0,
        tv_interval=(0.0, 1.0),
        worst_cells=[],
        pooled_groups=1,
        note="decision by the threshold df + 10 sqrt(2 df), not by this p-value",
    )
    return impossible or (df > 0 and x2 > df + 10 * math.sqrt(2 * df)), res
