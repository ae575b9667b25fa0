"""Block and traversal verification through the installed ``specverify`` command (issue 24, items 3-4):
the exact rules PASS, every catalogued mutant FAILs with its bug class named, and the white-box
strata of ``--rule block`` say which piece of the rule broke. Fixed seeds (the audit's seed 0)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_entry_points import run_cli

from specverify import SamplingSettings
from specverify.algorithms.block_verification import block_tau_law, verify_block_batch
from specverify.audit import KernelAdapter, audit
from specverify.catalogue import block
from specverify.diagnosis._classes import CLASSES
from specverify.stats._block import kept_given_drafts_test

MOD = "specverify.catalogue.block"
ONE_SETTING = ["--temperature", "1", "--no-progress"]

USER_KERNEL = """
from specverify.algorithms import verify_block_batch

def verify(draft_tokens, draft_probs, target_probs, generator):
    b, g = draft_tokens.shape
    u = generator.random((b, g)), generator.random(b)
    return verify_block_batch(draft_tokens, draft_probs, target_probs, *u).tokens
"""


def _verdict(tmp_path, *args, path=()):
    out = tmp_path / "v.json"
    r = run_cli("audit", *args, "--json", out, path=path, timeout=600)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    return r, json.loads(out.read_text())


@pytest.mark.parametrize("name", ["block_kernel", "traversal_chain_kernel"])
def test_the_exact_rules_pass_under_the_block_rule(tmp_path, name):
    r, v = _verdict(tmp_path, "--kernel", f"{MOD}:{name}", "--no-progress")
    assert r.returncode == 0 and v["status"] == "PASS", r.stdout[-2000:]
    unit = next(c for c in v["checks"] if c["kind"] == "statistical")
    assert "kept drafts given the drafts ~ block law" in {w["stratum"] for w in unit["details"]["whitebox"]}


def test_a_users_block_kernel_passes_with_rule_block_and_fails_the_full_rule(tmp_path):
    (tmp_path / "userk.py").write_text(USER_KERNEL)
    r, v = _verdict(tmp_path, "--kernel", "userk:verify", "--rule", "block", *ONE_SETTING, path=[tmp_path])
    assert r.returncode == 0 and v["status"] == "PASS", r.stdout[-2000:]
    # the chain rule's strata do not hold for block verification: the declared rule matters
    r, v = _verdict(
        tmp_path, "--kernel", "userk:verify", "--full-rule", "--no-diagnosis", *ONE_SETTING, path=[tmp_path]
    )
    assert r.returncode == 1 and v["status"] == "FAIL"


@pytest.mark.parametrize("mutant", block.MUTANTS, ids=lambda m: m.name)
def test_every_mutant_fails_with_its_class_named(tmp_path, mutant):
    extra = ["--no-progress"] if mutant.name == "block_weight_test_chain_residual" else ONE_SETTING
    r, v = _verdict(tmp_path, "--kernel", f"{MOD}:{mutant.kernel.__name__}", *extra)
    assert r.returncode == 1 and v["status"] == "FAIL", r.stdout[-2000:]
    assert v["diagnosis"]["verdict"] == mutant.name, v["diagnosis"]["lead"]
    assert f"most likely {mutant.name}" in r.stdout
    assert CLASSES[mutant.name].sources == (mutant.source,)


def test_round_steps_block_reference_passes_and_the_ascend_shape_is_named(tmp_path):
    fast = [*ONE_SETTING, "--eps", "0.1"]
    r, v = _verdict(tmp_path, "--round", f"{MOD}:block_step", *fast)
    assert r.returncode == 0 and v["status"] == "PASS", r.stdout[-2000:]
    r, v = _verdict(tmp_path, "--round", f"{MOD}:block_weight_test_chain_residual_step", *fast)
    assert r.returncode == 1 and v["diagnosis"]["verdict"] == "block_weight_test_chain_residual"


@pytest.mark.parametrize(
    ("mutant", "stratum"),
    [
        ("block_weight_test", "kept drafts given the drafts ~ block law"),
        ("block_chain_residual", "token after tau kept drafts ~ (w_tau p - q)+"),
        ("block_final_position_untested", "kept drafts given the drafts ~ block law"),
    ],
)
def test_a_fail_localises_to_the_broken_piece(mutant, stratum):
    m = next(x for x in block.MUTANTS if x.name == mutant)
    v = audit(KernelAdapter(m.kernel), seed=0, diagnose=False, settings=(SamplingSettings(),))
    failed = {c.whitebox for c in v.checks if c.status == "FAIL"}
    assert stratum in failed, failed
    if mutant == "block_chain_residual":  # the acceptance half of the rule is right
        assert "kept drafts given the drafts ~ block law" not in failed


def test_the_kept_drafts_stratum_is_calibrated_under_the_rule():
    """P-values of the (conservative) Pearson test under the rule: no more small ones than chance."""
    rng = np.random.default_rng(5)
    g, v = 3, 6
    p, q = rng.dirichlet(np.ones(v), (1, g + 1)), rng.dirichlet(np.ones(v), (1, g))
    pvals = []
    for _ in range(200):
        n = 2000
        x = np.stack([rng.choice(v, n, p=q[0, j]) for j in range(g)], 1)
        res = verify_block_batch(x, q, p, rng.random((n, g)), rng.random(n))
        _, law = block_tau_law(p, q, x)
        pvals.append(kept_given_drafts_test(law, res.num_accepted).pvalue)
    pvals = np.array(pvals)
    assert (pvals < 0.05).mean() <= 0.09 and (pvals < 0.01).mean() <= 0.03
