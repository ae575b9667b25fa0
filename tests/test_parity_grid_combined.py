"""The --logits parity grid's last setting combines every knob the grid audits alone, so that bugs of
order between knobs (which no single-knob setting can show) are in scope (issue 21): the logit bias
added after temperature instead of to the raw logits first FAILs there and only there, and its
diagnosis names it."""

from __future__ import annotations

import json
from pathlib import Path

from test_entry_points import run_cli

from specverify import SamplingSettings
from specverify.audit.pipeline.plan import PARITY_GRID

DEFAULT = SamplingSettings()


def _knobs(s: SamplingSettings) -> set[str]:
    return {f for f in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                        "frequency_penalty", "logit_bias") if getattr(s, f) != getattr(DEFAULT, f)}  # fmt: skip


def test_the_combined_setting_sets_every_knob_of_the_grid():
    alone = set().union(*(_knobs(s) for s in PARITY_GRID[:-1]))
    assert _knobs(PARITY_GRID[-1]) == alone


def test_a_logit_bias_added_after_temperature_fails_in_the_combined_setting_only(tmp_path):
    out = tmp_path / "v.json"
    spec = "user_impls.logits_steppers:step_logits_bias_after_temperature"
    # 100 sequences per unit (a third of the size at which the grid PASSes at eps 0.15): the other units
    # are INCONCLUSIVE there, never FAIL, and the combined unit FAILs with 89 impossible tokens (37 s -> 14 s)
    args = ("audit", "--round", spec, "--logits", "--eps", "0.15", "--rounds", "100", "--no-progress", "--json", out)
    r = run_cli(*args, path=[Path(__file__).parent], timeout=900)
    assert r.returncode == 1, r.stdout[-2000:]
    v = json.loads(out.read_text())
    failed = [c["name"] for c in v["checks"] if c["status"] == "FAIL"]
    assert failed and all(n.startswith(f"settings[{len(PARITY_GRID) - 1}] ") for n in failed), failed
    assert "logit_bias=((0, 3.0), (1, -3.0))" in failed[0]
    # the combined setting has penalties: its tokens are scored one by one (diagnosis._penalty)
    assert v["diagnosis"]["verdict"] == "logit_bias_after_temperature", v["diagnosis"]["lead"]
    assert "Diagnosis: most likely logit_bias_after_temperature (likelihood ratio e^" in r.stdout
