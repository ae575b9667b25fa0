"""Issue 24 through the audit: SpecTr's k-sequential selection as a tree pairing (TreeSampler) and
traversal verification on a real tree (TraversalTreeSampler, the sequence harness). The exact rules
PASS; the wrong variants FAIL, SpecTr's in the distribution test and in the exact deviation check,
traversal's wrong parent update in the distribution test. Fixed seeds: deterministic."""

import numpy as np
import pytest

from specverify import SamplingSettings
from specverify.algorithms.spectr import SPECTR_PAIRINGS
from specverify.algorithms.traversal import REMAINING_MASS, TRAVERSAL
from specverify.audit import SamplerAdapter, audit
from specverify.catalogue import TreeSampler
from specverify.catalogue.traversal_trees import TraversalTreeSampler, draw_tree


def run(sampler):
    return audit(
        SamplerAdapter(sampler), eps=0.1, vocab=6, target_alpha=0.4, settings=(SamplingSettings(),), batch=1000
    )


@pytest.mark.parametrize("pairing", SPECTR_PAIRINGS, ids=lambda p: p.name)
def test_spectr_pairings_pass_iff_exact(pairing):
    v = run(TreeSampler(pairing))
    assert v.status == ("PASS" if pairing.exact else "FAIL"), v.headline()
    dev = {c.name: c for c in v.checks}["deviation of the rule, computed exactly"]
    assert (dev.status == "PASS") == pairing.exact, dev.summary
    sampled = {c.name: c for c in v.checks}["settings[0] default"]  # the distribution test agrees
    assert (sampled.status == "PASS") == pairing.exact, sampled.summary


@pytest.mark.parametrize("branching", [(2, 2), (3, 1), (1, 2)])
def test_traversal_on_a_tree_passes(branching):
    v = run(TraversalTreeSampler(TRAVERSAL, branching))
    assert v.status == "PASS", v.headline()
    # greedy drafting leaves one token per row: a full tree without replacement cannot be drawn
    assert all(c.status in ("PASS", "UNSUPPORTED") for c in v.checks)


def test_traversal_with_the_remaining_mass_update_fails_on_a_tree():
    v = run(TraversalTreeSampler(REMAINING_MASS, (2, 2)))
    assert v.status == "FAIL" and "distribution test" in v.headline(), v.headline()


def test_draw_tree_draws_distinct_siblings_from_the_parents_row():
    rng = np.random.default_rng(3)
    Q = rng.dirichlet(np.ones(5), size=5)
    parents = [-1, -1, 0, 0, 1, 1]
    ctx = rng.integers(0, 5, 2000)
    x = draw_tree(Q, ctx, parents, rng)
    assert (x[:, 0] != x[:, 1]).all() and (x[:, 2] != x[:, 3]).all() and (x[:, 4] != x[:, 5]).all()
    first = np.bincount(x[ctx == 0, 0], minlength=5) / (ctx == 0).sum()
    assert np.abs(first - Q[0]).max() < 0.06
