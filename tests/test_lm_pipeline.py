"""LM audits run the table audit's stages (checkpoints and resume included): a plan by pair kind
when specverify builds the models, typed options, and a diagnosis after a FAIL (settings dropped on
the speculative path, drafts kept unverified), each case modelled on a real report. Fixed seeds:
each verdict is deterministic."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from specverify import SamplingSettings
from specverify.audit import audit_lm, audit_lm_pairs, lm_pairs
from specverify.diagnosis import NOT_KNOWN
from specverify.dists import probs_from_logits
from specverify.errors import SpecVerifyError
from specverify.lm.transformers_lm import CausalLM, KVSession
from specverify.runners import speculative_generate

torch.set_num_threads(1)
SETTING = (SamplingSettings(temperature=0.9, min_p=0.1),)
FAST = dict(settings=SETTING, eps=0.2, greedy_check=False, seed=1)


@pytest.fixture(scope="module")
def pairs():
    return lm_pairs(vocab=128, seed=0)


def runner(target, draft, *, drop: str | None = None):
    """specverify's chain runner; ``drop`` resets one knob of the request before it runs."""

    def generate(prompt, n, seed, s):
        if drop:
            s = dataclasses.replace(s, **{drop: SamplingSettings().to_dict()[drop]})
        return speculative_generate(target, draft, prompt, n, s, torch.Generator().manual_seed(seed), gamma=4).tokens

    return generate


def always_accept(target, draft, gamma: int = 4):
    """Keeps every draft, then one target token per round (no verification at all)."""
    T, D = CausalLM(target), CausalLM(draft)

    def generate(prompt, n, seed, s):
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            for model in [D] * gamma + [T]:
                row = probs_from_logits(model.logits(list(prompt) + out)[-1].double().numpy(), s)
                out.append(int(rng.choice(len(row), p=row)))
        return out[:n]

    return generate


def test_a_correct_runner_passes_on_both_overlaps(pairs):
    v = audit_lm_pairs(runner, pairs, **FAST)
    assert v.status == "PASS", v.headline()
    assert [c.name for c in v.checks] == [
        "settings[0] temperature=0.9,min_p=0.1 / low-overlap pair",
        "settings[0] temperature=0.9,min_p=0.1 / high-overlap pair",
        # the request units: requests that end at the pairs' EOS (the last id), and long outputs
        "settings[0] temperature=0.9,min_p=0.1,stop_token_ids=(127,) / high-overlap pair",
        "settings[0] temperature=0.9,min_p=0.1 / 512 tokens / low-overlap pair",
        "seed independence",  # six seeds, six different samples
    ]
    assert v.diagnosis is None


def test_min_p_dropped_on_the_speculative_path_is_named(pairs):
    # sgl-project/sglang#10617: min_p (and logit_bias) not applied with EAGLE. The caller's own model,
    # draft unknown to the auditor: the settings classes need the target alone.
    t, d = pairs[1].target, pairs[1].draft
    v = audit_lm(runner(t, d, drop="min_p"), t, **FAST)
    assert v.status == "FAIL"
    assert v.diagnosis["verdict"] == "min_p_ignored", v.diagnosis["lead"]
    assert v.diagnosis["lead"].startswith("Diagnosis: most likely min_p_ignored")
    assert "min-p not applied" in " ".join(v.diagnosis["facts"])


def test_a_temperature_not_forwarded_is_named(pairs):
    # huggingface/transformers#28166-like: the request's temperature does not reach the speculative path.
    v = audit_lm_pairs(lambda t, d: runner(t, d, drop="temperature"), pairs, **FAST)
    assert v.status == "FAIL"
    assert v.diagnosis["verdict"] == "temperature_ignored", v.diagnosis["lead"]


def test_drafts_kept_unverified_are_named_with_the_draft_known(pairs):
    v = audit_lm_pairs(always_accept, pairs, **FAST)
    assert v.status == "FAIL"
    assert v.diagnosis["verdict"] == "always_accept", v.diagnosis["lead"]
    assert "rounds of 4 drafts + 1" in v.diagnosis["candidates"][0]["parameter"]


def test_a_bug_outside_every_class_is_not_a_known_class(pairs, monkeypatch):
    # the caches keep rejected drafts (ml-explore/mlx-lm#846): no class of the LM scorer models it
    monkeypatch.setattr(KVSession, "rollback", lambda self, n: None)
    v = audit_lm_pairs(runner, pairs, **FAST)
    assert v.status == "FAIL"
    assert v.diagnosis["verdict"] == NOT_KNOWN, v.diagnosis["lead"]
    assert v.diagnosis["lead"].startswith("Diagnosis: not a known class")


def test_float_ids_are_malformed_output_not_truncated(pairs):
    t = pairs[0].target

    def floats(prompt, n, seed, s):
        return [1.0 + 0.5] * n

    v = audit_lm(floats, t, **FAST)
    assert v.status == "FAIL"
    assert "dtype" in v.checks[0].summary or "float" in v.checks[0].summary, v.checks[0].summary
    assert v.diagnosis is None  # the implementation's own failure needs no ranking of root causes


def test_an_unknown_option_is_an_error_that_names_the_options(pairs):
    with pytest.raises(SpecVerifyError, match=r"unknown option\(s\) promtps.*prompts"):
        audit_lm(runner(pairs[0].target, pairs[0].draft), pairs[0].target, promtps=[[1, 2]])


def test_pairs_without_a_draft_or_a_shared_target_are_refused(pairs):
    with pytest.raises(SpecVerifyError, match="share one target and each have a draft"):
        audit_lm_pairs(runner, (dataclasses.replace(pairs[0], draft=None),))


def test_an_interrupted_lm_audit_resumes_to_the_uninterrupted_verdict(pairs, tmp_path):
    import json

    from golden_cases import differences, normalised

    t, d = pairs[1].target, pairs[1].draft
    gen = runner(t, d)
    options = dict(settings=SETTING + (SamplingSettings(temperature=0.7),), eps=0.2, greedy_check=False, seed=3)
    whole = audit_lm(gen, t, **options)
    calls = {"n": 0}

    def interrupted(prompt, n, seed, s):
        calls["n"] += 1
        if calls["n"] == 40:  # in the middle of the first unit
            raise KeyboardInterrupt
        return gen(prompt, n, seed, s)

    interrupted.__qualname__ = gen.__qualname__  # the same generator, as the fingerprint sees it
    path = str(tmp_path / "lm.ckpt")
    with pytest.raises(KeyboardInterrupt):  # call_timeout=None: calls run in this thread, as a Ctrl-C meets them
        audit_lm(interrupted, t, checkpoint=path, call_timeout=None, **options)
    assert json.loads(Path(path).read_text())["units"]["0"]["sequences"], "the checkpoint holds what was collected"
    resumed = audit_lm(interrupted, t, checkpoint=path, resume=True, **options)
    diff = differences(normalised(resumed.to_dict()), normalised(whole.to_dict()))
    assert not diff, diff[:5]
    assert resumed.status == "PASS" and not (tmp_path / "lm.ckpt").exists()  # a finished audit removes it
    # a time cap leaves its checkpoint; resumed with a larger budget, the same verdict again
    cut = audit_lm(gen, t, checkpoint=path, budget_s=1e-9, **options)
    assert cut.status == "INCONCLUSIVE" and (tmp_path / "lm.ckpt").exists()
    again = audit_lm(gen, t, checkpoint=path, resume=True, **options)
    assert not differences(normalised(again.to_dict()), normalised(whole.to_dict()))


def test_a_checkpoint_of_other_options_is_refused(pairs, tmp_path):
    t, d = pairs[1].target, pairs[1].draft
    path = str(tmp_path / "lm.ckpt")
    calls = {"n": 0}

    def stops(prompt, n, seed, s):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return runner(t, d)(prompt, n, seed, s)

    with pytest.raises(KeyboardInterrupt):
        audit_lm(stops, t, checkpoint=path, call_timeout=None, **FAST)
    with pytest.raises(SpecVerifyError, match="belongs to another audit"):
        audit_lm(stops, t, checkpoint=path, resume=True, **{**FAST, "eps": 0.3})
    with pytest.raises(SpecVerifyError, match="needs the checkpoint file"):
        audit_lm(stops, t, checkpoint=str(tmp_path / "none"), resume=True, **FAST)


def test_requests_longer_than_the_targets_positions_are_refused_before_sampling():
    """An engine cuts such a request at its context length (vLLM's max_model_len), which would read
    as the engine's finding: the audit refuses it up front, naming the bound and the fix."""
    from specverify.lm.transformers_lm import build_model

    target = build_model("llama", vocab=32, hidden=16, layers=1, heads=2, max_positions=64)
    calls = []

    def generate(prompt, n, seed, settings):
        calls.append(n)
        return [0] * n

    with pytest.raises(SpecVerifyError, match=r"target has 64 \(max_position_embeddings\); pass long_length <= 60"):
        audit_lm(generate, target, prompts=[[1, 2, 3, 4]], long_length=100)
    assert not calls


def bonus_reuses_the_last_drafts_uniform(target, draft, gamma: int = 4):
    """The full rule by inverse CDF, except that the bonus is drawn with the uniform that drew the last
    draft (flashinfer-ai/flashinfer#424's class): each token's own law is exact, consecutive ones are not
    independent."""
    T, D = CausalLM(target), CausalLM(draft)

    def icdf(row, u):
        return int(min(np.searchsorted(np.cumsum(row), u * row.sum(), side="right"), len(row) - 1))

    def generate(prompt, n, seed, s):
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            ctx, xs, qs, us = list(prompt) + out, [], [], []
            for _ in range(gamma):
                qs.append(probs_from_logits(D.logits(ctx + xs)[-1].double().numpy(), s))
                us.append(rng.random())
                xs.append(icdf(qs[-1], us[-1]))
            P = probs_from_logits(T.logits(ctx + xs)[len(ctx) - 1 :].double().numpy(), s)
            for j, x in enumerate(xs):
                if rng.random() >= P[j][x] / qs[j][x]:
                    out += xs[:j] + [icdf(np.maximum(P[j] - qs[j], 0.0), rng.random())]
                    break
            else:
                out += xs + [icdf(P[gamma], us[-1])]
        return out[:n]

    return generate


def test_randomness_shared_across_positions_fails_on_the_consecutive_pairs(pairs):
    """Every token's own law passes; the pairs fail (on the high-overlap pair, where full acceptances
    draw the bonus). At eps 0.2 (800 tokens) the pairs fill only four groups and p = 4e-6 stays above
    the family's alpha; at 0.1 (3,200 tokens) p = 3e-24."""
    high = [p for p in pairs if p.kind == "high"]
    options = {**FAST, "eps": 0.1, "long_length": 0, "stop_token_ids": ()}
    v = audit_lm_pairs(bonus_reuses_the_last_drafts_uniform, high, **options)
    assert v.status == "FAIL", v.headline()
    failed = [c for c in v.checks if c.status == "FAIL"]
    assert [c.stratum for c in failed] == ["consecutive tokens"], [c.summary for c in failed]
    assert failed[0].details["consecutive_pairs"]["pvalue"] < 1e-12
