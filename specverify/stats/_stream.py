"""Tests for a stream of emitted tokens whose laws are known row by row.

Each emitted token t comes with the index r_t of the row of a probability table ``table`` [M, V]
that is its exact law under H0 (the target's distribution given its true prefix, or given its
position in the round). All projections below are predictable: they depend on the law only,
never on the emitted token, so the binned counts are sums of independent categorical draws
(Anderson and Goodman's "stack of cards" argument), and Pearson's statistic on them is
asymptotically chi-square.

Projections (each maps token x under row r to a cell):

* ``sorted_mass``: the row's tokens sorted by descending probability (ties by id) are cut into B
  bins of about equal mass (a token heavier than 1/B keeps a bin of its own). Every deviation that
  moves mass along the probability ranking (temperature, top-k / top-p / min-p mismatch, a
  misreported q, a flattened residual) shows here, at any vocabulary size;
* ``rank``: the K most probable tokens of the row each in its own cell, plus one 'rest' cell;
* ``hash``: a salted random map of token ids onto B buckets, which keeps, in expectation, a share
  1 - 1/B of any deviation's squared l2 size whatever its shape;
* ``pit``: the randomized probability integral transform in descending-probability order,
  u = F(rank - 1) + V p(x), i.i.d. U(0, 1) under H0, tested with Anderson-Darling (and in id
  order, the order an inverse-CDF sampler walks);
* ``loglik-score``: sum of log p(x) against its expectation, the locally most powerful
  statistic against a temperature change, with a Chernoff-bound p-value.

Plain Pearson over all V cells is deliberately *not* the default: over a sparse vocabulary it is
biased against deviations that move mass out of rare tokens (its mean can fall below its null mean)
and can have power below alpha at TV 0.4 (see ``specverify.bench.baselines.plain_pearson_stream_test``
and the catalogue).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ._anderson import anderson_darling_uniform
from ._gof import cells_result, pool_cells, tv_interval
from ._multiple import holm
from ._power import min_detectable_tv
from ._results import Cell, GofResult

__all__ = [
    "StreamLaw",
    "binned_stream_test",
    "pit_values",
    "pit_test",
    "loglik_score_test",
    "default_stream_test",
    "StreamTestResult",
    "DEFAULT_BINS",
    "DEFAULT_COMPONENTS",
    "DEFAULT_COMPONENT_NAMES",
    "stratified_stream_test",
    "zero_mass_failure",
]

#: emitted tokens or row indices, one per token (anything numpy can index with)
Indices = np.ndarray | Sequence[int]

DEFAULT_BINS = 32
#: the projections default_stream_test runs, in its order (Bonferroni-combined over all of them)
DEFAULT_COMPONENT_NAMES = (
    "sorted-mass bins",
    "top-K + rest",
    "salted hash buckets",
    "PIT / Anderson-Darling",
    "PIT / Anderson-Darling in id order",
    "log-likelihood score",
)
DEFAULT_COMPONENTS = len(DEFAULT_COMPONENT_NAMES)
DEFAULT_TOPK = 16


class StreamLaw:
    """Per-row precomputations for a probability table [M, V] (float64, rows sum to one)."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = np.asarray(table, dtype=np.float64)
        m, v = self.table.shape
        # Descending probability, ties by lowest id: stable sort of -p.
        self.order = np.argsort(-self.table, axis=1, kind="stable")  # [M, V] token at each rank
        self.rank = np.empty_like(self.order)
        np.put_along_axis(self.rank, self.order, np.arange(v)[None, :].repeat(m, 0), axis=1)
        sorted_p = np.take_along_axis(self.table, self.order, axis=1)
        self.cum_excl = np.cumsum(sorted_p, axis=1) - sorted_p  # [M, V] mass before each rank
        self.cum_id_excl = np.cumsum(self.table, axis=1) - self.table  # [M, V] mass before each id
        self.row_max = self.table.max(axis=1)  # [M]
        self._bins: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray, list[str]]] = {}

    @property
    def vocab_size(self) -> int:
        return int(self.table.shape[1])

    def cells(self, kind: str, n_cells: int, salt: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(cell_of [M, V], cell_mass [M, C], labels) for a projection."""
        key = (kind, n_cells, salt)
        if key in self._bins:
            return self._bins[key]
        m, v = self.table.shape
        if kind == "sorted_mass":
            # cell of a token = floor(B * (mass before its midpoint)), so each bin holds ~1/B.
            mid = self.cum_excl + 0.5 * np.take_along_axis(self.table, self.order, axis=1)
            cell_sorted = np.minimum((mid * n_cells).astype(np.int64), n_cells - 1)
            cell_of = np.empty_like(cell_sorted)
            np.put_along_axis(cell_of, self.order, cell_sorted, axis=1)
            labels = [f"mass bin {i + 1}/{n_cells} (by descending p)" for i in range(n_cells)]
        elif kind == "rank":
            cell_of = np.minimum(self.rank, n_cells)
            labels = [f"rank {i + 1} token" for i in range(n_cells)] + ["all other tokens"]
            n_cells += 1
        elif kind == "hash":
            buckets = np.random.default_rng(salt).integers(0, n_cells, v)
            cell_of = np.broadcast_to(buckets, (m, v))
            labels = [f"hash bucket {i} (salt {salt})" for i in range(n_cells)]
        else:
            raise ValueError(f"unknown projection {kind!r}; use 'sorted_mass', 'rank' or 'hash'")
        mass = np.zeros((m, n_cells))
        np.add.at(mass, (np.arange(m)[:, None].repeat(v, 1), cell_of), self.table)
        self._bins[key] = (cell_of, mass, labels)
        return self._bins[key]


def zero_mass_failure(test: str, law: StreamLaw, tokens: Indices, rows: Indices) -> GofResult | None:
    """The exact failure of a stream that holds tokens of probability 0 under ``law`` (None if none)."""
    p = law.table[rows, tokens]
    bad = p <= 0
    if bad.any():
        n = len(tokens)
        where = np.nonzero(bad)[0][:5]
        cells = [Cell(f"token {int(tokens[i])} under row {int(rows[i])}", 1.0, 0.0) for i in where]
        frac = float(bad.mean())
        return GofResult.exact_failure(
            test,
            n=n,
            why=f"{int(bad.sum())} emitted token(s) had probability 0 under the target law",
            tv_estimate=frac,
            tv_interval=(frac, 1.0),
            worst_cells=cells,
        )
    return None


def binned_stream_test(
    law: StreamLaw,
    tokens: ArrayLike,
    rows: ArrayLike,
    *,
    kind: str = "sorted_mass",
    n_cells: int = DEFAULT_BINS,
    salt: int = 0,
    min_expected: float = 5.0,
) -> GofResult:
    """Pearson test of the projected counts against their expectation sum_t mass[r_t]."""
    tokens = np.asarray(tokens, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    z = zero_mass_failure(f"{kind}-bins", law, tokens, rows)
    if z:
        return z
    cell_of, mass, labels = law.cells(kind, n_cells, salt)
    c = mass.shape[1]
    obs = np.bincount(cell_of[rows, tokens], minlength=c).astype(np.float64)
    exp = np.bincount(rows, minlength=mass.shape[0]).astype(np.float64) @ mass
    g = pool_cells(exp, min_expected)
    k = g.max() + 1 if (g >= 0).any() else 0
    o = np.bincount(g[g >= 0], weights=obs[g >= 0], minlength=k)
    e = np.bincount(g[g >= 0], weights=exp[g >= 0], minlength=k)
    lab, pooled = [], []
    for j in range(k):
        members = np.nonzero(g == j)[0]
        pooled.append([int(i) for i in members])
        lab.append(
            labels[members[0]]
            if len(members) == 1
            else " + ".join(labels[i] for i in members[:3]) + ("..." if len(members) > 3 else "")
        )
    groups = int(sum((g == j).sum() > 1 for j in range(k)))
    return cells_result(f"{kind}-bins", o, e, lab, lambda_="pearson", pooled_groups=groups, members=pooled)


def pit_values(
    law: StreamLaw, tokens: ArrayLike, rows: ArrayLike, rng: np.random.Generator, *, order: str = "probability"
) -> np.ndarray:
    """Randomized PIT: u = F(x-) + V p(x), V ~ U(0, 1), with F over the tokens in descending
    target probability (``order='probability'``, default) or in id order (``order='id'``, the
    order an inverse-CDF sampler walks, along which RNG-reuse bugs move mass)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    base = law.cum_id_excl[rows, tokens] if order == "id" else law.cum_excl[rows, law.rank[rows, tokens]]
    return np.asarray(base + rng.random(len(tokens)) * law.table[rows, tokens])


def pit_test(
    law: StreamLaw,
    tokens: Indices,
    rows: Indices,
    rng: np.random.Generator,
    *,
    method: str = "ad",
    order: str = "probability",
) -> GofResult:
    """Uniformity of the PIT values: 'ad' (Anderson-Darling, default), 'ks', or 'binned' (20 bins)."""
    z = zero_mass_failure(f"pit-{method}", law, tokens, rows)
    if z:
        return z
    u = pit_values(law, tokens, rows, rng, order=order)
    n = len(u)
    if n == 0:
        return GofResult.empty(f"pit-{method}", why="no tokens")
    hist = np.bincount(np.minimum((u * 10).astype(int), 9), minlength=10).astype(float)
    tv, iv = tv_interval(hist / n, np.full(10, 0.1), n, 10)
    cells = [Cell(f"PIT decile {i + 1}", hist[i], n / 10) for i in np.argsort(-np.abs(hist - n / 10))[:3]]
    if method == "ad":
        a2, p = anderson_darling_uniform(u)
        return GofResult(
            test="pit-anderson-darling" + ("-id-order" if order == "id" else ""),
            statistic=a2,
            pvalue=p,
            df=0,
            n=n,
            cells=10,
            tv_estimate=tv,
            tv_interval=iv,
            worst_cells=cells,
            pooled_groups=0,
        )
    if method == "ks":
        from scipy import stats  # imported where used: a PASS at defaults never imports scipy.stats

        r = stats.kstest(u, "uniform")
        return GofResult(
            test="pit-ks",
            statistic=float(r.statistic),
            pvalue=float(r.pvalue),
            df=0,
            n=n,
            cells=10,
            tv_estimate=tv,
            tv_interval=iv,
            worst_cells=cells,
            pooled_groups=0,
        )
    if method == "binned":
        h = np.bincount(np.minimum((u * 20).astype(int), 19), minlength=20).astype(float)
        return cells_result(
            "pit-binned", h, np.full(20, n / 20), [f"PIT bin {i + 1}/20" for i in range(20)], lambda_="pearson"
        )
    raise ValueError(f"unknown method {method!r}; use 'ad', 'ks' or 'binned'")


def _chernoff_two_sided(logp: np.ndarray, w: np.ndarray, mu: np.ndarray, s: float) -> float:
    """2 exp(min over theta of log K) for the score S = s (loglik_score_test): rows ``logp`` [R, V]
    with weights ``w`` [R] and entropies' negatives ``mu`` [R]."""
    from scipy import optimize

    top = logp.max(axis=1)  # finite: every row has mass
    shifted = logp - top[:, None]  # <= 0, -inf where p = 0
    buf = np.empty_like(shifted)

    def log_bound(theta: float) -> float:  # log of the Chernoff bound on P(sign * S >= |s|), sign = sign of s
        th = theta if s > 0 else -theta
        # logsumexp((1 + th) logp) per row, shifted by its max by hand: the hot loop of this test
        np.multiply(shifted, 1.0 + th, out=buf)
        np.exp(buf, out=buf)
        lse = np.log(buf.sum(axis=1)) + (1.0 + th) * top
        k = np.sum(w * (lse - th * mu))
        return float(k - theta * abs(s))

    hi = 50.0 if s > 0 else 1.0 - 1e-9  # p^(1 + theta) must keep a positive exponent
    res = optimize.minimize_scalar(log_bound, bounds=(0.0, hi), method="bounded", options={"xatol": 1e-7})
    return min(1.0, 2.0 * math.exp(min(0.0, res.fun)))


def loglik_score_test(law: StreamLaw, tokens: ArrayLike, rows: ArrayLike) -> GofResult:
    """Score test in the temperature direction: S = sum_t (log p_r(x_t) - E_r[log p]).

    Sharpening or flattening a law (a temperature applied twice or not at all, a top-k / top-p /
    penalty mismatch) moves E[log p(x)] first, and S is the locally most powerful statistic against
    p^(1/T) / Z. Its p-value is a two-sided Chernoff bound from the exact cumulant generating
    function K(theta) = sum_t log sum_x p_r(x)^(1 + theta) - theta E_r[log p] (a bound, valid at
    any n; conservative by a factor of order theta * sd(S) in the far tail).
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    z = zero_mass_failure("loglik-score", law, tokens, rows)
    if z:
        return z
    n = len(tokens)
    if n == 0:
        return GofResult.empty("loglik-score", df=1, why="no tokens")
    cnt = np.bincount(rows, minlength=law.table.shape[0])
    used = np.nonzero(cnt)[0]
    tab, w = law.table[used], cnt[used].astype(np.float64)
    with np.errstate(divide="ignore"):
        logp = np.log(tab)  # -inf where p = 0: those terms vanish from every sum below
    mu = np.sum(np.where(tab > 0, tab * np.where(tab > 0, logp, 0.0), 0.0), axis=1)
    s = float(np.sum(np.log(law.table[rows, tokens])) - np.sum(w * mu))

    p = _chernoff_two_sided(logp, w, mu, s)
    var = np.sum(w * (np.sum(np.where(tab > 0, tab * np.where(tab > 0, logp, 0.0) ** 2, 0.0), axis=1) - mu**2))
    zscore = s / math.sqrt(var) if var > 0 else 0.0
    direction = (
        "sharper than the target (more mass on likely tokens)"
        if s > 0
        else "flatter than the target (more mass on unlikely tokens)"
    )
    return GofResult(
        test="loglik-score",
        statistic=zscore,
        pvalue=p,
        df=1,
        n=n,
        cells=0,
        tv_estimate=0.0,
        tv_interval=(0.0, 1.0),
        worst_cells=[],
        pooled_groups=0,
        note=f"mean log p of the emitted tokens {s / n:+.4f} nats from its expectation (z = {zscore:.2f}): "
        f"{direction}; Chernoff bound",
    )


@dataclasses.dataclass
class StreamTestResult:
    """The default test over one stratum: DEFAULT_COMPONENTS (six) projections, Bonferroni-combined."""

    stratum: str
    n: int
    pvalue: float  # min over components times their number (Bonferroni), capped at 1
    components: list[GofResult]
    min_detectable_tv: float  # on the sorted-mass projection, at (alpha_component, beta)

    @property
    def worst(self) -> GofResult:
        return min(self.components, key=lambda r: r.pvalue)


def default_stream_test(
    law: StreamLaw,
    tokens: Indices,
    rows: Indices,
    *,
    rng: np.random.Generator,
    alpha: float = 1e-6,
    beta: float = 1e-3,
    stratum: str = "all",
    n_bins: int = DEFAULT_BINS,
    top_k: int = DEFAULT_TOPK,
    salt: int | None = None,
) -> StreamTestResult:
    """specverify's default test for one stratum: sorted-mass bins, top-K + rest, salted hash
    buckets, PIT/Anderson-Darling in probability order and in id order, and the log-likelihood
    score test (``DEFAULT_COMPONENT_NAMES``), combined by Bonferroni (p = 6 min p_i; ``DEFAULT_COMPONENTS``).

    The power statement uses the sorted-mass projection alone, at alpha / 6: every deviation whose
    projection onto those bins has TV >= min_detectable_tv is detected with probability >= 1 - beta.
    """
    if salt is None:
        salt = int(rng.integers(2**31))
    comps = [
        binned_stream_test(law, tokens, rows, kind="sorted_mass", n_cells=n_bins),
        binned_stream_test(law, tokens, rows, kind="rank", n_cells=top_k),
        binned_stream_test(law, tokens, rows, kind="hash", n_cells=n_bins, salt=salt),
        pit_test(law, tokens, rows, rng, method="ad"),
        pit_test(law, tokens, rows, rng, method="ad", order="id"),
        loglik_score_test(law, tokens, rows),
    ]  # in the order of DEFAULT_COMPONENT_NAMES
    assert len(comps) == DEFAULT_COMPONENTS
    p = min(1.0, len(comps) * min(c.pvalue for c in comps))
    n = len(tokens)
    df = max(1, comps[0].df)
    mde = min_detectable_tv(n, df=df, alpha=alpha / len(comps), beta=beta) if n else math.inf
    comps[0].min_detectable_tv, comps[0].power_alpha, comps[0].power_beta = mde, alpha / len(comps), beta
    return StreamTestResult(stratum, n, p, comps, mde)


def stratified_stream_test(
    law: StreamLaw,
    tokens: ArrayLike,
    rows: ArrayLike,
    strata: ArrayLike,
    *,
    rng: np.random.Generator,
    alpha: float = 1e-6,
    beta: float = 1e-3,
    include_pooled: bool = True,
    extra_family: int = 0,
) -> tuple[list[StreamTestResult], np.ndarray]:
    """default_stream_test per stratum (and pooled), Holm-adjusted across them.

    Each stratum's power statement (min_detectable_tv) is made at the first Holm step,
    alpha / (strata + extra_family), where extra_family counts other tests the caller puts in the
    same Holm family (the white-box strata of an audit).

    Returns (results, holm_adjusted_pvalues)."""
    tokens, rows, strata = (np.asarray(a) for a in (tokens, rows, strata))
    labels = sorted(set(strata.tolist()))
    alpha = alpha / (len(labels) + (1 if include_pooled and len(labels) > 1 else 0) + extra_family)
    results = []
    if include_pooled and len(labels) > 1:
        results.append(default_stream_test(law, tokens, rows, rng=rng, alpha=alpha, beta=beta, stratum="all positions"))
    for s in labels:
        m = strata == s
        results.append(
            default_stream_test(law, tokens[m], rows[m], rng=rng, alpha=alpha, beta=beta, stratum=f"position {s}")
        )
    adj = holm([r.pvalue for r in results])
    return results, adj
