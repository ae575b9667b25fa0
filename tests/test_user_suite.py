"""Implementations written the way users write them (``tests/user_impls``: numpy round steps,
stateful steppers with a cache, logits + settings steppers, greedy steppers, kernels, generators),
each audited through the installed CLI in a subprocess, in the module form, at the CI size (0.12
of the full table's fixed ``--rounds``, alpha 1e-6, beta 1e-3, eps 0.15) with
``--no-diagnosis`` (which leaves the verdict as it is; the diagnosis has its own tests and study):
every buggy one FAILs and every correct one PASSes. The verdicts are functions of the
implementation, the seed and the options (the time budget is only a cap), so this is
deterministic; each FAIL expected here has false-fail rate <= 1e-6 on a correct implementation,
each PASS false-pass rate <= 1e-3 at eps 0.15 (75 of 75 as expected at that size, 414 s of audits:
scripts/results/user_suite_ci.json).

The full-size table (eps 0.05), with timings: ``python scripts/user_suite.py``
(scripts/results/user_suite.json); the CI size: ``python scripts/user_suite.py --ci --no-diagnosis``.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from user_impls import CASES  # noqa: E402
from user_suite import CI_FLAGS, CI_SCALE, ROUNDS, run_case  # noqa: E402


def test_the_suite_covers_what_users_write():
    buggy = [c for c in CASES if c["buggy"]]
    assert len(CASES) >= 40 and len(buggy) >= 25 and len(CASES) - len(buggy) >= 12
    classes = {c["bug_class"] for c in buggy}
    for needed in (
        "stale_cache_after_reject",
        "position_wrong_prefix",
        "temperature_draft_only",
        "temperature_in_ratio_only",
        "top_p_before_temperature",
        "greedy_residual_argmax",
        "greedy_tie_highest_id",
        "greedy_bonus_wrong_row",
    ):
        assert needed in classes, needed
    assert {c["visible"] for c in buggy} >= {"low_overlap", "high_overlap", "greedy"}
    assert {c["shape"] for c in CASES} == {"round", "kernel", "generator"}


@pytest.mark.parametrize("case", CASES, ids=[c["spec"].split(".", 1)[1] for c in CASES])
def test_cli_verdict_matches_the_truth(case):
    # the CI size; the diagnosis is measured in test_diagnosis and scripts/diagnosis_study.py
    r = run_case(case, ROUNDS, extra=[*CI_FLAGS, "--no-diagnosis"], scale=CI_SCALE)
    assert r["verdict"] == r["expected"], f"{case['spec']} ({case['bug_class'] or 'correct'}): {r['headline']}"
    if r["verdict"] == "PASS":
        assert r["headline"].startswith("PASS"), r["headline"]
    else:
        assert r["headline"].startswith("FAIL in "), r["headline"]
