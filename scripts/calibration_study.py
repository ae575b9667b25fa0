"""Calibration study: how often do exact samplers get a FAIL verdict?

Runs N audits (default 1,000) of exact implementations with fresh seeds, at a large family-wise
alpha so that the false-fail rate is measurable, and prints the observed FAIL fraction with a 99%
Clopper-Pearson interval against alpha. ``--shape catalogue`` audits the exact samplers (the
reference and the decoys, in rotation); ``--shape round`` audits the correct round steps written
as users write them (tests/user_impls, in rotation) on the context pairs of the harness, declared
full rule, so the first/later strata and the white-box strata on context rows are calibrated too.

    .venv/bin/python scripts/calibration_study.py --audits 1000 --alpha 0.05
    .venv/bin/python scripts/calibration_study.py --shape round --audits 300 --alpha 0.05 --eps 0.2
    .venv/bin/python scripts/calibration_study.py --shape kernel --audits 1000 --alpha 0.05 --eps 0.1
    .venv/bin/python scripts/calibration_study.py --shape lm --audits 300 --alpha 0.05 --eps 0.3

``--shape kernel`` audits the docs' correct kernel on the default kernel plan (both overlaps, and
the odd-vocabulary unit with heavy edge ids); ``--shape lm`` audits specverify's chain runner on
``lm_pairs`` at the request level (settings units, the stop unit with its stop count, a 64-token long
unit with its offset buckets; the seed check is exact, so it is left out with the greedy check).
"""

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from specverify import SamplingSettings
from specverify.audit import RoundAdapter, SamplerAdapter, audit
from specverify.catalogue import DECOYS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

ap = argparse.ArgumentParser()
ap.add_argument("--audits", type=int, default=1000)
ap.add_argument("--alpha", type=float, default=0.05)
ap.add_argument("--eps", type=float, default=0.1)
ap.add_argument("--shape", choices=["catalogue", "round", "kernel", "lm"], default="catalogue")
ap.add_argument("--first-seed", type=int, default=10_000, help="seed of the first audit (more audits: continue a run)")
ap.add_argument("--every", type=int, default=0, help="print the running count every N audits (0: at the end only)")
args = ap.parse_args()


def subjects():
    """(name, adapter factory) of the exact implementations audited in rotation."""
    if args.shape == "kernel":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "examples"))
        from kernel import verify

        from specverify.audit import KernelAdapter

        return [("docs/examples/kernel.py:verify", lambda: KernelAdapter(verify))]
    if args.shape == "catalogue":
        return [(cls.name, lambda cls=cls: SamplerAdapter(cls())) for cls in DECOYS]
    from user_impls import CASES

    out = []
    for c in CASES:
        # full rule with drafts from q and a bonus token (mixture drafts, first-row drafts and a dropped
        # bonus are exact but not the full rule, so a declared full rule would rightly fail them)
        not_full = ("mixture_draft", "same_row_drafts", "no_bonus")
        if (
            c["shape"] == "round"
            and not c["buggy"]
            and not c["flags"]
            and not c.get("rounds")
            and not c["spec"].endswith(not_full)
        ):
            mod, fn = c["spec"].split(":")
            out.append(
                (c["spec"], lambda mod=mod, fn=fn: RoundAdapter(getattr(importlib.import_module(mod), fn), rule="full"))
            )
    return out


def lm_audit(make, *, seed, alpha, eps, **_):
    """One request-level LM audit of a correct generator (fresh seeds, pairs of their own)."""
    from specverify.audit import audit_lm_pairs, lm_pairs

    return audit_lm_pairs(
        make, lm_pairs(vocab=64, seed=seed % 7), seed=seed, alpha=alpha, eps=eps, greedy_check=False,
        settings=(SamplingSettings(temperature=0.9),), long_length=64,
    )  # fmt: skip


if args.shape == "lm":
    import torch

    from specverify.runners import speculative_generate

    torch.set_num_threads(1)

    def _runner(target, draft):
        def generate(prompt, n, seed, s):
            return speculative_generate(target, draft, prompt, n, s, torch.Generator().manual_seed(seed)).tokens

        return generate

    subjects = lambda: [("specverify.runners.speculative_generate", lambda: _runner)]  # noqa: E731


t0 = time.time()
fails, pvals = 0, []
per = {}
subj = subjects()
for i in range(args.audits):
    name, make = subj[i % len(subj)]
    v = (lm_audit if args.shape == "lm" else audit)(
        make(),
        seed=args.first_seed + i,
        alpha=args.alpha,
        eps=args.eps,
        exact_checks=False,
        settings=(SamplingSettings(), SamplingSettings(temperature=0.7, top_p=0.9)),
    )
    f = v.status == "FAIL"
    fails += f
    if f and args.every:  # which test failed: the new request-level tests are calibrated with the rest
        check, stratum, _ = v.first_failure()
        print(f"  FAIL seed {args.first_seed + i} {name}: {check.name} / {stratum}", flush=True)
    per.setdefault(name, [0, 0])
    per[name][0] += f
    per[name][1] += 1
    pvals.append(min(c.pvalue for c in v.checks if c.pvalue is not None))
    if args.every and (i + 1) % args.every == 0:
        print(f"  {i + 1} audits (seeds {args.first_seed}..{args.first_seed + i}): {fails} FAIL, "
              f"{time.time() - t0:.0f} s", flush=True)  # fmt: skip
ci = stats.binomtest(fails, args.audits).proportion_ci(0.99, method="exact")
print(
    f"{args.audits} audits of exact {args.shape} implementations at family-wise alpha {args.alpha}: {fails} FAIL "
    f"({fails / args.audits:.4f}; 99% CI [{ci.low:.4f}, {ci.high:.4f}]) in {time.time() - t0:.0f} s"
)
for k, (f, n) in per.items():
    print(f"  {k:32s} {f}/{n}")
p = np.array(pvals)
print(f"min adjusted p-value per audit: fraction <= 0.01: {(p <= 0.01).mean():.4f}, <= 0.1: {(p <= 0.1).mean():.4f}")
