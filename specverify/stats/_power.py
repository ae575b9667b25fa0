"""Power and planning: the smallest deviation a test detects, and the samples a deviation needs.

For a chi-square test with ``df`` degrees of freedom at false-fail rate alpha, an alternative
with Cohen's effect w = sqrt(sum (pi - p)^2 / p) has noncentrality n w^2, so the test detects it
with probability >= 1 - beta once n w^2 >= lambda*(df, alpha, beta), where lambda* solves
ncx2.sf(chi2.isf(alpha, df), df, lambda*) = 1 - beta. Since w >= 2 TV (Cauchy-Schwarz, with
equality for the worst-shaped deviation), any deviation of total variation >= eps on the test's
cells is detected once n >= lambda* / (4 eps^2):

    min_detectable_tv(n) = sqrt(lambda* / n) / 2,     min_samples_for_tv(eps) = lambda* / (4 eps^2).

For tests on a CDF (KS, or AD through it), the DKW inequality with Massart's constant gives the
analogous pair in KS distance (TensorFlow Probability's ``statistical_testing`` recipe).
"""

from __future__ import annotations

import functools
import math

from scipy import optimize, stats

__all__ = [
    "noncentrality_for_power",
    "chi2_power",
    "min_detectable_tv",
    "min_samples_for_tv",
    "min_detectable_ks",
    "min_samples_for_ks",
]


@functools.lru_cache(maxsize=4096)
def noncentrality_for_power(df: int, alpha: float, beta: float) -> float:
    """lambda* with P(ncx2(df, lambda*) > chi2.isf(alpha, df)) = 1 - beta."""
    if not (0 < alpha < 1 and 0 < beta < 1) or df < 1:
        raise ValueError(f"need df >= 1 and alpha, beta in (0, 1); got {df}, {alpha}, {beta}")
    crit = stats.chi2.isf(alpha, df)

    def f(lam: float) -> float:
        return float(stats.ncx2.sf(crit, df, lam)) - (1 - beta)

    hi = 1.0
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 1e-9, hi, xtol=1e-10, rtol=1e-12))


def chi2_power(n: int, tv: float, *, df: int, alpha: float) -> float:
    """Power against the worst-shaped deviation of total variation ``tv`` (w = 2 tv)."""
    crit = stats.chi2.isf(alpha, df)
    return float(stats.ncx2.sf(crit, df, n * (2 * tv) ** 2))


def min_detectable_tv(n: int, *, df: int, alpha: float, beta: float) -> float:
    """Smallest total variation (on the test's cells) detected with probability >= 1 - beta."""
    if n <= 0:
        return math.inf
    return math.sqrt(noncentrality_for_power(df, alpha, beta) / n) / 2


def min_samples_for_tv(eps: float, *, df: int, alpha: float, beta: float) -> int:
    """Samples needed so that every deviation of total variation >= eps is detected w.p. >= 1 - beta."""
    if eps <= 0:
        raise ValueError("eps must be > 0")
    return math.ceil(noncentrality_for_power(df, alpha, beta) / (4 * eps * eps))


def _dkw(n: int, rate: float) -> float:
    return math.sqrt(math.log(2 / rate) / (2 * n))


def min_detectable_ks(n: int, *, alpha: float, beta: float) -> float:
    """KS distance detected w.p. >= 1 - beta by a DKW-thresholded test at false-fail alpha."""
    return _dkw(n, alpha) + _dkw(n, beta)


def min_samples_for_ks(d: float, *, alpha: float, beta: float) -> int:
    return math.ceil(max(math.log(2 / alpha), math.log(2 / beta)) / (2 * (d / 2) ** 2))
