"""LM audits with ``workers > 1``: each unit is sampled in a fork of the auditing process, that many
at once, and the verdict is the one the units sampled in turn give (each unit draws from its own
seed stream). What a fork cannot bring back is a finding or a checkpoint, never a lost audit: a
generator that ends its process FAILs its unit, and an interrupted audit resumes from the units'
own checkpoint files. Fixed seeds: every verdict here is deterministic."""

from __future__ import annotations

import os

import pytest
import torch
from golden_cases import differences, normalised

from specverify import SamplingSettings
from specverify.audit import audit_lm_pairs, lm_pairs
from specverify.runners import speculative_generate

torch.set_num_threads(1)
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="units are sampled in forks")
SETTINGS = (SamplingSettings(temperature=0.9, min_p=0.1), SamplingSettings(temperature=0.7))
FAST = dict(settings=SETTINGS, eps=0.25, greedy_check=False, seed=2, long_length=48)


@pytest.fixture(scope="module")
def pairs():
    return lm_pairs(vocab=128, seed=0)


def runner(target, draft):
    def generate(prompt, n, seed, s):
        return speculative_generate(target, draft, prompt, n, s, torch.Generator().manual_seed(seed), gamma=4).tokens

    return generate


def draft_only(target, draft):
    """Samples the draft model alone: every unit FAILs (its tokens follow the draft's law)."""
    return runner(draft, draft)


def same(a, b):
    return not differences(normalised(a.to_dict()), normalised(b.to_dict()))


def test_units_sampled_in_forks_give_the_verdict_of_units_sampled_in_turn(pairs):
    """The final checks (greedy, seeds) run in forks beside the last units, and count the same."""
    options = dict(FAST, greedy_check=True)
    serial = audit_lm_pairs(runner, pairs, **options)
    forked = audit_lm_pairs(runner, pairs, workers=3, **options)
    assert serial.status == "PASS" and len(serial.checks) >= 7
    assert [c.check_id for c in serial.checks][-2:] == ["exact/greedy", "exact/seeds"]
    assert same(forked, serial), differences(normalised(forked.to_dict()), normalised(serial.to_dict()))[:5]


def test_fail_fast_in_forks_skips_what_it_skips_in_turn(pairs):
    serial = audit_lm_pairs(draft_only, pairs, fail_fast=True, diagnose=False, **FAST)
    forked = audit_lm_pairs(draft_only, pairs, fail_fast=True, diagnose=False, workers=2, **FAST)
    statuses = [c.status for c in serial.checks]
    assert statuses[0] == "FAIL" and statuses[1:] == ["SKIPPED"] * (len(statuses) - 1)
    assert same(forked, serial)  # the unit in flight beside the first is dropped, as in turn it never ran


def test_a_generator_that_ends_its_process_fails_its_unit(pairs):
    def ends(target, draft):
        inner = runner(target, draft)

        def generate(prompt, n, seed, s):
            if draft is pairs[1].draft:  # the high-overlap units
                os._exit(3)
            return inner(prompt, n, seed, s)

        return generate

    v = audit_lm_pairs(ends, pairs, workers=2, diagnose=False, **FAST)
    assert v.status == "FAIL"
    failed = [c for c in v.checks if c.status == "FAIL"]
    assert failed and all("high-overlap" in c.name for c in failed)
    assert "ended inside the implementation (exit status 3)" in failed[0].summary
    assert all(c.status == "PASS" for c in v.checks if "low-overlap" in c.name)


def test_an_interrupted_forked_audit_resumes_to_the_uninterrupted_verdict(pairs, tmp_path):
    calls, log = {"n": 0, "stop": False}, tmp_path / "requests.log"

    def interrupted(target, draft):
        inner = runner(target, draft)

        def generate(prompt, n, seed, s):
            calls["n"] += 1  # counted in each fork: every unit stops at its 25th request
            if calls["stop"] and calls["n"] == 25:
                raise KeyboardInterrupt
            with open(log, "a") as f:  # the forks' requests, counted here
                f.write(f"{seed}\n")
            return inner(prompt, n, seed, s)

        generate.__qualname__ = inner.__qualname__  # the same generator, as the fingerprint sees it
        return generate

    whole = audit_lm_pairs(interrupted, pairs, workers=2, **FAST)
    requests_whole = len(log.read_text().split())
    log.unlink()
    calls["stop"], path = True, tmp_path / "lm.ckpt"
    with pytest.raises(KeyboardInterrupt):
        audit_lm_pairs(interrupted, pairs, workers=2, checkpoint=str(path), call_timeout=None, **FAST)
    units = sorted(p.name for p in tmp_path.iterdir())
    assert "lm.ckpt.unit0" in units and "lm.ckpt.unit1" in units, units  # the forks' progress is kept
    calls["stop"] = False
    log.unlink()
    resumed = audit_lm_pairs(interrupted, pairs, workers=2, checkpoint=str(path), resume=True, **FAST)
    assert same(resumed, whole)
    # units 0 and 1 went on from their files (each holds its first request at least: the cadence is 2 s)
    assert len(log.read_text().split()) <= requests_whole - 2
    log.unlink()
    assert resumed.status == "PASS" and not list(tmp_path.iterdir())  # a finished audit removes every file


def test_a_generator_that_ends_its_process_in_the_greedy_check_fails_that_check(pairs):
    def ends_when_greedy(target, draft):
        inner = runner(target, draft)

        def generate(prompt, n, seed, s):
            if s.is_greedy:
                os._exit(5)
            return inner(prompt, n, seed, s)

        return generate

    v = audit_lm_pairs(ends_when_greedy, pairs, workers=2, diagnose=False, **dict(FAST, greedy_check=True))
    failed = [c for c in v.checks if c.status == "FAIL"]
    assert [c.check_id for c in failed] == ["exact/greedy"], v.checks
    assert failed[0].summary.startswith(
        "the process running the check 'greedy equivalence (tie-aware)' ended inside the implementation (exit status 5)"
    )


def stateful(target, draft):
    """Lossless, with a state across requests: its gamma cycles with the requests it has served, so
    which draws make a unit's tokens depends on the units before it in the same process."""
    served = [0]

    def generate(prompt, n, seed, s):
        served[0] += 1
        g = torch.Generator().manual_seed(seed)
        return speculative_generate(target, draft, prompt, n, s, g, gamma=1 + served[0] % 4).tokens

    return generate


def test_isolated_units_give_a_stateful_generator_the_verdict_of_any_workers(pairs):
    in_turn = audit_lm_pairs(stateful, pairs, **FAST)
    isolated = audit_lm_pairs(stateful, pairs, isolate_units=True, **FAST)
    forked = audit_lm_pairs(stateful, pairs, workers=2, **FAST)
    assert isolated.status == forked.status == in_turn.status == "PASS"
    assert same(isolated, forked), differences(normalised(isolated.to_dict()), normalised(forked.to_dict()))[:5]
    assert not same(in_turn, forked)  # in turn, each unit starts from the state the ones before left


def test_isolated_units_where_this_process_cannot_fork(pairs, monkeypatch):
    from specverify.audit.sources import lm_audit
    from specverify.errors import SpecVerifyError

    monkeypatch.setattr(lm_audit, "_unforkable", lambda: "and a fork cannot use the CUDA context this process holds")
    with pytest.raises(SpecVerifyError, match=r"isolate_units=True samples units in forked processes, and a fork "
                       r"cannot use the CUDA context this process holds; pass isolate_units=False"):  # fmt: skip
        audit_lm_pairs(stateful, pairs, isolate_units=True, **FAST)
    with pytest.raises(SpecVerifyError, match=r"workers=2 .* pass workers=1 \(the units then run in turn here\)"):
        audit_lm_pairs(stateful, pairs, workers=2, **FAST)
    where_possible = audit_lm_pairs(stateful, pairs, isolate_units=None, **FAST)  # the CLI's: in turn here
    assert same(where_possible, audit_lm_pairs(stateful, pairs, **FAST))
