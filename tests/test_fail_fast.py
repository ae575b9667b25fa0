"""--fail-fast (issue 22, a quicker red in CI): the audit stops at the first unit that FAILs.

The status is the whole audit's (one FAIL fails it), the failing check is the one the whole audit
computes, to the sample (every batch is seeded by the seed, the unit and the batch index), the checks
before it are the same, and every unit and check left out is listed as SKIPPED with the reason. A
correct implementation's verdict does not change. Deterministic: fixed seeds throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from user_impls import request_generators as R  # noqa: E402

from specverify import SamplingSettings  # noqa: E402
from specverify.audit import audit_lm_pairs, lm_pairs  # noqa: E402

CLI = Path(sys.executable).with_name("specverify")
SIZE = ["--rounds", "300", "--eps", "0.15", "--no-diagnosis", "--no-progress"]
REASON = "not run: --fail-fast stopped at the first FAIL"


def _audit(spec: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(TESTS)}
    args = [str(CLI), "audit", "--round", spec, *SIZE, "--json", str(out), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=TESTS)


def test_the_installed_cli_stops_at_the_first_fail_with_the_whole_audits_finding(tmp_path):
    # the residual taken from p: the default setting PASSes, temperature 0.7 with top-p 0.9 FAILs
    spec = "user_impls.round_numpy:step_residual_from_p"
    whole, fast = _audit(spec, tmp_path / "whole.json"), _audit(spec, tmp_path / "fast.json", "--fail-fast")
    assert whole.returncode == fast.returncode == 1, whole.stderr + fast.stderr
    w, f = (json.loads((tmp_path / n).read_text())["checks"] for n in ("whole.json", "fast.json"))
    k = next(i for i, c in enumerate(f) if c["status"] == "FAIL")
    assert k > 0, "the case must pass a unit before failing one"
    assert f[: k + 1] == w[: k + 1]  # the same checks to the sample, the FAIL included
    first = f[k]["name"]
    skipped = f[k + 1 :]
    assert skipped and all(c["status"] == "SKIPPED" and c["summary"] == f"{REASON} ({first})" for c in skipped)
    # every unit of the whole audit is either run or named as skipped, and the exact checks are named
    assert {c["name"] for c in w if c["check_id"].startswith("unit/")} <= {c["name"] for c in f}
    assert skipped[-1]["name"] == "the exact checks" and skipped[-1]["kind"] == "exact"
    # a unit not sampled is a statistical check not run, not an exact one (the terminal row names its kind)
    assert all(c["kind"] == "statistical" for c in skipped[:-1])
    lines = fast.stdout.splitlines()
    assert lines[-1].startswith(f"FAIL in distribution test '{first}'"), lines[-1]
    assert "not run: --fail-fast stopped at the first FAIL" in fast.stdout
    assert all(len(ln) <= 80 for ln in lines[:-1]), [ln for ln in lines if len(ln) > 80]


def test_a_correct_implementation_gets_the_same_verdict_with_fail_fast(tmp_path):
    spec = "user_impls.round_numpy:step_correct"
    whole, fast = _audit(spec, tmp_path / "whole.json"), _audit(spec, tmp_path / "fast.json", "--fail-fast")
    assert whole.returncode == fast.returncode == 0, whole.stdout + fast.stdout
    w, f = (json.loads((tmp_path / n).read_text()) for n in ("whole.json", "fast.json"))
    w.pop("seconds"), f.pop("seconds")
    assert w == f


@pytest.fixture(scope="module")
def pairs():
    torch.set_num_threads(1)
    return lm_pairs(vocab=100, seed=0)


def test_an_lm_audit_stops_at_the_first_fail_and_names_what_it_left_out(pairs):
    # ids past the vocabulary: an exact finding in the first unit
    fast = dict(settings=(SamplingSettings(temperature=0.9),), eps=0.25, seed=1)
    v = audit_lm_pairs(R.padded_vocab_recovery, pairs, fail_fast=True, diagnose=False, **fast)
    assert v.status == "FAIL", v.headline()
    statuses = [c.status for c in v.checks]
    assert statuses[0] == "FAIL" and set(statuses[1:]) == {"SKIPPED"}, statuses
    assert v.checks[-1].name == "the greedy and seed checks"
    assert all(c.summary == f"{REASON} ({v.checks[0].name})" for c in v.checks[1:])
    whole = audit_lm_pairs(R.padded_vocab_recovery, pairs, diagnose=False, greedy_check=False, **fast)
    assert whole.checks[0].summary == v.checks[0].summary
    assert len(whole.checks) == len(v.checks)  # the same units, each run or named (the greedy check off here)
