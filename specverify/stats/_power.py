"""Power and planning: the smallest deviation a test detects, and the samples a deviation needs.

For a chi-square test with ``df`` degrees of freedom at false-fail rate alpha, an alternative
with Cohen's effect w = sqrt(sum (pi - p)^2 / p) has noncentrality n w^2, so the test detects it
with probability >= 1 - beta once n w^2 >= lambda*(df, alpha, beta), where lambda* solves
ncx2.sf(chi2.isf(alpha, df), df, lambda*) = 1 - beta. Since w >= 2 TV (Cauchy-Schwarz, with
equality for the worst-shaped deviation), any deviation of total variation >= eps on the test's
cells is detected once n >= lambda* / (4 eps^2):

    min_detectable_tv(n) = sqrt(lambda* / n) / 2,     min_samples_for_tv(eps) = lambda* / (4 eps^2).

No test of any kind does with fewer than Le Cam's two-point bound: a test with false-fail rate
<= alpha that detects some q with probability >= 1 - beta needs n KL(q || p) >= kl(1 - beta || alpha)
(data processing on the test's decision; kl: the binary relative entropy), and the closest q at
total variation eps moves eps of mass between two halves, KL = eps ln((1 + eps) / (1 - eps)):

    samples_any_test_needs_for_tv(eps) = kl(1 - beta || alpha) / (eps ln((1 + eps) / (1 - eps))).

It ignores the number of cells (the composite alternative adds about a sqrt(cells) factor), so it
is a floor that no test reaches, not a target.

For tests on a CDF (KS, or AD through it), the DKW inequality with Massart's constant gives the
analogous pair in KS distance (TensorFlow Probability's ``statistical_testing`` recipe).
"""

from __future__ import annotations

import functools
import math

from scipy import special

__all__ = [
    "noncentrality_for_power",
    "chi2_power",
    "min_detectable_tv",
    "min_samples_for_tv",
    "min_detectable_ks",
    "min_samples_for_ks",
    "samples_any_test_needs_for_tv",
]


@functools.lru_cache(maxsize=4096)
def noncentrality_for_power(df: int, alpha: float, beta: float) -> float:
    """lambda* with P(ncx2(df, lambda*) > chi2.isf(alpha, df)) = 1 - beta."""
    if not (0 < alpha < 1 and 0 < beta < 1) or df < 1:
        raise ValueError(f"need df >= 1 and alpha, beta in (0, 1); got {df}, {alpha}, {beta}")
    # chndtrinc inverts the noncentral chi-square CDF in lambda: P(ncx2 <= crit) = beta (scipy.special,
    # as chi2.isf's chdtri; agrees with a root of ncx2.sf to 1e-12, and saves importing scipy.stats)
    return float(special.chndtrinc(special.chdtri(df, alpha), df, beta))


def chi2_power(n: int, tv: float, *, df: int, alpha: float) -> float:
    """Power against the worst-shaped deviation of total variation ``tv`` (w = 2 tv)."""
    return 1.0 - float(special.chndtr(special.chdtri(df, alpha), df, n * (2 * tv) ** 2))


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


def samples_any_test_needs_for_tv(eps: float, *, alpha: float, beta: float) -> float:
    """Le Cam's two-point floor (module docstring): fewer samples than this and no test at false-fail
    ``alpha`` detects every deviation of total variation >= ``eps`` with probability >= 1 - ``beta``."""
    if not (0 < eps < 1 and 0 < alpha < 1 and 0 < beta < 1 and alpha + beta < 1):
        raise ValueError(f"need eps, alpha, beta in (0, 1) and alpha + beta < 1; got {eps}, {alpha}, {beta}")
    power = 1 - beta
    kl = power * math.log(power / alpha) + beta * math.log(beta / (1 - alpha))
    return kl / (eps * math.log((1 + eps) / (1 - eps)))


def _dkw(n: int, rate: float) -> float:
    return math.sqrt(math.log(2 / rate) / (2 * n))


def min_detectable_ks(n: int, *, alpha: float, beta: float) -> float:
    """KS distance detected w.p. >= 1 - beta by a DKW-thresholded test at false-fail alpha."""
    return _dkw(n, alpha) + _dkw(n, beta)


def min_samples_for_ks(d: float, *, alpha: float, beta: float) -> int:
    return math.ceil(max(math.log(2 / alpha), math.log(2 / beta)) / (2 * (d / 2) ** 2))
