"""Presence and frequency penalties at the request level (issue 21, item 1, in part): a round step
is told where the prompt ends (``settings.prompt_len``: its settings are a RequestSettings), and
the laws the auditor computes count presence and frequency over the generated tokens only, the
repetition penalty over the prompt too (OpenAI / vLLM semantics). Each buggy step is modelled on a
report (tests/user_impls/penalty_steppers.py); fixed seeds, so each verdict is deterministic. Each
buggy step's FAIL is diagnosed token by token (specverify.diagnosis._penalty): the lead names its
class, whose law is exact for the step."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from user_impls import penalty_steppers as P  # noqa: E402

from specverify import RequestSettings, SamplingSettings  # noqa: E402
from specverify.audit import GeneratorAdapter, RoundAdapter, audit  # noqa: E402
from specverify.errors import InvalidSettingsError  # noqa: E402
from specverify.harness import history_counts  # noqa: E402

PENALTIES = (SamplingSettings(presence_penalty=1.5, frequency_penalty=1.0),)
OPTIONS = dict(settings=PENALTIES, eps=0.1, diagnose=False)

CORRECT = ["step_penalties_correct", "step_penalties_target_only", "step_incremental_correct"]
#: each buggy step and the class its diagnosis names
BUGGY = {
    "step_frequency_ignored": "frequency_penalty_ignored",  # vllm#18902, TensorRT-LLM#17701
    "step_penalties_ignored": "penalties_ignored",  # TensorRT-LLM#17701, sglang#22049
    "step_penalties_count_the_prompt": "penalties_count_the_prompt",  # vmlx-swift#295
    "step_penalty_fed_last_token_only": "penalty_fed_last_token_only",  # sglang#33643
    "step_history_keeps_rejected_drafts": "penalty_history_keeps_rejected_drafts",  # vmlx-swift#357
    "step_penalties_count_the_scored_draft": "penalty_history_counts_the_scored_draft",  # sglang#40244
    "step_frequency_follows_logit_sign": "frequency_penalty_follows_logit_sign",  # vllm#18902 (the path)
    # the penalty family (specverify.diagnosis._penalty_forms)
    "step_penalties_over_a_window": "penalty_window_not_requested",  # llama.cpp's repeat_last_n
    "step_penalties_compound_along_the_block": "penalty_compounds_along_the_block",  # sglang#40244
    "step_bonus_without_penalties": "bonus_row_without_penalties",  # vllm#42744
    "step_presence_as_a_factor": "presence_penalty_as_factor",  # TensorRT-LLM#17701 (the path)
    "step_penalties_count_the_prompt_only": "penalties_count_the_prompt_only",  # vllm#18902 (the path)
}


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_penalised_step_passes(name):
    # fail_fast: the diagnosis reads the units sampled up to the first FAIL, which name the class
    v = audit(
        RoundAdapter(getattr(P, name), logits=True, name=name), **{**OPTIONS, "diagnose": True, "fail_fast": True}
    )
    assert v.status == "PASS", v.headline()
    assert v.diagnosis is None and v.diagnosis_lead() == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_a_step_that_counts_the_wrong_tokens_fails_and_is_named(name):
    # fail_fast: the diagnosis reads the units sampled up to the first FAIL, which name the class
    v = audit(
        RoundAdapter(getattr(P, name), logits=True, name=name), **{**OPTIONS, "diagnose": True, "fail_fast": True}
    )
    assert v.status == "FAIL", v.headline()
    assert "presence_penalty=1.5,frequency_penalty=1.0" in v.headline()
    lead = v.diagnosis_lead()[0]
    assert v.diagnosis["verdict"] == BUGGY[name], lead
    assert lead.startswith(f"Diagnosis: most likely {BUGGY[name]} (likelihood ratio e^"), lead


@pytest.mark.parametrize(
    ("name", "truth"),
    [
        ("step_repetition_correct", None),
        ("step_repetition_skips_the_prompt", "repetition_penalty_skips_the_prompt"),
        ("step_repetition_inverted", "repetition_penalty_inverted"),
        ("step_repetition_on_probabilities", "repetition_penalty_on_probabilities"),  # sglang#21258
    ],
)
def test_a_repetition_penalty_on_the_wrong_tokens_or_inverted_fails_and_is_named(name, truth):
    # the repetition penalty counts the prompt (HF, vLLM); one that skips it (vllm-metal#69), and one
    # taken as its reciprocal, are named
    v = audit(
        RoundAdapter(getattr(P, name), logits=True, name=name),
        settings=(SamplingSettings(repetition_penalty=1.3),),
        eps=0.1,
        diagnose=True,
        fail_fast=True,
    )
    assert v.status == ("PASS" if truth is None else "FAIL"), v.headline()
    if truth is None:
        assert v.diagnosis is None
        return
    lead = v.diagnosis_lead()[0]
    assert v.diagnosis["verdict"] == truth, lead
    assert lead.startswith(f"Diagnosis: most likely {truth} (likelihood ratio e^"), lead


def test_generators_are_judged_by_generated_tokens_only():
    # target-only generators: the laws are what is tested here (their rounds reach no draft position)
    ok = audit(GeneratorAdapter(P.generate_penalties_correct, logits=True, name="gen"), exact_checks=False, **OPTIONS)
    assert ok.status == "PASS", ok.headline()  # before: the law counted the prompt, a false FAIL
    bad = audit(
        GeneratorAdapter(P.generate_penalties_count_the_prompt, logits=True, name="g"), exact_checks=False, **OPTIONS
    )
    assert bad.status == "FAIL", bad.headline()


def test_a_step_sees_the_prompt_boundary_of_each_request():
    seen = []

    def step(prefix, draft, target, gamma, rng, settings):
        seen.append((len(prefix), settings.prompt_len, isinstance(settings, RequestSettings)))
        return P.step_penalties_correct(prefix, draft, target, gamma, rng, settings)

    audit(RoundAdapter(step, logits=True, name="spy"), settings=PENALTIES, rounds=3, exact_checks=False)
    assert all(is_request and 12 <= n_prompt <= 24 and n >= n_prompt for n, n_prompt, is_request in seen)
    assert len({p for _, p, _ in seen}) > 1, "each request has its own prompt"


def test_history_counts_split_the_prompt_from_the_generated_tokens():
    s = SamplingSettings(presence_penalty=1.0, repetition_penalty=1.2)
    seen, out = history_counts([3, 3, 5, 3, 7], 3, s, 8)
    assert seen.tolist() == [0, 0, 0, 3, 0, 1, 0, 1] and out.tolist() == [0, 0, 0, 1, 0, 0, 0, 1]
    seen, _ = history_counts([3, 3, 5, 3, 7], 3, SamplingSettings(penalize_prompt=False), 8)
    assert seen.tolist() == [0, 0, 0, 1, 0, 0, 0, 1]  # llama-cpp-python's convention: generated only


def test_a_penalty_window_counts_the_last_n_tokens_of_each_history():
    s = SamplingSettings(presence_penalty=1.0, repetition_penalty=1.2, penalty_window=2)
    seen, out = history_counts([3, 3, 5, 3, 7, 7], 3, s, 8)  # prompt [3, 3, 5], generated [3, 7, 7]
    assert seen.tolist() == [0] * 7 + [2] and out.tolist() == [0] * 7 + [2]  # the last two: [7, 7]
    seen, out = history_counts([3, 3, 5, 3], 3, s, 8)  # one generated token: the window holds the prompt's 5
    assert seen.tolist() == [0, 0, 0, 1, 0, 1, 0, 0] and out.tolist() == [0, 0, 0, 1, 0, 0, 0, 0]
    assert s.to_dict()["penalty_window"] == 2 and "penalty_window" not in SamplingSettings().to_dict()
    for bad in (-1, 1.5, True):
        with pytest.raises(InvalidSettingsError, match="penalty_window must be an int >= 0") as e:
            SamplingSettings(penalty_window=bad)
        assert e.value.field == "penalty_window"


def test_running_counts_equal_the_counts_of_each_prefix():
    from specverify.dists import running_counts, token_counts

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 6, size=40).tolist()
    for window, first in ((0, 0), (5, 0), (3, 17), (1, 39)):
        got = running_counts(ids, 6, window=window, first=first)
        want = [token_counts(ids[:t][-window:] if window else ids[:t], 6) for t in range(first, len(ids))]
        np.testing.assert_array_equal(got, np.array(want).reshape(-1, 6))
    # the language-model laws' histories, every position at once, against the per-position rule
    from specverify.lm.transformers_lm import _history_counts

    prompt, cont = ids[:7], ids[7:]
    for s in (SamplingSettings(penalty_window=4), SamplingSettings(penalize_prompt=False, penalty_window=3)):
        seen, gen = _history_counts(prompt, cont, 6, s)
        for t in range(len(cont)):
            want_seen, want_gen = history_counts(prompt + cont[:t], len(prompt), s, 6)
            np.testing.assert_array_equal(seen[t], want_seen)
            np.testing.assert_array_equal(gen[t], want_gen)


def test_an_engine_without_a_window_declines_one():
    from specverify.engines.vllm import sampling_params_kwargs
    from specverify.errors import UnsupportedSettingError

    with pytest.raises(UnsupportedSettingError, match="penalties count every token.*audit it with penalty_window=0"):
        sampling_params_kwargs(SamplingSettings(presence_penalty=0.5, penalty_window=64))
    sampling_params_kwargs(SamplingSettings(penalty_window=64))  # no penalty: the window changes nothing


WINDOWED = (SamplingSettings(presence_penalty=1.5, frequency_penalty=1.0, penalty_window=2),)


def test_a_step_that_honours_the_penalty_window_passes_and_one_that_ignores_it_fails():
    # llama.cpp and llama-cpp-python count the last 64 tokens (repeat_last_n); a law over the whole
    # history failed them (results/engines/llama.cpp-requests), a law over the window is theirs
    opts = {**OPTIONS, "settings": WINDOWED, "fail_fast": True}
    ok = audit(RoundAdapter(P.step_penalties_windowed, logits=True, name="windowed"), **opts)
    assert ok.status == "PASS", ok.headline()
    bad = audit(RoundAdapter(P.step_penalties_correct, logits=True, name="whole history"), **opts)
    assert bad.status == "FAIL" and "penalty_window=2" in bad.headline(), bad.headline()


def test_request_settings_validate_the_prompt_length():
    with pytest.raises(InvalidSettingsError, match="prompt_len must be an int >= 0") as e:
        RequestSettings(prompt_len=-1)
    assert e.value.field == "prompt_len"
    r = RequestSettings.of(PENALTIES[0], prompt_len=4)
    assert r.presence_penalty == 1.5 and list(r.generated([1, 2, 3, 4, 5, 6])) == [5, 6]
    assert r.short() == PENALTIES[0].short()  # labels name the settings, not the request's prompt


def test_an_inconclusive_exact_check_is_named_not_blamed_on_eps():
    # found here: a target-only generator's greedy raw-row check reaches no draft position; the
    # headline said "detect TV >= 0.063, above the requested 0.1" (it is below)
    v = audit(GeneratorAdapter(P.generate_penalties_correct, logits=True, name="gen"), **OPTIONS)
    assert v.status == "INCONCLUSIVE"
    assert v.headline().startswith("INCONCLUSIVE: no deviation found, but the exact check 'greedy equivalence")
    assert "above the requested" not in v.headline()


def test_the_installed_cli_audits_penalties_at_80_columns():
    import os
    import subprocess

    cli = Path(sys.executable).parent / "specverify"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "COLUMNS": "80", "OMP_NUM_THREADS": "1"}
    opts = ["--logits", "--presence-penalty", "1.5", "--frequency-penalty", "1", "--eps", "0.1", "--no-progress"]

    def run(step, *more):
        spec = f"user_impls.penalty_steppers:{step}"
        return subprocess.run(
            [str(cli), "audit", "--round", spec, *opts, *more], capture_output=True, text=True, env=env
        )

    # the buggy step stops at its first FAIL (27 s -> 9 s; its diagnosis still names the class)
    ok, bad = run("step_penalties_correct"), run("step_penalty_fed_last_token_only", "--fail-fast")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS: no deviation of TV >= " in ok.stdout
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "presence_penalty=1.5,frequency_penalty=1.0" in bad.stdout
    for out in (ok.stdout, bad.stdout):  # the check lines fit; the lead and headline are one line each (greppable)
        lines = out.splitlines()
        body = [ln for ln in lines[:-1] if not ln.startswith(("Diagnosis:", "  - "))]
        assert max(map(len, body)) <= 80 and lines[-1].startswith(("PASS", "FAIL"))
    usage = subprocess.run([str(cli), "audit", "--round", "x:y", "--presence-penalty", "nan"], capture_output=True,
                           text=True, env=env)  # fmt: skip
    assert usage.returncode == 2 and "--presence-penalty: presence_penalty must be finite" in usage.stderr
    window = subprocess.run([str(cli), "audit", "--round", "x:y", "--penalty-window", "-1"], capture_output=True,
                            text=True, env=env)  # fmt: skip
    assert window.returncode == 2 and "--penalty-window: penalty_window must be an int >= 0" in window.stderr
    # a step that counts the whole history, audited at llama.cpp's window (here 2 tokens): FAIL, named
    whole = run("step_penalties_correct", "--penalty-window", "2", "--fail-fast", "--no-diagnosis")
    assert whole.returncode == 1 and "penalty_window=2" in whole.stdout, whole.stdout + whole.stderr
