"""Request-level audits of language-model generators (issue 21): where a request ends (stop ids,
max_new_tokens), long outputs, seeds across requests, logprobs and ids outside the vocabulary.
Each buggy generator is modelled on one public report (tests/user_impls/request_generators.py)
and FAILs with the finding named; each correct one, unusual as it is, PASSes. The vocabulary (100)
is not a multiple of 8 or 64, so a padded-tile shortcut shows. Fixed seeds: every verdict here is
deterministic."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "docs" / "examples"))
import lm_generator  # noqa: E402  # the docs' worked example
from user_impls import request_generators as R  # noqa: E402

from specverify import SamplingSettings  # noqa: E402
from specverify.audit import audit_lm_pairs, lm_pairs  # noqa: E402
from specverify.audit.sources.lm_audit import request_problem  # noqa: E402
from specverify.audit.sources.lm_logprobs import parse_output  # noqa: E402
from specverify.errors import MalformedOutputError  # noqa: E402
from specverify.stats import event_count_test  # noqa: E402

torch.set_num_threads(1)
SETTING = (SamplingSettings(temperature=0.9),)
FAST = dict(settings=SETTING, eps=0.25, seed=1, greedy_check=False)

#: what each buggy generator's FAIL says (a piece of the failing check's summary), and the class its diagnosis names
FINDINGS = {
    "eos_checked_on_last_token": ("token(s) after stop id 99", "stop_missed_mid_round"),
    "length_before_stop": ("token(s) after stop id 99", "stop_missed_mid_round"),
    "stops_on_a_drafted_stop": ("a request ends at a stop id [99] or max_new_tokens=23", "request_ended_early"),
    "logprobs_all_zero": ("reported 0.0000", "logprobs_not_target"),
    "logprobs_of_the_draft": ("logprobs differ from the target's processed law", "logprobs_not_target"),
    "padded_vocab_recovery": ("outside [0, 100)", "id_outside_vocab"),
    "one_stream_for_every_request": ("the randomness does not follow the request's seed", "seed_not_honoured"),
}


@pytest.fixture(scope="module")
def pairs():
    return lm_pairs(vocab=100, seed=0)


@pytest.mark.parametrize("make", (*R.CORRECT, lm_generator.make), ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_correct_request_handling_passes(pairs, make):
    v = audit_lm_pairs(make, pairs, **FAST)
    assert v.status == "PASS", v.headline()
    stop = next(c for c in v.checks if "stop_token_ids=(99,)" in c.name)
    assert stop.status == "PASS" and stop.details["stops"]["observed"] > 0, stop.details
    assert any("/ 512 tokens /" in c.name and c.status == "PASS" for c in v.checks)
    assert v.diagnosis is None


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_buggy_request_handling_fails_with_its_finding(pairs, name):
    v = audit_lm_pairs(getattr(R, name), pairs, **FAST)
    assert v.status == "FAIL", v.headline()
    failed = " | ".join(c.summary for c in v.checks if c.status == "FAIL")
    words, named = FINDINGS[name]
    assert words in failed, failed
    # an exact finding's signature names the class (alone, or beside statistics whose tokens fit no class)
    assert v.diagnosis is not None and v.diagnosis["verdict"] == named, v.diagnosis


def test_a_cache_that_keeps_rejected_drafts_past_256_tokens_fails_the_greedy_check_over_512(pairs):
    # ml-explore/mlx-lm#846 behind a 256-token rotating cache: greedy output diverges after ~250 tokens,
    # which the greedy check sees only because it runs over the long unit's length
    # eps 0.25: the FAIL is the exact greedy check's; the statistical units only have to PASS. One
    # prompt: the cache rotates in every request past 256 tokens (the default 8 prompts: 88 s, this 10 s)
    one = ((5, 17, 3),)
    v = audit_lm_pairs(
        R.rotating_cache_keeps_rejected, pairs, settings=(), seed=1, stop_token_ids=(), eps=0.25, prompts=one
    )
    assert v.status == "FAIL", v.headline()
    (greedy,) = [c for c in v.checks if c.name.startswith("greedy equivalence")]
    at = int(greedy.summary.split("first at token ")[1].split(":")[0])
    assert at >= 200, greedy.summary
    short = audit_lm_pairs(R.rotating_cache_keeps_rejected, pairs, settings=(), seed=1, long_length=0, eps=0.25)
    assert short.status == "PASS", short.headline()  # 20 tokens per prompt never reach the rotation


def test_a_bug_from_offset_256_on_fails_only_the_long_unit(pairs):
    v = audit_lm_pairs(R.draft_buffer_of_one_block, pairs, settings=SETTING, eps=0.25, seed=1, greedy_check=False)
    assert v.status == "FAIL", v.headline()
    status = {c.name: c.status for c in v.checks}
    assert status["settings[0] temperature=0.9 / low-overlap pair"] == "PASS", status
    assert status["settings[0] temperature=0.9 / 512 tokens / low-overlap pair"] == "FAIL", status


def test_a_stop_claimed_mid_round_and_the_length_cap_are_told_apart():
    s = SamplingSettings(stop_token_ids=(9,))
    assert request_problem([1, 2, 9], 5, s, 10) is None  # ended at a stop
    assert request_problem([1, 2, 3, 4, 5], 5, s, 10) is None  # ended at the cap
    cases = {
        "stop_missed_mid_round": ([1, 2, 9, 4, 5], s, "2 token(s) after stop id 9 (token 2 of 5"),
        "request_ended_early": ([1, 2], s, "a request ends at a stop id [9] or max_new_tokens=5"),
        "over_max_tokens": ([1] * 6, s, "returned 6 tokens for max_new_tokens=5"),
        "id_outside_vocab": ([1, 10], s, "outside [0, 10)"),
    }
    for signature, (ids, settings, words) in cases.items():
        problem = request_problem(ids, 5, settings, 10)
        assert problem is not None and problem.signature == signature and words in problem.text, problem
    # without stop ids a request runs to max_new_tokens
    assert "a request ends at max_new_tokens=5" in request_problem([1, 9], 5, SamplingSettings(), 10).text


def test_the_stop_count_is_valid_under_the_null_and_sees_skipped_stops():
    rng = np.random.default_rng(0)
    null = [event_count_test(rng.random(3000) < p, p).pvalue for p in rng.uniform(0, 0.1, (400, 3000))]
    assert np.mean(np.asarray(null) <= 0.01) <= 0.01  # conservative (Ville with a union over 48 lambdas)
    p = rng.uniform(0.02, 0.1, 60_000)
    skipped = (rng.random(p.size) < p) & (rng.random(p.size) < 0.85)  # 15% of the stops skipped
    r = event_count_test(skipped, p)
    assert r.pvalue < 1e-9 and r.direction == "fewer", r


def test_outputs_with_logprobs_are_parsed_and_malformed_ones_named():
    out = parse_output({"ids": [1, 2], "logprobs": [-0.5, -1.0], "top_logprobs": [{1: -0.5}, [(2, -1.0)]]}, "gen")
    assert out.ids == [1, 2] and out.logprobs == [-0.5, -1.0] and out.top_logprobs == [{1: -0.5}, {2: -1.0}]
    assert parse_output(np.array([3, 4]), "gen").logprobs is None
    with pytest.raises(MalformedOutputError, match="1 logprobs for 2 ids"):
        parse_output({"ids": [1, 2], "logprobs": [-0.5]}, "gen")
    with pytest.raises(MalformedOutputError, match="no 'ids'"):
        parse_output({"tokens": [1, 2]}, "gen")


# -- through the installed CLI, from a folder outside the repository, at 80 columns ------------------

CLI = Path(sys.executable).parent / "specverify"
CLI_FAST = ["--eps", "0.4", "--temperature", "0.9", "--long-length", "64", "--vocab", "100", "--no-progress"]


def _cli(*args, cwd, module_form=False):
    import os
    import subprocess

    head = [sys.executable, "-m", "specverify"] if module_form else [str(CLI)]
    env = {**os.environ, "COLUMNS": "80", "OMP_NUM_THREADS": "1"}
    return subprocess.run([*head, "audit", *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def _body(stdout):
    """The check lines (the diagnosis lead and the headline are single lines by design: grep-able)."""
    lines = stdout.splitlines()
    return [ln for ln in lines if not ln.startswith(("Diagnosis:", "  - ", "PASS:", "FAIL ", "FAIL:"))]


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A user's folder: the docs' worked generator and a copy of the request-level generators."""
    import shutil

    d = tmp_path_factory.mktemp("user")
    shutil.copy(Path(lm_generator.__file__), d / "lm_generator.py")
    shutil.copy(Path(R.__file__), d / "mygens.py")
    return d


def test_the_cli_passes_the_worked_generator_from_outside_the_repository(outside):
    r = _cli("--lm-generator", "lm_generator:make", *CLI_FAST, cwd=outside)
    assert r.returncode == 0, r.stdout + r.stderr
    assert max(map(len, _body(r.stdout))) <= 80, r.stdout
    out = " ".join(r.stdout.split())  # the 80-column layout wraps lines
    assert "stop_token_ids=(99,)" in out and "requests ended at a stop id" in out, r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("PASS: no deviation of TV >= "), r.stdout


def test_the_cli_gives_one_verdict_for_any_workers(outside, tmp_path):
    """--lm-generator samples its units in forks, --workers at once (default: the cores), each from
    the state the generator had at the start: the same JSON, to the sample, and the same report for 1
    and 3, for a generator whose drafts per round carry over from request to request."""
    import json

    outs, texts = [], []
    for workers in ("1", "3"):
        out = tmp_path / f"w{workers}.json"
        r = _cli(
            "--lm-generator", "mygens:persistent_schedule_correct", *CLI_FAST, "--workers", workers, "--json", str(out),
            cwd=outside,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        d = json.loads(out.read_text())
        d.pop("seconds")
        outs.append(d)
        texts.append(r.stdout)
    assert outs[0] == outs[1] and texts[0] == texts[1]
    assert outs[0]["status"] == "PASS" and outs[0]["samples"] > 500


def test_the_module_form_fails_a_stop_missed_mid_round_and_names_it(outside):
    r = _cli("--lm-generator", "mygens:eos_checked_on_last_token", *CLI_FAST, cwd=outside, module_form=True)
    assert r.returncode == 1, r.stdout + r.stderr
    out = " ".join(r.stdout.split())  # the 80-column layout wraps lines
    assert "after stop id 99" in out, r.stdout
    assert "Diagnosis: stop_missed_mid_round (signature of the exact request check" in r.stdout, r.stdout
    assert max(map(len, _body(r.stdout))) <= 80, r.stdout


def test_cli_request_options_are_refused_where_they_do_not_apply(outside):
    r = _cli("--generator", "mygens:x", "--stop-token-ids", "3", cwd=outside)
    assert r.returncode == 2 and "--stop-token-ids applies to --endpoint" in r.stderr, r.stderr
    r = _cli("--lm-generator", "mygens:eos_checked_on_last_token", "--context", "transformers", cwd=outside)
    assert r.returncode == 2 and "--context does not apply to --lm-generator" in r.stderr, r.stderr


def test_a_round_step_whose_cache_rotates_at_256_tokens_fails_only_the_long_unit():
    from user_impls.round_numpy import step_rotating_cache_256

    from specverify.audit import RoundAdapter, audit

    v = audit(RoundAdapter(step_rotating_cache_256), eps=0.2, exact_checks=False, diagnose=False)
    assert v.status == "FAIL", v.headline()
    failed = [c.name for c in v.checks if c.status == "FAIL"]
    assert failed == ["settings[0] default / 512 tokens / low-overlap pair"], failed


def test_a_kernel_that_samples_a_padded_tile_fails_only_on_the_odd_vocabulary():
    # vllm-project/vllm#44744: the default 64 ids fill whole tiles of 64; the 101-id unit has a tail
    from user_impls.kernels import kernel_padded_tile

    from specverify.audit import KernelAdapter, audit

    v = audit(KernelAdapter(kernel_padded_tile), eps=0.2, exact_checks=False, diagnose=False)
    assert v.status == "FAIL", v.headline()
    (failed,) = [c for c in v.checks if c.status == "FAIL"]
    assert "vocabulary 101, ids 0 and 100 heavy" in failed.name, failed.name
    assert ">= vocabulary size 101" in failed.summary, failed.summary


@pytest.mark.parametrize("mode", ["assisted", "prompt_lookup"])
def test_transformers_speculation_ends_requests_at_a_stop_accepted_mid_round(pairs, mode):
    # huggingface/transformers#47912 (fixed by #48981, before the 5.24 installed here): the stop
    # unit passes eos_token_id, so a stop accepted inside a round must end the request there
    from specverify.audit.sources.transformers_adapters import hf_generator

    def make(target, draft):
        return hf_generator(target, mode=mode, assistant=draft if mode == "assisted" else None, gamma=4)

    v = audit_lm_pairs(make, pairs, settings=SETTING, eps=0.3, seed=1, long_length=64)
    assert v.status == "PASS", v.headline()
    stop = next(c for c in v.checks if "stop_token_ids=(99,)" in c.name)
    # stops met in a quarter of the requests or more: the unit exercised them (the count is tested as a law)
    assert stop.details["stops"]["observed"] >= 5, stop.details


def test_a_failed_greedy_check_alone_gets_no_diagnosis(pairs):
    # the sampled tokens did not deviate: scoring them class by class could only name a wrong class
    from specverify.runners import speculative_generate

    def make(target, draft):
        def generate(prompt, n, seed, s):
            if s.is_greedy:
                raise RuntimeError("this loop has no greedy path")
            return speculative_generate(target, draft, prompt, n, s, torch.Generator().manual_seed(seed)).tokens

        return generate

    v = audit_lm_pairs(make, pairs, eps=0.3, seed=1, long_length=64)
    assert v.status == "FAIL" and v.headline().startswith("FAIL in exact check 'greedy equivalence"), v.headline()
    assert v.diagnosis is None, v.diagnosis


def test_greedy_over_512_tokens_sees_a_divergence_that_32_token_runs_miss():
    from user_impls.greedy import greedy_rotating_cache_256

    from specverify.audit import RoundAdapter, audit

    v = audit(RoundAdapter(greedy_rotating_cache_256), settings=(SamplingSettings(temperature=0.0),), diagnose=False)
    status = {c.name: c.status for c in v.checks}
    assert status["greedy equivalence (raw rows: ties, near ties, draft disagreements)"] == "PASS", status
    assert status["greedy equivalence over 512-token sequences (raw rows)"] == "FAIL", status


def test_the_default_pairs_law_depends_on_the_context_not_only_the_last_token():
    # a random init attends almost uniformly: wrong tokens in the context (a cache that keeps
    # rejected drafts, mlx-lm#846) barely move the law; attention_scale makes them matter
    from specverify.lm.transformers_lm import build_model

    g = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, 99, (4, 120), generator=g)
    junk = ctx.clone()
    junk[:, 90:118:3] = torch.randint(0, 99, (4, 10), generator=g)  # the last token kept

    def moved(scale):
        m = build_model(
            "llama", vocab=100, hidden=32, layers=2, heads=2, seed=0, lm_head_scale=6.0, attention_scale=scale
        )
        with torch.no_grad():
            a, b = (torch.softmax(m(x).logits[:, -1].double(), -1) for x in (ctx, junk))
        return float(0.5 * (a - b).abs().sum(-1).mean())

    assert moved(1000.0) > 3 * moved(1.0), (moved(1.0), moved(1000.0))  # 0.011 -> 0.053 at seed 0
