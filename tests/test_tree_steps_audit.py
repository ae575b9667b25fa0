"""Tree rules through the installed ``specverify`` command, as a user's round step (issue 24):
SpecTr's sequence form and traversal verification on a 2 x 2 tree PASS with no diagnosis; SpecTr's
two mutants FAIL with their class named by the tree scorer (first token of each round, exact law);
traversal's wrong parent update FAILs on a tree with its class named there too (the law of the
first token summed over the root's children, the leaves drawn: specverify.diagnosis._traversal;
its chain form is named by the round scorer, in tests/test_block_audit.py). Fixed seeds (the
audit's seed 0, the leaves' fixed seed): deterministic."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_entry_points import run_cli

from specverify.algorithms.spectr import SPECTR_VARIANTS, spectr_token_law
from specverify.diagnosis._tree import spectr_first_token_law

MOD = "specverify.catalogue.tree_steps"
SMALL = ["--vocab", "16", "--eps", "0.1", "--temperature", "1", "--no-progress"]
# the single-draft residual differs from SpecTr's most where top-k / top-p / min-p cut the rows
# (its first token is about 0.03 in TV from p on the low-overlap pair: eps 0.05 finds it, 0.07 rightly PASSes)
TRUNCATED = ["--eps", "0.05", "--temperature", "0.9", "--top-k", "12", "--top-p", "0.85", "--min-p", "0.08"]

USER_STEP = """
from specverify.catalogue.tree_steps import spectr_step

def step(prefix, draft, target, gamma, rng, *, drafts=3):  # an optional extra parameter, left at its default
    return spectr_step(prefix, draft, target, gamma, rng, k=drafts)
"""


def _verdict(tmp_path, *args, path=()):
    out = tmp_path / "v.json"
    r = run_cli("audit", *args, "--json", out, path=path, timeout=600)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    return r, json.loads(out.read_text())


@pytest.mark.parametrize("name", ["spectr_step", "spectr_rho_k_step", "traversal_tree_step"])
def test_the_exact_tree_rules_pass(tmp_path, name):
    r, v = _verdict(tmp_path, "--round", f"{MOD}:{name}", *SMALL)
    assert r.returncode == 0 and v["status"] == "PASS", r.stdout[-2000:]
    assert r.stdout.splitlines()[-1].startswith("PASS: no deviation of TV >= ")
    assert v["diagnosis"] is None and "Diagnosis" not in r.stdout


def test_traversal_passes_where_truncation_leaves_a_row_fewer_tokens_than_siblings(tmp_path):
    # top-k / top-p / min-p leave some draft rows one or two tokens: a child drawn without replacement
    # is then not there (its subtree neither), as the exact law's pruned trees say (tree_draws)
    r, v = _verdict(tmp_path, "--round", f"{MOD}:traversal_tree_step", *TRUNCATED[2:], "--eps", "0.1", "--no-progress")
    assert r.returncode == 0 and v["status"] == "PASS", r.stdout[-2000:]


def test_a_tree_is_pruned_where_the_draft_row_runs_out_of_tokens():
    from specverify.algorithms.traversal import branching_parents
    from specverify.catalogue.tree_steps import _draw_tree

    def draft(prefix):  # one token after the prompt, two after that
        row = np.zeros(4)
        row[[1] if len(prefix) == 1 else [2, 3]] = 0.5 if len(prefix) > 1 else 1.0
        return row

    tokens, rows, parents = _draw_tree([0], draft, branching_parents((2, 2)), np.random.default_rng(0))
    assert parents == [-1, 0, 0] and tokens[0] == 1 and sorted(tokens[1:]) == [2, 3] and len(rows) == 4


def test_a_users_tree_step_outside_the_repository_passes(tmp_path):
    (tmp_path / "usertree.py").write_text(USER_STEP)
    r, v = _verdict(tmp_path, "--round", "usertree:step", *SMALL, path=[tmp_path])
    assert r.returncode == 0 and v["status"] == "PASS", r.stdout[-2000:]


@pytest.mark.parametrize(
    ("mutant", "opts"),
    [("spectr_single_draft_residual", TRUNCATED + ["--no-progress"]), ("spectr_rho_one", SMALL)],
)
def test_spectr_mutants_fail_with_their_class_named(tmp_path, mutant, opts):
    # --fail-fast: the diagnosis reads the units up to the first FAIL (single-draft residual: 57 s -> 17 s)
    r, v = _verdict(tmp_path, "--round", f"{MOD}:{mutant}_step", *opts, "--fail-fast")
    assert r.returncode == 1 and v["status"] == "FAIL", r.stdout[-2000:]
    assert v["diagnosis"]["verdict"] == mutant, v["diagnosis"]["lead"]
    assert f"Diagnosis: most likely {mutant}" in r.stdout
    assert "first token of each" in v["diagnosis"]["method"]


def test_traversal_parent_update_fails_on_a_tree_with_its_class_named(tmp_path):
    r, v = _verdict(tmp_path, "--round", f"{MOD}:traversal_tree_remaining_mass_step", *SMALL, "--fail-fast")
    assert r.returncode == 1 and v["status"] == "FAIL", r.stdout[-2000:]
    d = v["diagnosis"]
    assert d["verdict"] == "traversal_remaining_mass_weight", d["lead"]
    assert d["lead"].startswith("Diagnosis: most likely traversal_remaining_mass_weight (likelihood ratio e^")
    assert "Check the parent update after a rejected child: w <- r / (1 - w + r)" in d["lead"]
    assert "Diagnosis: most likely traversal_remaining_mass_weight" in r.stdout
    assert d["candidates"][0]["log_likelihood_ratio_vs_target"] > 100  # e^1176 at seed 0
    assert "min(1, r / (1 - Q(x)))" in d["facts"][-1] and "2 x 2 tree" in d["facts"][-1]
    assert "summed over the root's children" in d["method"]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize(
    ("variant", "residual"),
    [("spectr", "exact"), ("spectr_single_draft_residual", "single_draft"), ("spectr_rho_one", "rho_one")],
)
def test_the_scorers_first_token_law_is_the_rules_exact_law(variant, residual, k):
    """The closed form the tree scorer uses equals the node law summed over the drafts (Fractions
    turned float), and the exact rule's is p."""
    rng = np.random.default_rng(k)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5) * 0.5)
    law = spectr_token_law(list(p), list(q), k, SPECTR_VARIANTS[variant])
    exact = np.array([float(law.get(y, 0.0)) for y in range(5)])
    closed = spectr_first_token_law(p[None], q[None], k, residual)[0]
    np.testing.assert_allclose(closed, exact, atol=1e-12)
    if variant == "spectr":
        np.testing.assert_allclose(closed, p, atol=1e-12)
    else:
        assert np.abs(closed - p).sum() > 1e-3  # the mutant's deviation is real on this pair
