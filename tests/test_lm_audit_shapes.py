"""audit_lm as third-party packages meet it: the common generate(target, draft, input_ids, ...)
shape through ``common_shape_generator``, a setting the package declines (UNSUPPORTED, never a
FAIL), greedy-only audits, greedy equivalence that reports instead of raising, and sequences that
span several rounds (a bug from the second round on is caught at the default length)."""

import pytest
import torch

from specverify import SamplingSettings
from specverify.audit.sources.lm_audit import audit_lm, common_shape_generator, greedy_equivalence
from specverify.lm.transformers_lm import early_exit_copy, layered_target
from specverify.runners import speculative_generate

torch.set_num_threads(1)
PROMPTS = [[1, 2, 3], [4, 5, 6, 7], [8, 9]]
FAST = dict(eps=0.3, settings=(SamplingSettings(temperature=0.8),))


@pytest.fixture(scope="module")
def models():
    t = layered_target("llama", vocab=48, hidden=32, layers=3, heads=2, seed=4, lm_head_scale=20.0, keep=1, damp=0.2)
    return t, early_exit_copy(t, layers=1)


def third_party(target, draft, input_ids, max_new_tokens, *, do_sample, temperature, top_p, top_k, seed):
    """The usual package signature; returns the whole sequence as a [1, L] tensor."""
    s = SamplingSettings(temperature=temperature if do_sample else 0.0, top_p=top_p, top_k=top_k)
    prompt = input_ids[0].tolist()
    out = speculative_generate(
        target, draft, prompt, max_new_tokens, s, torch.Generator().manual_seed(seed), gamma=3
    ).tokens
    return torch.tensor([prompt + list(out)])


def realigns_badly(target, draft, input_ids, max_new_tokens, *, do_sample, temperature, top_p, top_k, seed):
    """Bug: after the first 4 tokens (about one round at gamma 3) its batch re-alignment repeats the
    last token of the first round and shifts the rest by one (off by one in a padding offset)."""
    s = SamplingSettings(temperature=temperature if do_sample else 0.0, top_p=top_p, top_k=top_k)
    prompt = input_ids[0].tolist()
    out = list(
        speculative_generate(
            target, draft, prompt, max_new_tokens, s, torch.Generator().manual_seed(seed), gamma=3
        ).tokens
    )
    out = (out[:4] + [out[3]] + out[4:])[:max_new_tokens]  # never more than asked for (that is a finding)
    return torch.tensor([prompt + out])


def test_common_shape_adapter_passes_a_correct_package(models):
    t, d = models
    v = audit_lm(common_shape_generator(third_party, t, d), t, prompts=PROMPTS, gamma=3, **FAST)
    assert v.status == "PASS", v.headline()
    assert {c.name: c.status for c in v.checks}["greedy equivalence (tie-aware)"] == "PASS"
    assert v.checks[0].details["length"] == 16  # 4 (gamma + 1): several rounds per sequence


def test_a_bug_from_the_second_round_on_fails_at_the_default_length(models):
    t, d = models
    gen, s = common_shape_generator(realigns_badly, t, d), (SamplingSettings(temperature=0.8),)
    # no long unit: the FAIL must come from the default length itself, not from 512-token requests
    v = audit_lm(gen, t, prompts=PROMPTS, gamma=3, greedy_check=False, eps=0.1, settings=s, long_length=0)
    assert v.status == "FAIL", v.headline()
    # the old default of 4 tokens per sequence stops before the bug (its first 4 tokens are exact)
    short = audit_lm(gen, t, prompts=PROMPTS, length=4, greedy_check=False, eps=0.1, settings=s, long_length=0)
    assert short.status == "PASS", short.headline()


def test_a_declined_setting_is_unsupported_not_fail(models):
    t, d = models
    gen = common_shape_generator(third_party, t, d)
    v = audit_lm(
        gen,
        t,
        prompts=PROMPTS,
        gamma=3,
        eps=0.3,
        greedy_check=False,
        settings=(SamplingSettings(temperature=0.8), SamplingSettings(min_p=0.1)),
    )
    status = {c.name: c.status for c in v.checks}
    assert status["settings[1] min_p=0.1: implementation"] == "UNSUPPORTED"
    assert v.status == "PASS", v.headline()


def test_greedy_only_audit(models):
    t, d = models
    v = audit_lm(common_shape_generator(third_party, t, d), t, prompts=PROMPTS, settings=())
    assert v.status == "PASS" and [c.name for c in v.checks] == ["greedy equivalence (tie-aware)"]


def test_greedy_equivalence_reports_a_crash(models):
    t, _ = models

    def crashes(prompt, n, seed, s):
        raise RuntimeError("CUDA error: device-side assert")

    c = greedy_equivalence(crashes, t, prompts=PROMPTS)
    assert c.status == "FAIL" and "RuntimeError: CUDA error" in c.summary


def test_two_sample_reports_a_failing_endpoint():
    from specverify.audit.sources.http_adapter import two_sample_endpoints
    from specverify.errors import ImplementationError

    def fine(prompt, n, seed, s):
        return [1] * n

    def down(prompt, n, seed, s):
        raise ImplementationError("http://spec:8000 answered HTTP 503")

    v = two_sample_endpoints(
        down, fine, prompts=[[1, 2]], settings=SamplingSettings(), vocab_size=8, n_sequences=10, length=2
    )
    assert v.status == "FAIL" and "HTTP 503" in v.evidence[0]
