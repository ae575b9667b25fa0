"""Would a PASS that stops as soon as it is certified need fewer samples? (issue 22, item 2)

A fixed-n audit PASSes a stratum when its chi-square at the planned n does not reject; the plan's n
makes every deviation of total variation >= eps detected w.p. >= 1 - beta. The anytime-valid
alternative stops the first time the data reject H1 = {q : TV(q, m) >= eps} itself, by universal
inference (Wasserman, Ramdas and Balakrishnan 2020): with the null law m as the predictable numerator,

    R_t = L_t(m) / sup_{q in H1} L_t(q),   P_q(sup_t R_t >= 1 / beta) <= beta for every q in H1,

and since H1 is the union over cell sets S of {q(S) >= m(S) + eps}, the supremum is a binary one:
log R_t = t [min_S kl(phat(S) || m(S) + eps) - KL(phat || m)] (kl = 0 where phat(S) >= m(S) + eps).
On a uniform m the best S of each size is the cells of largest phat, so the minimum is exact here.
Only the stratum with the deviation has to be wrong for a false PASS, so beta is not split.

This script draws correct samples (from m itself, the null) and prints the tokens at which the
sequential PASS stops (median and 10% / 90% over seeds) beside the fixed chi-square's planned n,
at the audit's default rates and at alpha = beta = 0.05; a unit stops when its last stratum does:

    .venv/bin/python scripts/sequential_pass_study.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.special import rel_entr

from specverify.stats import DEFAULT_BINS, min_samples_for_tv

#: the default plan's alpha per chi-square at a round step's first Holm step: 1e-6 over 6 units,
#: half to the e-process, 8 tests per unit (strata and white-box), 3 stream components each
DEFAULT_PER_TEST_ALPHA = 1e-6 / 6 / 2 / 8 / 3
#: strata a unit certifies before it may stop (positions, pooled and white-box of a round step)
STRATA = 8


def log_r(counts: np.ndarray, m: np.ndarray, eps: float) -> float:
    """log R_t of the module docstring for one stratum's cell counts (m uniform: exact)."""
    n = counts.sum()
    ph = counts / n
    top = np.argsort(-ph)
    ps, ms = np.cumsum(ph[top])[:-1], np.cumsum(m[top])[:-1]
    y = ms + eps
    feasible = y < 1  # H1_S is empty where m(S) + eps >= 1
    yy = np.where(feasible, y, 0.5)
    kl = rel_entr(ps, yy) + rel_entr(1 - ps, 1 - yy)
    kl = np.where(ps < yy, kl, 0.0)
    best = kl[feasible].min() if feasible.any() else math.inf
    return float(n * (best - rel_entr(ph, m).sum()))


def stopping_tokens(rng: np.random.Generator, m: np.ndarray, eps: float, beta: float, *, step: int = 100) -> int:
    counts = np.zeros(len(m))
    n = 0
    while n < 10**6:
        counts += rng.multinomial(step, m)
        n += step
        if log_r(counts, m, eps) >= math.log(1 / beta):
            return n
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--eps", type=float, action="append")
    args = ap.parse_args()
    m = np.full(DEFAULT_BINS, 1 / DEFAULT_BINS)
    print(f"{DEFAULT_BINS} cells, uniform null; tokens per stratum; sequential over {args.seeds} seeds")
    print(
        "| rates | eps | fixed chi-square (plan) | sequential PASS, one stratum: median [10%, 90%] "
        f"| ratio | a unit of {STRATA} strata (all certified): median | ratio |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, alpha, beta in (
        ("defaults: alpha 1e-6 (per test 3.5e-9), beta 1e-3", DEFAULT_PER_TEST_ALPHA, 1e-3),
        ("alpha 0.05 (one test), beta 0.05", 0.05, 0.05),
    ):
        for eps in args.eps or (0.05, 0.1):
            fixed = min_samples_for_tv(eps, df=DEFAULT_BINS - 1, alpha=alpha, beta=beta)
            ns = np.array([stopping_tokens(np.random.default_rng(s), m, eps, beta) for s in range(args.seeds * STRATA)])
            med, lo, hi = np.median(ns), np.quantile(ns, 0.1), np.quantile(ns, 0.9)
            unit = np.median(ns.reshape(args.seeds, STRATA).max(axis=1))
            print(
                f"| {label} | {eps} | {fixed:,} | {med:,.0f} [{lo:,.0f}, {hi:,.0f}] | {med / fixed:.2f} "
                f"| {unit:,.0f} | {unit / fixed:.2f} |"
            )


if __name__ == "__main__":
    main()
