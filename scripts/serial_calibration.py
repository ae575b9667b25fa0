"""Calibration and power of the consecutive-pairs test (specverify.stats.serial_dependence_test).

    python scripts/serial_calibration.py                  # null study and power, about 3 minutes
    python scripts/serial_calibration.py --exact-tail     # the far tail of the statistic, computed exactly

Null study: every exact sampler of the catalogue (the reference and its decoys), block
verification, and the reference on an order-1 pair (sequences that span rounds), each on a low-
and a high-overlap pair, ``--reps`` independent runs of ``--rounds`` rounds: the p-values should be
U(0, 1) (Kolmogorov-Smirnov p-value, the share below 0.01 and 0.001, the smallest).

Power: the share of runs with p < 1e-8 (about the level one test gets inside an audit) for the
catalogue's samplers that reuse randomness across positions, at a few round counts.

Exact tail: the statistic summed over G groups of n pairs, each group's Pearson statistic of four
equiprobable cells convolved exactly, against the chi-square quantile it is read with.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
from scipy import stats
from scipy.special import gammaln

from specverify.algorithms.block_verification import verify_block_batch
from specverify.catalogue import BUGS, DECOYS
from specverify.dists import inverse_cdf_sample_many, probs_from_logits
from specverify.harness import run_sampler
from specverify.lm.synthetic import make_markov_pair, make_positional_pair
from specverify.stats import GofResult, StreamLaw, serial_dependence_test

V, GAMMA = 64, 4
#: one run: (p-value, degrees of freedom, 0 when no group had the pairs to be tested; the chi-square
#: p-value before the few-groups factor)
Run = Callable[[int, np.random.Generator], tuple[float, int, float]]


def _sampler_run(sampler: object, overlap: float, markov: bool = False) -> Run:
    pair = (
        make_markov_pair(V, alpha=overlap, seed=1) if markov else make_positional_pair(V, GAMMA, alpha=overlap, seed=1)
    )
    law = StreamLaw(pair.target_table())

    def run(n: int, rng: np.random.Generator) -> float:
        g = run_sampler(sampler, pair, n=n, gamma=GAMMA, rng=rng)  # type: ignore[arg-type]
        return _triple(serial_dependence_test(law, g.tokens, g.row, g.sequence, g.position, rng=rng))

    return run


def _triple(r: GofResult) -> tuple[float, int, float]:
    return r.pvalue, r.df, float(stats.chi2.sf(r.statistic, r.df)) if r.df else 1.0


def _block_run(overlap: float) -> Run:
    pair = make_positional_pair(V, GAMMA, alpha=overlap, seed=1)
    P, Q = probs_from_logits(pair.target_logits), probs_from_logits(pair.draft_logits)[:GAMMA]
    law = StreamLaw(P)

    def run(n: int, rng: np.random.Generator) -> float:
        x = np.stack([inverse_cdf_sample_many(Q[j], rng.random(n)) for j in range(GAMMA)], axis=1)
        r = verify_block_batch(x, Q[None], P[None], rng.random((n, GAMMA)), rng.random(n))
        k = r.num_accepted + 1
        pos = np.concatenate([np.arange(m) for m in k])
        toks = r.tokens[np.arange(GAMMA + 1)[None, :] < k[:, None]]
        return _triple(serial_dependence_test(law, toks, pos, np.repeat(np.arange(n), k), pos, rng=rng))

    return run


def null_study(reps: int, rounds: int, seed: int) -> None:
    cases: list[tuple[str, Run]] = []
    for overlap in (0.3, 0.9):
        cases += [(f"{d.name} (positional, overlap {overlap})", _sampler_run(d(), overlap)) for d in DECOYS]
        cases.append((f"block verification (positional, overlap {overlap})", _block_run(overlap)))
        cases.append((f"reference (order-1 sequences, overlap {overlap})", _sampler_run(DECOYS[0](), overlap, True)))
    print(f"null study: {reps} runs of {rounds} rounds each, V = {V}, gamma = {GAMMA}")
    print("(over the runs whose test ran: at least one group of 40 pairs; 'df' the mean degrees of freedom;")
    print(" 'raw KS' the Kolmogorov-Smirnov p-value of the chi-square p-values before the few-groups factor,")
    print(" the others of the p-values the audit uses: below 16 groups they are 3 times the raw ones, conservative)")
    head = f"{'implementation':58s} {'ran':>4s} {'df':>4s} {'raw KS':>6s} {'KS p':>6s} {'<0.01':>6s} {'<0.001':>6s}"
    print(f"{head} {'min p':>8s}")
    all_p = []
    for i, (name, run) in enumerate(cases):
        rng = np.random.default_rng([seed, i])
        res = np.array([run(rounds, rng) for _ in range(reps)])
        ran = res[res[:, 1] > 0]
        all_p.append(ran)
        print(f"{name:58s} {len(ran):4d} {ran[:, 1].mean() if len(ran) else 0:4.0f} " + _row(ran))
    ran = np.concatenate(all_p)
    print(f"{'all runs':58s} {len(ran):4d} {'':4s} " + _row(ran))


def _row(ran: np.ndarray) -> str:
    """KS of the raw p-values, then of the audit's, its shares below 0.01 and 0.001, its least."""
    if not len(ran):
        return "(no run had the pairs)"
    p, raw = ran[:, 0], ran[:, 2]
    ks_raw, ks = stats.kstest(raw, "uniform").pvalue, stats.kstest(p, "uniform").pvalue
    return f"{ks_raw:6.3f} {ks:6.3f} {np.mean(p < 0.01):6.3f} {np.mean(p < 0.001):6.4f} {p.min():8.2g}"


def power_study(reps: int, seed: int) -> None:
    names = ("randomness_shared_across_positions", "same_uniform_all_positions", "shared_noise")
    print(f"\npower: share of {reps} runs with p < 1e-8 (positional pair, V = {V}, gamma = {GAMMA})")
    print(f"{'sampler':40s} {'overlap':>7s} " + " ".join(f"{n:>7d}" for n in (250, 500, 1000, 2000)))
    for i, name in enumerate(names):
        cls = next(b for b in BUGS if b.name == name)
        for overlap in (0.3, 0.9):
            run = _sampler_run(cls(), overlap)
            rng = np.random.default_rng([seed, 100 + i])
            share = [np.mean([run(n, rng)[0] < 1e-8 for _ in range(reps)]) for n in (250, 500, 1000, 2000)]
            print(f"{name:40s} {overlap:7.1f} " + " ".join(f"{s:7.2f}" for s in share))


def _group_pmf(n: int, k: int = 4) -> tuple[np.ndarray, int]:
    """Exact law of S = sum of squared counts of multinomial(n, uniform on k = 4 cells): pmf from its least value."""
    pmf = np.zeros(n * n + 1)
    for c1 in range(n + 1):
        for c2 in range(n + 1 - c1):
            c3 = np.arange(n + 1 - c1 - c2)
            c4 = n - c1 - c2 - c3
            lp = gammaln(n + 1) - gammaln(c1 + 1) - gammaln(c2 + 1) - gammaln(c3 + 1) - gammaln(c4 + 1) - n * np.log(k)
            np.add.at(pmf, c1 * c1 + c2 * c2 + c3 * c3 + c4 * c4, np.exp(lp))
    lo, hi = np.nonzero(pmf)[0][[0, -1]]
    return pmf[lo : hi + 1], int(lo)


def exact_tail() -> None:
    print("P(X2 >= chi-square quantile) / level, exact (four equiprobable cells per group, n pairs each)")
    print(f"{'n':>5s} {'groups':>6s} " + " ".join(f"{a:>8.0e}" for a in (1e-4, 1e-6, 1e-8)))
    for n in (40, 100):
        base, lo = _group_pmf(n)
        for groups in (1, 2, 4, 8, 16, 48):
            tot = np.array([1.0])
            for _ in range(groups):
                tot = np.convolve(tot, base)
                tot[tot < 1e-300] = 0.0
            x2 = 4.0 / n * (np.arange(len(tot)) + groups * lo) - groups * n  # Pearson's X2 = (k/n) S - n per group
            sf = np.cumsum(tot[::-1])[::-1]
            ratios = [sf[np.searchsorted(x2, stats.chi2.isf(a, 3 * groups) - 1e-9)] / a for a in (1e-4, 1e-6, 1e-8)]
            print(f"{n:5d} {groups:6d} " + " ".join(f"{r:8.2f}" for r in ratios))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exact-tail", action="store_true")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--power-reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.exact_tail:
        exact_tail()
        return 0
    null_study(a.reps, a.rounds, a.seed)
    power_study(a.power_reps, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
