"""Model runners on tiny seeded transformers models, audited against target-only decoding."""

import numpy as np
import pytest
import torch

from specverify import GREEDY, SamplingSettings
from specverify.audit.sources.lm_audit import audit_lm, batched_vs_incremental_logit_gap
from specverify.lm.transformers_lm import (
    CausalLM,
    KVSession,
    build_model,
    early_exit_copy,
    layered_target,
    perturbed_copy,
)
from specverify.runners import acceptance_z, speculative_generate, target_only_generate

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def pair():
    t = build_model("llama", vocab=128, hidden=64, layers=2, seed=0, lm_head_scale=6.0)
    return t, perturbed_copy(t, eps=0.15, seed=1)


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen2"])
def test_kv_rollback_matches_a_full_forward(family):
    m = build_model(family, vocab=64, hidden=32, layers=2, seed=3)
    s = KVSession(m)
    s.extend([1, 2, 3])
    s.extend([4, 5, 6])
    s.rollback(2)
    row = s.extend([9])[-1]
    full = CausalLM(m).logits([1, 2, 3, 4, 9])[-1]
    assert float((row - full).abs().max()) < 1e-5


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen2"])
def test_speculative_greedy_equals_target_greedy(family):
    t = build_model(family, vocab=96, hidden=32, layers=3, seed=4, lm_head_scale=6.0)
    d = early_exit_copy(t, layers=1)
    for prompt in ([1, 2, 3], [7], [5, 5, 5, 5]):
        a = speculative_generate(t, d, prompt, 24, GREEDY, torch.Generator(), gamma=3).tokens
        b = target_only_generate(t, prompt, 24, GREEDY, torch.Generator()).tokens
        assert a == b


def test_runner_audit_passes_and_a_no_rollback_runner_fails(pair, monkeypatch):
    t, d = pair
    prompts = [[1, 2, 3, 4], [5, 6], [7, 7, 7]]
    s = (SamplingSettings(temperature=0.8, top_k=30, repetition_penalty=1.2),)

    def runner(prompt, n, seed, settings):
        return speculative_generate(t, d, prompt, n, settings, torch.Generator().manual_seed(seed), gamma=4).tokens

    v = audit_lm(runner, t, prompts=prompts, settings=s, eps=0.2, length=6, name="runner")
    assert v.status == "PASS", v.headline()
    monkeypatch.setattr(KVSession, "rollback", lambda self, n: None)  # the bug: rejected drafts stay in the caches
    v = audit_lm(
        runner, t, prompts=prompts, settings=s, eps=0.2, length=6, name="runner-no-rollback", greedy_check=False
    )
    assert v.status == "FAIL", v.headline()


def test_acceptance_matches_theory(pair):
    t, d = pair
    s = SamplingSettings(temperature=0.9)
    runs = [speculative_generate(t, d, [i, i + 1], 40, s, torch.Generator().manual_seed(i), gamma=4) for i in range(12)]
    z, n = acceptance_z(runs)
    assert n > 100 and abs(z) < 5.3  # false-fail < 1e-7 under the N(0, 1) limit
    # and the tokens per target pass follow from the acceptances
    per_round = np.mean([k + 1 for r in runs for k in r.accepted])
    assert per_round == pytest.approx(sum(len(r.tokens) for r in runs) / sum(r.target_passes for r in runs), rel=0.05)


def test_acceptance_check_catches_a_misreported_q(pair, monkeypatch):
    # Negative control: accepting with probability min(1, 1.5 p/q) breaks the theory check.
    import specverify.runners.loops as loops

    t, d = pair
    orig = loops.verify_chain_torch
    monkeypatch.setattr(loops, "verify_chain_torch", lambda X, Q, P, ua, uf: orig(X, Q, P, ua / 1.5, uf))
    runs = [
        speculative_generate(
            t, d, [i, i + 1], 40, SamplingSettings(temperature=0.9), torch.Generator().manual_seed(i), gamma=4
        )
        for i in range(12)
    ]
    z, _ = acceptance_z(runs)
    assert z > 5.3


def test_logit_gap_is_small_and_reported(pair):
    t, _ = pair
    assert batched_vs_incremental_logit_gap(t, [1, 2, 3], [4, 5, 6, 7]) < 1e-4
    # the greedy check keeps target-only greedy's cached rows instead of a second cached pass
    from specverify import GREEDY
    from specverify.runners import target_only_generate

    rows = []
    want = target_only_generate(t, [1, 2, 3], 6, GREEDY, torch.Generator(), rows=rows).tokens
    assert len(rows) == 6 and [int(r.argmax()) for r in rows] == want
    kept, again = (
        batched_vs_incremental_logit_gap(t, [1, 2, 3], want, rows),
        batched_vs_incremental_logit_gap(t, [1, 2, 3], want),
    )
    assert kept < 1e-4 and abs(kept - again) < 1e-4


def test_layered_target_gives_a_high_acceptance_early_exit_draft():
    t = layered_target("llama", vocab=128, hidden=64, layers=6, heads=4, seed=0, lm_head_scale=6.0, keep=2)
    d = early_exit_copy(t, layers=2)
    p = CausalLM(t).next_probs([[1, 2, 3], [4, 5]])
    q = CausalLM(d).next_probs([[1, 2, 3], [4, 5]])
    assert np.minimum(p, q).sum(-1).mean() > 0.8


def test_gpu_script_tiny_mode(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "gpu_runs" / "run_speedup.py"
    spec = importlib.util.spec_from_file_location("run_speedup", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--tiny", "--out", str(tmp_path), "--tokens", "24", "--audit-budget", "10"])
    assert (tmp_path / "tiny-cpu.json").exists() and (tmp_path / "tiny-cpu.md").exists()
    greedy = res["runs"][0]
    assert greedy["greedy_equal"] and res["audit"]["status"] in ("PASS", "INCONCLUSIVE")
