"""A round step's request-level units (issue 21, items 2 and 3 for table shapes): the stop unit
(a stop id with real mass; the request ends at the first stop a round emits; the stops counted
against the law) and the long unit's offset buckets.

Every audit here has a fixed seed, so a verdict is a function of the code alone; each detection
claim is backed by a buggy step that the test sees FAIL (tests/user_impls/stop_steppers.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from user_impls import stop_steppers as S  # noqa: E402
from user_impls.round_numpy import step_rotating_cache_256  # noqa: E402

from specverify.audit import GeneratorAdapter, KernelAdapter, RoundAdapter, audit  # noqa: E402
from specverify.audit.pipeline.config import AuditConfig  # noqa: E402
from specverify.audit.pipeline.plan import STOP_MASS, offsets_in_sequence, plan_audit, stop_heavy  # noqa: E402
from specverify.errors import SpecVerifyError  # noqa: E402
from specverify.harness import make_context_pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "specverify"
FAST = dict(eps=0.15, diagnose=False)


def _units(adapter, **cfg):
    return plan_audit(adapter, AuditConfig(**cfg)).units


def test_a_round_step_plan_has_a_stop_unit_and_a_long_unit_with_its_buckets():
    units = _units(RoundAdapter(S.step_cuts_at_stop_correct))
    stop = [u for u in units if u.settings.stop_token_ids]
    long = [u for u in units if u.length]
    assert len(stop) == 1 and stop[0].settings.stop_token_ids == (63,) and stop[0].pair_kind == "low"
    assert stop[0].family.extra == 1 and stop[0].family.whitebox == 0
    assert len(long) == 1 and long[0].family.extra == 4  # 0-63, 64-127, 128-255, 256-511
    assert not [
        u for u in _units(RoundAdapter(S.step_cuts_at_stop_correct), stop_token_ids=()) if u.settings.stop_token_ids
    ]
    assert [u.settings.stop_token_ids for u in _units(RoundAdapter(S.step_cuts_at_stop_correct), stop_token_ids=(5,))
            if u.settings.stop_token_ids] == [(5,)]  # fmt: skip
    # generators return max_new_tokens ids (their request shape is --lm-generator) and kernels see no requests
    assert not [u for u in _units(GeneratorAdapter(lambda *a: [])) if u.settings.stop_token_ids]
    assert not [u for u in _units(KernelAdapter(lambda *a: None)) if u.settings.stop_token_ids]


def test_a_stop_id_outside_the_vocabulary_is_an_error_naming_the_fix():
    with pytest.raises(SpecVerifyError, match=r"stop_token_ids=\[70\]: ids must be below the vocabulary of 64"):
        _units(RoundAdapter(S.step_cuts_at_stop_correct), stop_token_ids=(70,))


def test_the_stop_ids_carry_the_stated_mass_on_draft_and_target_alike():
    pair = make_context_pair(64, "low", seed=3)
    heavy = stop_heavy(pair, (63,))
    p, q = heavy.target_table(), heavy.draft_table()
    assert abs(p[:, 63].mean() - STOP_MASS) < 1e-6
    assert q[:, 63].mean() > 2 * pair.draft_table()[:, 63].mean()  # the draft proposes it more often too
    np.testing.assert_allclose(heavy.target_logits[:, :63], pair.target_logits[:, :63])


def test_offsets_count_from_each_sequences_first_token():
    np.testing.assert_array_equal(
        offsets_in_sequence(np.array([0, 0, 0, 1, 1, 4, 4, 4, 4])), [0, 1, 2, 0, 1, 0, 1, 2, 3]
    )


def test_the_driver_ends_a_request_at_the_first_stop_a_round_emits():
    def step_emits_past_the_stop(prefix, draft, target, gamma, rng, settings):
        return [63, 1, 2] if len(prefix) == settings.prompt_len else [5]

    from specverify import SamplingSettings
    from specverify.audit.sources.adapters import settings_parameter
    from specverify.harness import SequenceView, run_round_step

    view = SequenceView(make_context_pair(64, "low", seed=1), SamplingSettings(stop_token_ids=(63,)))
    param = settings_parameter(step_emits_past_the_stop)
    rng = np.random.default_rng(0)
    gen = run_round_step(step_emits_past_the_stop, view, n=5, length=32, gamma=4, rng=rng, settings_param=param,
                         timeout=None, name="s")  # fmt: skip
    assert gen.tokens.tolist() == [63] * 5 and gen.sequence.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("step", [S.step_cuts_at_stop_correct, S.step_draft_stops_at_stop_correct])
def test_correct_stop_handling_passes(step):
    v = audit(RoundAdapter(step), **FAST)
    assert v.status == "PASS", v.headline()
    stop = next(c for c in v.checks if "stop_token_ids" in c.name)
    assert stop.status == "PASS" and stop.details["stops"]["observed"] > 100, stop.details["stops"]


def test_a_drafted_stop_taken_unverified_fails_the_stop_unit():
    # openvinotoolkit/openvino.genai#3293: a draft EOS finishes the sequence though the target may reject it
    v = audit(RoundAdapter(S.step_drafted_stop_unverified), **{**FAST, "diagnose": True})
    failed = [c for c in v.checks if c.status == "FAIL"]
    assert [c.name for c in failed] == ["settings[0] stop_token_ids=(63,) / low-overlap pair"], v.headline()
    s = failed[0].details["stops"]
    assert s["observed"] > s["expected"] + 5 * s["sd"], s  # requests end at a drafted stop too often
    # the stop scorer names it from the cut rounds (diagnosis/_stop.py): rounds that asked the target nothing
    assert v.diagnosis["verdict"] == "request_ended_early", v.diagnosis["lead"]
    assert "stop check reads" in v.diagnosis["lead"], v.diagnosis["lead"]


def test_a_stop_masked_from_the_replacement_fails_where_requests_end():
    # the stop count leads: the token bins pool the stop id with others, the count does not
    v = audit(RoundAdapter(S.step_replacement_never_stop), **{**FAST, "diagnose": True})
    assert v.status == "FAIL", v.headline()
    check, stratum, seen = v.first_failure()
    assert stratum == "where requests end" and "fewer stops than target-only sampling makes" in seen, seen
    d = v.diagnosis
    assert d["verdict"] == "stop_never_a_replacement", d["lead"]
    top = d["candidates"][0]
    assert top["parameter"] == "masked in the replacement only" and top["cells_fit_p"] > 0.01, top


def test_a_bug_from_offset_252_on_fails_in_its_offset_bucket():
    # a 256-slot rotating cache (prompts of 2-5 tokens): the first tokens with a wrong prefix sit at offset ~252
    v = audit(RoundAdapter(step_rotating_cache_256), exact_checks=False, **FAST)
    check, stratum, _ = v.first_failure()
    assert check.name == "settings[0] default / 512 tokens / low-overlap pair", v.headline()
    assert stratum in ("tokens 128-255 of each sequence", "tokens 256-511 of each sequence"), stratum
    assert "tokens 0-63 of each sequence" not in " ".join(c.summary for c in v.checks)


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    d = tmp_path_factory.mktemp("user")
    shutil.copy(Path(S.__file__), d / "mysteps.py")
    return d


def _cli(*args, cwd, module_form=False):
    head = [sys.executable, "-m", "specverify"] if module_form else [str(CLI)]
    env = {**os.environ, "COLUMNS": "80", "OMP_NUM_THREADS": "1"}
    return subprocess.run([*head, "audit", *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


CLI_FAST = ["--eps", "0.2", "--temperature", "1", "--no-progress", "--no-diagnosis"]


def test_the_cli_audits_a_stop_aware_step_from_outside_the_repository(outside):
    r = _cli("--round", "mysteps:step_cuts_at_stop_correct", *CLI_FAST, cwd=outside)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())  # the 80-column layout wraps lines
    assert "settings[0] stop_token_ids=(63,) / low-overlap pair" in out, r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("PASS: no deviation of TV >= "), r.stdout


def test_the_module_form_fails_a_drafted_stop_and_says_where_requests_end(outside):
    r = _cli("--round", "mysteps:step_replacement_never_stop", "--stop-token-ids", "7", *CLI_FAST, cwd=outside,
             module_form=True)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "stop_token_ids=(7,)" in out and "where requests end" in out, r.stdout
    assert "fewer stops than target-only sampling makes" in out, r.stdout
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines() if not ln.startswith(("FAIL", "PASS"))), r.stdout


def test_a_bug_at_the_last_id_that_fails_every_unit_is_not_named_a_stop_class():
    # the last id is the stop unit's stop id; a ratio read at another id for it fails every unit, so a
    # stop class (which changes laws only where stops are stops) must not take it (set 13's blind study
    # named two such bugs request_ended_early before the guard)
    from user_impls import round_numpy

    from specverify.audit import RoundAdapter, audit

    fn = round_numpy.step_ratio_index_clamped_below_the_last_id
    v = audit(RoundAdapter(fn, name="clamped"), eps=0.1, diagnose=True)
    assert v.status == "FAIL", v.headline()
    failed = [c.name for c in v.checks if c.status == "FAIL" and c.kind == "statistical"]
    assert any("stop_token_ids" in n for n in failed) and any("stop_token_ids" not in n for n in failed), failed
    assert v.diagnosis["verdict"] not in ("request_ended_early", "stop_never_a_replacement"), v.diagnosis_lead()
