"""Calibration study: how often do exact samplers get a FAIL verdict?

Runs N audits (default 1,000) of the exact samplers (the reference and the decoys, in rotation)
with fresh seeds, at a large family-wise alpha so that the false-fail rate is measurable, and
prints the observed FAIL fraction with a 99% Clopper-Pearson interval against alpha.

    .venv/bin/python scripts/calibration_study.py --audits 1000 --alpha 0.05
"""

import argparse
import time

import numpy as np
from scipy import stats

from specverify import SamplingSettings
from specverify.audit import SamplerAdapter, audit
from specverify.catalogue import DECOYS

ap = argparse.ArgumentParser()
ap.add_argument("--audits", type=int, default=1000)
ap.add_argument("--alpha", type=float, default=0.05)
ap.add_argument("--eps", type=float, default=0.1)
args = ap.parse_args()

t0 = time.time()
fails, pvals = 0, []
per = {}
for i in range(args.audits):
    cls = DECOYS[i % len(DECOYS)]
    v = audit(SamplerAdapter(cls()), seed=10_000 + i, alpha=args.alpha, eps=args.eps, exact_checks=False,
              settings=(SamplingSettings(), SamplingSettings(temperature=0.7, top_p=0.9)))
    f = v.status == "FAIL"
    fails += f
    per.setdefault(cls.name, [0, 0])
    per[cls.name][0] += f
    per[cls.name][1] += 1
    pvals.append(min(c.pvalue for c in v.checks if c.pvalue is not None))
ci = stats.binomtest(fails, args.audits).proportion_ci(0.99, method="exact")
print(f"{args.audits} audits of exact samplers at family-wise alpha {args.alpha}: {fails} FAIL "
      f"({fails / args.audits:.4f}; 99% CI [{ci.low:.4f}, {ci.high:.4f}]) in {time.time() - t0:.0f} s")
for k, (f, n) in per.items():
    print(f"  {k:32s} {f}/{n}")
p = np.array(pvals)
print(f"min adjusted p-value per audit: fraction <= 0.01: {(p <= 0.01).mean():.4f}, <= 0.1: {(p <= 0.1).mean():.4f}")
