"""The parity grid's pairs (``--parity-pairs``, issue 22 item 3).

With ``--logits`` every setting after the first runs on one pair by default, low and high overlap in
turn, so a knob is shown rejections or full acceptances but not both. ``--parity-pairs both`` runs
every knob on both pairs. The bug that needs it: a drafter that samples from its processed row but
keeps q from before top-p (huggingface/transformers#47932, narrowed to one knob) is exact wherever
draft and target rows are equal, so top-p on the high-overlap pair alone cannot show it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specverify.audit import RoundAdapter, audit
from specverify.audit.pipeline.config import AuditConfig
from specverify.audit.pipeline.plan import PARITY_GRID, plan_audit
from specverify.dists import SamplingSettings
from specverify.errors import SpecVerifyError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from user_impls.logits_steppers import step_logits_correct, step_logits_q_reported_before_top_p  # noqa: E402

#: the default setting (always on both pairs) and top-p, which the alternation puts on the high pair
GRID = (SamplingSettings(), SamplingSettings(top_p=0.8))
SIZE = {"rounds": 400, "eps": 0.15, "long_length": 0, "stop_token_ids": (), "diagnose": False, "workers": 1}


def _cells(parity_pairs):
    plan = plan_audit(RoundAdapter(step_logits_correct, logits=True), AuditConfig(parity_pairs=parity_pairs))
    return [(u.settings.short(), u.pair_kind) for u in plan.units if u.length is None and not u.settings.stop_token_ids]


def test_both_runs_every_knob_of_the_grid_on_both_pairs():
    alternate, both = _cells("alternate"), _cells("both")
    assert len(alternate) == len(PARITY_GRID) + 1  # the first setting on both pairs, every other on one
    assert len(both) == 2 * len(PARITY_GRID)
    for s in PARITY_GRID:
        assert {k for name, k in both if name == s.short()} == {"low", "high"}, s.short()
    assert ("top_p=0.8", "low") in both and ("top_p=0.8", "low") not in alternate


def test_a_q_kept_before_top_p_needs_the_low_overlap_pair_under_top_p():
    adapter = RoundAdapter(step_logits_q_reported_before_top_p, logits=True)
    missed = audit(adapter, settings=GRID, **SIZE)
    caught = audit(adapter, settings=GRID, parity_pairs="both", **SIZE)
    # the gap the alternation leaves, stated rather than hidden (if the default becomes 'both', this must FAIL)
    assert missed.status == "PASS", missed.headline()
    assert caught.status == "FAIL", caught.headline()
    failed = [c.name for c in caught.checks if c.status == "FAIL"]
    assert failed and all("top_p=0.8" in n and "low-overlap" in n for n in failed), failed
    correct = audit(RoundAdapter(step_logits_correct, logits=True), settings=GRID, parity_pairs="both", **SIZE)
    assert correct.status == "PASS", correct.headline()


def test_the_cli_and_the_python_api_default_to_the_same_pairs():
    from specverify.audit.front.cli import _config
    from specverify.cli import build_parser

    def parity_pairs(*extra):
        args = build_parser().parse_args(["audit", "--round", "m:f", "--logits", *extra])
        args.isolate_batches = False  # set by the CLI's checks from the implementation, not an option
        return _config(args, None).parity_pairs

    assert parity_pairs() == AuditConfig().parity_pairs == "alternate"
    assert parity_pairs("--parity-pairs", "both") == "both"


def test_a_parity_pairs_value_that_is_not_one_of_the_two_names_the_choices():
    with pytest.raises(SpecVerifyError, match="parity_pairs='Both': pass 'alternate' \\(the default\\) or 'both'"):
        cfg = AuditConfig(parity_pairs="Both")  # type: ignore[arg-type]
        plan_audit(RoundAdapter(step_logits_correct, logits=True), cfg)


def test_the_cli_takes_parity_pairs_with_logits_only():
    cli = Path(sys.executable).parent / "specverify"
    env = {**os.environ, "PYTHONPATH": str(HERE), "COLUMNS": "80"}
    spec = "user_impls.logits_steppers:step_logits_correct"
    argv = [str(cli), "audit", "--round", spec, "--parity-pairs", "both"]
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--parity-pairs applies with --logits (without it every setting runs on both pairs); drop it" in r.stderr
    h = subprocess.run([str(cli), "audit", "--help"], capture_output=True, text=True, env=env)
    assert "--parity-pairs {alternate,both}" in h.stdout
