"""Power of the request-level tests of a round step's default plan (issue 21), at their default sizes.

    .venv/bin/python scripts/power_request_tests.py [--trials 2000]

Runs the default audit of docs/examples/round_step.py (eps 0.05, alpha 1e-6, beta 1e-3) and reads
what its two request-level units drew; then:

* offset buckets (long unit): each bucket's own detectable TV (sorted-mass projection, at the first
  Holm step of the unit's family), as the audit reports it;
* stop count (stop unit): by simulation, the relative change delta of every token's stop probability
  (p_i -> p_i (1 + delta)) that the count detects with probability >= 1 - beta at the first Holm
  step, on the unit's own number of tokens and stop probabilities drawn from its pair's rows; and
  the TV that change makes per token (|delta| times the mean stop mass), against eps.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "examples"))

from round_step import step  # noqa: E402

from specverify.audit import RoundAdapter, audit  # noqa: E402
from specverify.audit.pipeline.config import AuditConfig  # noqa: E402
from specverify.audit.pipeline.plan import plan_audit  # noqa: E402
from specverify.stats import event_count_test  # noqa: E402


def stop_power(p: np.ndarray, delta: float, alpha: float, trials: int, rng: np.random.Generator) -> float:
    """Fraction of ``trials`` in which the count rejects at ``alpha`` when every stop probability is scaled."""
    hits = 0
    for _ in range(trials):
        x = rng.random(len(p)) < np.clip(p * (1 + delta), 0, 1)
        hits += event_count_test(x, p).pvalue <= alpha
    return hits / trials


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=2000)
    a = ap.parse_args()
    t = time.perf_counter()
    adapter = RoundAdapter(step)
    v = audit(adapter, diagnose=False)
    print(f"default audit of docs/examples/round_step.py: {v.status}, {time.perf_counter() - t:.0f} s, eps {v.eps:.4f}")
    units = {u.index: u for u in plan_audit(adapter, AuditConfig()).units}
    for c, u in zip(v.checks, units.values()):
        if u.length:
            print(f"offset buckets of '{c.name}' (alpha per test {u.family.alpha_fixed / u.family.size:.2g}):")
            for b in c.details["offset_buckets"]:
                lo, hi = b["tokens"]
                print(f"  tokens {lo:>3}-{hi:<3}  n {b['n']:>6,}  detects TV >= {b['detects_tv']:.4f}")
        if u.settings.stop_token_ids:
            alpha = u.family.alpha_fixed / u.family.size
            pair = u.make_pair("context", AuditConfig())
            mass = pair.target_table(u.settings)[:, list(u.settings.stop_token_ids)].sum(1)
            rng = np.random.default_rng(0)
            p = mass[rng.integers(0, len(mass), c.n)]
            s = c.details["stops"]
            print(f"stop count of '{c.name}': n {c.n:,} tokens, {s['observed']} stops ({s['expected']} expected), "
                  f"mean stop mass {p.mean():.4f}, alpha per test {alpha:.2g}")  # fmt: skip
            for delta in (-0.3, -0.2, -0.15, -0.1, 0.1, 0.15, 0.2, 0.3):
                pw = stop_power(p, delta, alpha, a.trials, rng)
                print(f"  delta {delta:+.2f} (TV {abs(delta) * p.mean():.4f} per token): power {pw:.4f}")


if __name__ == "__main__":
    main()
