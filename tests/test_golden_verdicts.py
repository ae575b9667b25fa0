"""The golden verdicts stay equal (issue 20): each case of tests/golden_cases.py, re-run, gives the
JSON verdict recorded in tests/golden/verdicts.json, apart from timing. A refactor of the pipeline
must keep them; a change that is meant to change verdicts rewrites them with
``python scripts/golden_verdicts.py NAME`` and says why."""

from __future__ import annotations

import json

import pytest
from golden_cases import GOLDEN, cases, differences, normalised

CASES = cases()
RECORDED = json.loads(GOLDEN.read_text())


def test_every_case_is_recorded_and_the_set_covers_every_shape():
    assert sorted(RECORDED) == sorted(CASES), "run scripts/golden_verdicts.py for the cases added or removed"
    shapes = {name.split("/")[0] for name in CASES}
    assert shapes == {"catalogue", "round", "kernel", "generator", "cmd", "lm", "endpoint"}
    assert len(CASES) >= 30
    statuses = {RECORDED[n]["status"] for n in CASES}
    assert {"PASS", "FAIL", "INCONCLUSIVE"} <= statuses


@pytest.mark.parametrize("name", list(CASES))
def test_verdict_equals_the_golden_one(name):
    got = normalised(json.loads(json.dumps(CASES[name]().to_dict())))
    diff = differences(got, RECORDED[name])
    assert not diff, "\n".join(diff[:20])
