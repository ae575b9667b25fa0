"""Audit every implementation of ``tests/user_impls`` through the installed CLI, in the module
form, in subprocesses, and tabulate verdict against expectation.

    python scripts/user_suite.py [--rounds N] [--kernel-rounds N] [--jobs 2] [--only SUBSTR] [--ci]
                                 [--no-diagnosis] [--out FILE]

Each case runs ``specverify audit --round|--kernel|--generator user_impls.mod:fn <flags> --rounds N``
with default error rates (alpha 1e-6, beta 1e-3, eps 0.05) and PYTHONPATH=tests; ``--ci`` runs the
size the test suite runs (a quarter of the rounds at eps 0.1). A buggy case must FAIL and a correct
one PASS; the table gives the verdict, the seconds and the headline.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from user_impls import CASES  # noqa: E402

#: rounds per unit at which every correct case reaches eps 0.05 (sequences of 32 tokens for round
#: steps and generators; single rounds for kernels)
ROUNDS = {"round": 2500, "generator": 2500, "kernel": 160_000}
#: the size CI runs (tests/test_user_suite.py): 0.12 of the rounds at eps 0.15 (a PASS needs a
#: sample proportional to 1 / eps^2, so every correct case still reaches its eps)
CI_SCALE, CI_EPS = 0.12, 0.15
#: the CI size's options: a buggy case stops at its first FAIL (the status is the same)
CI_FLAGS = ["--eps", str(CI_EPS), "--fail-fast"]
EXIT = {0: "PASS", 1: "FAIL", 2: "USAGE", 3: "INCONCLUSIVE"}


def command(case: dict, rounds: dict, extra=(), scale: float = 1.0) -> list[str]:
    exe = str(Path(sys.executable).with_name("specverify"))
    flag = {"round": "--round", "kernel": "--kernel", "generator": "--generator"}[case["shape"]]
    n = case.get("rounds") or rounds[case["shape"]]
    if scale != 1.0:  # the CI size: a case may name its own
        n = case.get("ci_rounds") or max(1, round(n * scale))
    return [exe, "audit", flag, case["spec"], *case["flags"], "--rounds", str(n), "--no-progress", *extra]


def run_case(case: dict, rounds: dict, extra=(), timeout: float = 900, scale: float = 1.0) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    cmd = command(case, rounds, extra, scale)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    verdict = EXIT.get(r.returncode, f"exit {r.returncode}")
    headline = next(
        (ln for ln in reversed(r.stdout.splitlines()) if ln.startswith(("PASS", "FAIL", "INCONCLUSIVE"))),
        r.stderr[-300:],
    )
    expected = "FAIL" if case["buggy"] else "PASS"
    return {
        **case,
        "verdict": verdict,
        "expected": expected,
        "ok": verdict == expected,
        "seconds": round(time.perf_counter() - t, 1),
        "headline": headline[:300],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=ROUNDS["round"], help="sequences per unit (round steps, generators)")
    ap.add_argument("--kernel-rounds", type=int, default=ROUNDS["kernel"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument(
        "--ci", action="store_true", help=f"the CI size: {CI_SCALE:g} x the rounds at eps {CI_EPS:g}, --fail-fast"
    )
    ap.add_argument("--no-diagnosis", action="store_true", help="pass --no-diagnosis (verdicts only)")
    ap.add_argument("--out", default=str(ROOT / "scripts/results/user_suite.json"))
    a = ap.parse_args(argv)
    rounds = {"round": a.rounds, "generator": a.rounds, "kernel": a.kernel_rounds}
    cases = [c for c in CASES if a.only in c["spec"]]
    extra = (CI_FLAGS if a.ci else []) + (["--no-diagnosis"] if a.no_diagnosis else [])
    scale = CI_SCALE if a.ci else 1.0
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        rows = list(ex.map(lambda c: run_case(c, rounds, extra, scale=scale), cases))
    for r in rows:
        print(
            f"{'ok ' if r['ok'] else 'BAD'} {r['verdict']:12s} {r['expected']:5s} {r['seconds']:6.1f}s  "
            f"{r['spec']:55s} "
            f"{r['bug_class'] or ''}  {r['headline'][:90]}"
        )
    bad = [r for r in rows if not r["ok"]]
    print(
        f"{len(rows) - len(bad)}/{len(rows)} as expected; {sum(r['buggy'] for r in rows)} buggy, "
        f"{sum(not r['buggy'] for r in rows)} correct; {sum(r['seconds'] for r in rows):.0f} s of audits"
    )
    Path(a.out).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
