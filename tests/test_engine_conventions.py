"""Engines that compute in low precision, and engines that order the pipeline differently.

* ``filter_boundaries``: the tokens top-k / top-p / min-p keep under every and under some
  perturbation of the logits within a tolerance, checked against brute force (random and extreme
  sign perturbations), and the bound on the mass an engine can put on the ambiguous ones.
* ``audit_lm(logit_tol=...)``: an engine whose logits are bfloat16-rounded float64 logits FAILs an
  exact audit (it emits tokens the float64 filters drop) and PASSes with the tolerance; an engine
  that keeps one token too many still FAILs with it, and so does one that favours boundary tokens
  more than the tolerance allows (the count test).
* ``temperature_last`` (llama.cpp's order) and ``penalize_prompt=False`` (llama-cpp-python's
  repetition penalty, which never sees the prompt): the pipeline, its torch form, the laws the
  auditor computes, and the adapters that refuse conventions they cannot follow (UNSUPPORTED,
  never FAIL).
"""

import copy

import numpy as np
import pytest
import torch

from specverify import SamplingSettings
from specverify.audit.sources.lm_audit import audit_lm
from specverify.audit.sources.transformers_adapters import hf_kwargs
from specverify.dists import filter_boundaries, probs_from_logits, process_logits, token_counts
from specverify.dists.torch_ops import process_logits_torch
from specverify.engines.llama_cpp import completion_kwargs
from specverify.engines.vllm import sampling_params_kwargs
from specverify.errors import UnsupportedSettingError
from specverify.lm.transformers_lm import CausalLM, layered_target

torch.set_num_threads(1)

FILTERS = [
    SamplingSettings(top_k=5),
    SamplingSettings(top_p=0.8),
    SamplingSettings(min_p=0.1),
    SamplingSettings(temperature=0.8, top_k=5, top_p=0.8, min_p=0.1, repetition_penalty=1.3),
    SamplingSettings(temperature=0.6, top_p=0.8, min_p=0.05, temperature_last=True),
]


def _kept(x, s, seen):
    return probs_from_logits(x, s, seen_counts=seen) > 0


@pytest.mark.parametrize("s", FILTERS, ids=lambda s: s.short())
def test_boundary_sets_contain_every_perturbed_kept_set(s):
    rng = np.random.default_rng(0)
    x, tol = rng.normal(size=(300, 40)) * 2, 0.03
    seen = (rng.random(x.shape) < 0.3).astype(float)
    b = filter_boundaries(x, s, tol=tol, seen_counts=seen)
    nominal = _kept(x, s, seen)
    assert (b.sure <= nominal).all() and (nominal <= b.possible).all()
    assert b.ambiguous.any(), "the case must have boundary tokens to be a test"
    for _ in range(200):  # random, and extreme (every logit at +-tol)
        for noise in (rng.uniform(-tol, tol, x.shape), tol * rng.choice([-1.0, 1.0], x.shape)):
            k = _kept(x + noise, s, seen)
            assert (b.sure <= k).all() and (k <= b.possible).all()


def test_the_extreme_perturbations_reach_both_ends():
    """The sets are not merely wide: each ambiguous token is kept by some perturbation within the
    tolerance (at top-k, the token just below the cut raised, those above lowered) and dropped
    by another."""
    x, s, tol = np.array([[3.0, 2.0, 1.0, 0.99, -1.0]]), SamplingSettings(top_k=3), 0.01
    b = filter_boundaries(x, s, tol=tol)
    assert b.sure[0].tolist() == [True, True, False, False, False]
    assert b.possible[0].tolist() == [True, True, True, True, False]
    assert _kept(x + np.array([[0, 0, -tol, tol, 0]]), s, None)[0, 3]
    assert not _kept(x + np.array([[0, 0, tol, -tol, 0]]), s, None)[0, 3]


@pytest.mark.parametrize("s", FILTERS, ids=lambda s: s.short())
def test_ambiguous_bound_holds_for_every_perturbed_law(s):
    rng = np.random.default_rng(1)
    x, tol = rng.normal(size=(300, 40)) * 2, 0.03
    seen = (rng.random(x.shape) < 0.3).astype(float)
    b = filter_boundaries(x, s, tol=tol, seen_counts=seen)
    for _ in range(100):
        p = probs_from_logits(x + tol * rng.choice([-1.0, 1.0], x.shape), s, seen_counts=seen)
        assert (np.where(b.ambiguous, p, 0).sum(-1) <= b.ambiguous_bound + 1e-12).all()


def test_no_tolerance_or_no_filter_leaves_the_law_alone():
    x = np.random.default_rng(2).normal(size=(20, 30))
    b = filter_boundaries(x, SamplingSettings(top_k=4), tol=0.0)
    assert (b.sure == b.possible).all() and (b.sure == _kept(x, SamplingSettings(top_k=4), None)).all()
    b = filter_boundaries(x, SamplingSettings(temperature=0.7), tol=0.5)
    assert b.sure.all() and not b.ambiguous_bound.any()
    with pytest.raises(ValueError, match="finite and >= 0"):
        filter_boundaries(x, SamplingSettings(top_k=4), tol=-1.0)


# -- audits of low-precision engines ------------------------------------------------------------


@pytest.fixture(scope="module")
def target():
    return layered_target("llama", vocab=48, hidden=32, layers=2, heads=2, seed=7, lm_head_scale=20.0)


def _engine(model, *, extra_k: int = 0, favour: float = 1.0, tol: float = 0.0):
    """A sampling engine on ``model`` with bfloat16-rounded logits. Bugs: ``extra_k`` keeps that many
    tokens more than top-k; ``favour`` multiplies the weight of tokens at an ambiguous boundary
    (for a tolerance ``tol``) and keeps every possible one."""

    def generate(prompt, n, seed, s):
        rng, ids = np.random.default_rng(seed), list(prompt)
        for _ in range(n):
            with torch.no_grad():
                x = model(torch.tensor([ids])).logits[0, -1].double()
            x = x.to(torch.bfloat16).double().numpy()[None]
            seen = np.bincount(ids, minlength=x.shape[1])[None].astype(float)
            sk = SamplingSettings(**{**s.to_dict(), "top_k": s.top_k + extra_k}) if s.top_k else s
            w = probs_from_logits(x, sk, seen_counts=seen)[0]
            if favour != 1.0:
                b = filter_boundaries(x, s, tol=tol, seen_counts=seen)
                w = np.where(b.possible[0], np.exp(x[0] / s.temperature), 0) * np.where(b.ambiguous[0], favour, 1)
            ids.append(int(rng.choice(len(w), p=w / w.sum())))
        return ids[len(prompt) :]

    return generate


PROMPTS = [[1, 2, 3], [4, 5, 6, 7], [8, 9], [10, 11, 12]]
TOP_K = (SamplingSettings(top_k=2),)


def _audit(target, gen, **kw):
    kw = dict(prompts=PROMPTS, settings=TOP_K, eps=0.2, greedy_check=False, length=16, seed=3) | kw
    return audit_lm(gen, target, **kw)


def test_a_bfloat16_engine_fails_exactly_and_passes_within_its_logit_error(target):
    """bf16 keeps 8 significant bits: logits of size ~20 are off by up to ~0.04."""
    exact = _audit(target, _engine(target))
    assert exact.status == "FAIL" and "had probability 0" in exact.checks[0].summary, exact.checks[0].summary
    tolerant = _audit(target, _engine(target), logit_tol=0.08)
    c = tolerant.checks[0]
    assert tolerant.status == "PASS", c.summary
    assert c.details["boundary"]["excused"] >= 1 and "filter boundaries" in c.summary
    # n counts the tokens tested; those left out are sampled on top, not taken from the plan
    assert c.details["sequences"] * c.details["length"] == c.n + c.details["boundary"]["excused"]


def test_keeping_a_token_too_many_fails_within_the_tolerance(target):
    v = _audit(target, _engine(target, extra_k=1), logit_tol=0.08)
    assert v.status == "FAIL", v.checks[0].summary


def test_favouring_boundary_tokens_beyond_the_tolerance_fails_the_count(target):
    v = _audit(target, _engine(target, favour=30.0, tol=0.3), logit_tol=0.3)
    c = v.checks[0]
    assert v.status == "FAIL" and "more than logit errors of at most 0.3 explain" in c.summary, c.summary


def test_logit_tol_must_be_a_tolerance(target):
    with pytest.raises(ValueError, match="logit_tol=-0.1"):
        _audit(target, _engine(target), logit_tol=-0.1)


# -- temperature after the filters (llama.cpp's order) ------------------------------------------


def test_temperature_last_filters_first_then_divides():
    x = np.random.default_rng(3).normal(size=(50, 30)) * 2
    s = SamplingSettings(temperature=0.5, top_p=0.7, min_p=0.05, temperature_last=True)
    manual = process_logits(x, SamplingSettings(top_p=0.7, min_p=0.05)) / 0.5
    assert np.array_equal(process_logits(x, s), manual)
    hf = SamplingSettings(temperature=0.5, top_p=0.7, min_p=0.05)
    assert not np.array_equal(np.isfinite(process_logits(x, s)), np.isfinite(process_logits(x, hf)))
    torch_form = process_logits_torch(torch.tensor(x), s).numpy()
    np.testing.assert_allclose(
        np.where(np.isfinite(manual), manual, 0), np.where(np.isfinite(torch_form), torch_form, 0)
    )
    assert (np.isfinite(manual) == np.isfinite(torch_form)).all()


def test_each_engine_refuses_the_order_it_cannot_follow():
    hf_order = SamplingSettings(temperature=0.8, top_p=0.8)
    llama_order = SamplingSettings(temperature=0.8, top_p=0.8, temperature_last=True)
    with pytest.raises(
        UnsupportedSettingError, match="llama-cpp-python applies temperature after.*temperature_last=True"
    ):
        completion_kwargs(hf_order)
    assert completion_kwargs(llama_order)["temperature"] == 0.8
    for mapping in (sampling_params_kwargs, hf_kwargs):
        with pytest.raises(UnsupportedSettingError, match="before top-p/min-p.*temperature_last=False"):
            mapping(llama_order)
        mapping(hf_order)
    # where the order does not change the law, every engine takes either
    for s in (SamplingSettings(temperature=0.8, top_k=5, temperature_last=True), SamplingSettings(top_p=0.8)):
        completion_kwargs(s), sampling_params_kwargs(s)


def test_temperature_last_is_written_only_when_set():
    assert "temperature_last" not in SamplingSettings(temperature=0.7).to_dict()
    d = SamplingSettings(temperature=0.7, temperature_last=True).to_dict()
    assert d["temperature_last"] is True and SamplingSettings(**d).temperature_last
    assert SamplingSettings(temperature=0.7, temperature_last=True).short() == "temperature=0.7,temperature_last=True"


def test_penalize_prompt_false_counts_generated_tokens_only(target):
    """The auditor's law under llama-cpp-python's convention: the repetition penalty sees only the
    continuation, at every position (one teacher-forced pass, with and without boundaries)."""
    prompt, cont = [5, 6, 5, 6, 5, 6], [6, 7, 5, 9]
    s = SamplingSettings(top_k=4, repetition_penalty=2.0, penalize_prompt=False)
    model = copy.deepcopy(target).double()
    with torch.no_grad():
        lg = model(torch.tensor([prompt + cont])).logits[0].numpy()
    want = np.stack(
        [probs_from_logits(lg[len(prompt) - 1 + t], s, seen_counts=token_counts(cont[:t], 48)) for t in range(4)]
    )
    aud = CausalLM(model)
    np.testing.assert_allclose(aud.sequence_probs(prompt, cont, s), want, atol=1e-12)
    np.testing.assert_allclose(aud.batch_sequence_boundaries([prompt], [cont], s, tol=0.0)[0][0], want, atol=1e-12)
    hf = aud.sequence_probs(prompt, cont, SamplingSettings(top_k=4, repetition_penalty=2.0))
    assert not np.allclose(hf[0], want[0]), "the prompt's tokens are penalised in transformers' convention"


def test_each_engine_refuses_the_penalty_history_it_does_not_keep():
    prompt_too = SamplingSettings(repetition_penalty=1.3)
    generated_only = SamplingSettings(repetition_penalty=1.3, penalize_prompt=False)
    with pytest.raises(
        UnsupportedSettingError, match="repetition penalty counts generated tokens only.*penalize_prompt=False"
    ):
        completion_kwargs(prompt_too)
    assert completion_kwargs(generated_only)["repeat_penalty"] == 1.3
    for mapping in (sampling_params_kwargs, hf_kwargs):
        with pytest.raises(UnsupportedSettingError, match="counts the prompt.*penalize_prompt=True"):
            mapping(generated_only)
    assert "penalize_prompt" not in prompt_too.to_dict() and generated_only.to_dict()["penalize_prompt"] is False
