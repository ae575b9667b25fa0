"""Run the test suite N times with fresh seeds and record which tests fail in which runs.

    python scripts/flakiness.py                       # 20 runs of `pytest tests properties -p no:randomly`
    python scripts/flakiness.py --runs 5 tests/test_stats.py -- -n 2

Every run draws a new ``--specverify-seed`` (the plugin's base seed, from which each test derives
its own) and a new ``--hypothesis-seed``, runs pytest with a JUnit XML report, and adds each
test's outcome to ``scripts/results/flakiness.json`` (rewritten after every run, so an interrupted
study keeps what it has):

* ``runs``: per run, the commit tested, the two seeds, pytest's exit code, the seconds it took and the tests that
  failed (a failure or an error);
* ``tests``: per test that failed at least once, the runs it ran in, the runs it failed in, and the
  seeds of those runs (rerun one with ``pytest NODE --specverify-seed S --hypothesis-seed H``);
* ``flaky``: tests that failed in some runs and passed in others; ``always_failing``: in all;
* ``seen``: the runs each test ran in.

``--resume`` continues an interrupted study in the same ``--out`` file (same ``--seed``): the runs
there are kept and the next ones get the seeds an uninterrupted study would have given them, so a
study of the whole suite can span several sittings.

A statistical test at false-fail rate alpha is expected to fail about alpha * runs times; the
audit tests use alpha = 1e-6, so any repeated failure there is a finding, not noise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from _provenance import commit

ROOT = Path(__file__).resolve().parents[1]
SLOWEST = 25  # tests per run whose seconds are kept


def _cases(junit: Path) -> list[tuple[str, ET.Element]]:
    """(nodeid, testcase element) of each test of a JUnit XML report."""
    if not junit.exists():
        return []
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        parts = cls.split(".")
        # 'tests.test_x.TestClass' -> 'tests/test_x.py::TestClass'
        idx = next(
            (i for i in range(len(parts), 0, -1) if (ROOT / Path(*parts[:i])).with_suffix(".py").exists()), len(parts)
        )
        out.append(
            (str(Path(*parts[:idx]).with_suffix(".py")) + "".join(f"::{p}" for p in parts[idx:]) + f"::{name}", case)
        )
    return out


def outcomes(junit: Path) -> dict[str, str]:
    """nodeid -> 'passed' | 'failed' | 'skipped' from a JUnit XML report."""
    out = {}
    for node, case in _cases(junit):
        if case.find("failure") is not None or case.find("error") is not None:
            out[node] = "failed"
        elif case.find("skipped") is not None:
            out[node] = "skipped"
        else:
            out[node] = "passed"
    return out


def slowest(junit: Path, n: int = SLOWEST) -> list[list]:
    """The ``n`` longest tests of a report, [nodeid, seconds], longest first: where the suite's time goes
    (under ``-n 2`` and whatever else ran beside it, so a ranking rather than a timing)."""
    times = [(node, float(case.get("time") or 0.0)) for node, case in _cases(junit)]
    return [[node, round(t, 1)] for node, t in sorted(times, key=lambda x: -x[1])[:n]]


def summarise(runs: list[dict], seen: dict[str, list[int]]) -> dict:
    tests = {}
    for node, ran in sorted(seen.items()):
        failed = [r["run"] for r in runs if node in r["failed"]]
        if failed:
            tests[node] = {
                "ran": len(ran),
                "failed": len(failed),
                "failed_runs": failed,
                "seeds": [
                    {"specverify_seed": runs[i]["specverify_seed"], "hypothesis_seed": runs[i]["hypothesis_seed"]}
                    for i in failed
                ],
            }
    return {
        "tests": tests,
        "flaky": sorted(n for n, t in tests.items() if t["failed"] < t["ran"]),
        "always_failing": sorted(n for n, t in tests.items() if t["failed"] == t["ran"]),
    }


def _run_once(base: list[str], sv: int, hy: int, timeout: float) -> tuple[int | str, float, dict[str, str], list]:
    """One pytest run with the two seeds: its exit code ('timeout' past ``timeout``), its seconds,
    each test's outcome and the slowest tests."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [*base, f"--specverify-seed={sv}", f"--hypothesis-seed={hy}", f"--junitxml={junit}"]
        t = time.perf_counter()
        rc: int | str
        try:
            rc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        return rc, time.perf_counter() - t, outcomes(junit), slowest(junit)


def _resumed(a: argparse.Namespace) -> tuple[list[dict], dict[str, list[int]]]:
    """The runs and the per-test run lists of the study in ``a.out``, checked against ``a``."""
    if not a.out.exists():
        sys.exit(f"flakiness: --resume: {a.out} does not exist; run without --resume to start a study there")
    old = json.loads(a.out.read_text())
    if "seen" not in old or old.get("seed") != a.seed:
        sys.exit(
            f"flakiness: --resume: {a.out} was written without the tests seen per run or with another --seed "
            f"({old.get('seed')}); start a new study in another --out file"
        )
    return old["runs"], old["seen"]


def _run_record(i: int, sv: int, hy: int, rc: int | str, seconds: float, res: dict[str, str], slow: list) -> dict:
    """One run's entry of the study (``ran``: the tests it ran, for ``seen``; popped by the caller)."""
    return {
        "run": i,
        "commit": commit(),  # a study spanning sittings tests more than one commit
        "specverify_seed": sv,
        "hypothesis_seed": hy,
        "exit_code": rc,
        "seconds": round(seconds, 1),
        "tests_run": sum(s != "skipped" for s in res.values()),
        "failed": sorted(n for n, s in res.items() if s == "failed"),
        "slowest": slow,
        "ran": [n for n, s in res.items() if s != "skipped"],
    }


# long: a script: options, the repeated audits and the summary table
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "paths", nargs="*", default=["tests", "properties"], help="what pytest runs (default: tests properties)"
    )
    ap.add_argument("--runs", type=int, default=20, help="how many runs (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the seeds (default 0)")
    ap.add_argument("--out", type=Path, default=ROOT / "scripts" / "results" / "flakiness.json")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run (default 3600)")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue the study in --out (same --seed): runs already there are kept, the next ones get the seeds "
        "an uninterrupted study would have given them",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    a = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if a.runs < 1:
        ap.error(f"--runs {a.runs} is below 1; pass the number of runs")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    seeds = np.random.default_rng(a.seed).integers(0, 2**31, size=(a.runs, 2))
    base = [sys.executable, "-m", "pytest", *a.paths, "-p", "no:randomly", "-p", "no:cacheprovider", "-q", *extra]
    runs, seen = _resumed(a) if a.resume else ([], {})
    for i in range(len(runs), a.runs):
        sv, hy = int(seeds[i, 0]), int(seeds[i, 1])
        run = _run_record(i, sv, hy, *_run_once(base, sv, hy, a.timeout))
        for node in run.pop("ran"):
            seen.setdefault(node, []).append(i)
        runs.append(run)
        failed = run["failed"]
        report = {
            "command": base + ["--specverify-seed=S", "--hypothesis-seed=H"],
            "seed": a.seed,
            "runs_requested": a.runs,
            "runs": runs,
            **summarise(runs, seen),
            "seen": seen,  # the runs each test ran in (what --resume needs)
        }
        a.out.write_text(json.dumps(report, indent=1) + "\n")
        print(
            f"run {i + 1}/{a.runs}: seeds {sv}/{hy}, exit {run['exit_code']}, {len(failed)} failed of "
            f"{run['tests_run']} ({run['seconds']:.0f} s){': ' + ', '.join(failed[:5]) if failed else ''}",
            flush=True,
        )
    s = summarise(runs, seen)
    print(
        f"flakiness: {len(s['flaky'])} flaky, {len(s['always_failing'])} always failing over {a.runs} runs; wrote "
        f"{a.out}"
    )
    return 0 if not s["tests"] else 1


if __name__ == "__main__":
    sys.exit(main())
