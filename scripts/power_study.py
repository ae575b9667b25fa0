"""Power study: (1) the power function's predictions against simulated detection rates;
(2) which uniformity test to run on the PIT values (Anderson-Darling, KS, binned chi-square).

    .venv/bin/python scripts/power_study.py --replicates 200
"""

import argparse

import numpy as np

from specverify import stats as S
from specverify.catalogue import bugs
from specverify.dists import softmax
from specverify.harness import run_sampler
from specverify.lm import llm_like_logits, make_positional_pair

ap = argparse.ArgumentParser()
ap.add_argument("--replicates", type=int, default=200)
args = ap.parse_args()
R = args.replicates

# (1) predicted vs simulated power of the sorted-mass Pearson test at position 0.
print("(1) sorted-mass bins, position 0 of the round, alpha 1e-3: predicted (noncentral chi-square) vs simulated power")
V, G = 64, 4
pair = make_positional_pair(V, G, alpha=0.7, seed=1)
law = S.StreamLaw(pair.target_table(None))
cell_of, mass, _ = law.cells("sorted_mass", S.DEFAULT_BINS)
for cls in [
    bugs.ReplacementFromP,
    bugs.ResidualSoftmax,
    bugs.ReuseAcceptUniform,
    bugs.SharedNoise,
    bugs.ArgmaxDraftSoftQ,
]:
    # The bug's exact law at position 0, projected onto the bins, from a very large run.
    big = run_sampler(cls(), pair, n=400_000, gamma=G, rng=np.random.default_rng(123))
    m0 = big.position == 0
    emp = np.bincount(cell_of[0, big.tokens[m0]], minlength=mass.shape[1]) / m0.sum()
    p0 = mass[0]
    keep = p0 > 0
    df = int(keep.sum()) - 1
    # Plug-in chi-square distance, bias-corrected for the finite reference run (E = w2 + df / N).
    w2 = max(float(((emp[keep] - p0[keep]) ** 2 / p0[keep]).sum()) - df / m0.sum(), 1e-12)
    from scipy import stats

    # Size the run so that the predicted power is about 1/2, where a mismatch would show.
    frac0 = 1.0  # every round emits a position-0 token
    n = int(S.noncentrality_for_power(df, 1e-3, 0.5) / w2 / frac0)
    if n * p0[keep].min() < 1:
        print(f"  {cls.name:28s} n={n:6d} rounds: outside the asymptotic regime (expected cell counts < 1); skipped")
        continue
    crit = stats.chi2.isf(1e-3, df)
    pred = float(stats.ncx2.sf(crit, df, n * w2))
    hits = 0
    rng = np.random.default_rng(7)
    for _r in range(R):
        g = run_sampler(cls(), pair, n=n, gamma=G, rng=rng)
        m = g.position == 0
        res = S.binned_stream_test(law, g.tokens[m], g.row[m], min_expected=0.0)
        hits += res.pvalue <= 1e-3
    rate = hits / R
    se = np.sqrt(max(pred * (1 - pred), 1e-4) / R)
    print(
        f"  {cls.name:28s} n={n:6d} rounds  w^2={w2:.5f}  predicted {pred:.3f}  simulated {rate:.3f} +- {2 * se:.3f} "
        "(2 SE)"
    )

# (2) PIT uniformity tests: power against small deviations, 50 contexts, V = 1000, 5,000 tokens;
# and the log-likelihood score test that sits beside them in the default test.
print("(2) PIT uniformity tests at alpha 0.01, descending-probability order, 5,000 tokens over 50 contexts, V = 1000")
rng = np.random.default_rng(3)
logits = llm_like_logits(rng, 50, 1000)
table = softmax(logits)
law = S.StreamLaw(table)


def run(alt_table, label):
    res = {"ad": 0, "ks": 0, "binned": 0, "score": 0}
    for _r in range(R):
        rows = rng.integers(0, 50, 5000)
        cum = np.cumsum(alt_table[rows], axis=1)
        toks = (cum < rng.random(5000)[:, None] * cum[:, -1:]).sum(1)
        for m in ("ad", "ks", "binned"):
            res[m] += S.pit_test(law, toks, rows, rng, method=m).pvalue <= 0.01
        res["score"] += S.loglik_score_test(law, toks, rows).pvalue <= 0.01
    tv = 0.5 * np.abs(alt_table - table).sum(1).mean()
    print(
        f"  {label:28s} TV {tv:.3f}: AD {res['ad'] / R:.2f}  KS {res['ks'] / R:.2f}  binned {res['binned'] / R:.2f}"
        f"  | log-likelihood score (Chernoff) {res['score'] / R:.2f}"
    )


run(table, "null (no deviation)")
run(softmax(logits / 1.03), "temperature 1.03")
run(softmax(logits / 0.97), "temperature 0.97")
run(0.98 * table + 0.02 / 1000, "2% uniform mixture")
