"""Multi-draft and tree verification: exact pairings are exact (Fractions); inexact ones have
exact counterexamples; Medusa's typical acceptance has its deviation computed, not guessed."""

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from specverify import strategies as svst
from specverify.algorithms import target_law, total_variation
from specverify.algorithms.multi_draft import PAIRINGS, tree_first_tokens_law, tree_round_law

EXACT = [p for p in PAIRINGS if p.exact]
INEXACT = [p for p in PAIRINGS if not p.exact]


@pytest.mark.parametrize("pairing", EXACT, ids=lambda p: p.name)
@settings(max_examples=25)
@given(
    pair=svst.markov_pairs(min_vocab=2, max_vocab=3, max_order=1),
    branching=st.sampled_from([[1], [2], [3], [2, 1], [2, 2]]),
    length=st.integers(1, 2),
)
def test_exact_pairings_preserve_the_target_law(pairing, pair, branching, length):
    got = tree_first_tokens_law(pair.target, pair.draft, (), branching, pairing.mechanism, pairing.rule, length)
    assert got == target_law(pair.target, (), length)


@pytest.mark.parametrize("pairing", INEXACT, ids=lambda p: p.name)
def test_inexact_pairings_have_an_exact_counterexample(pairing, capsys):
    def tv(pair):
        law = tree_first_tokens_law(pair.target, pair.draft, (), [2, 2], pairing.mechanism, pairing.rule, 2)
        return total_variation(law, target_law(pair.target, (), 2))

    found = find(
        svst.markov_pairs(min_vocab=3, max_vocab=4, max_order=0),
        lambda pr: tv(pr) > 0,
        settings=settings(database=None, derandomize=True, max_examples=300),
    )
    dev = tv(found)
    print(
        f"{pairing.name}: TV {float(dev):.4f} on target {[str(x) for x in found.target(())]}, draft "
        f"{[str(x) for x in found.draft(())]}"
    )
    assert dev > 0


def test_medusa_typical_deviation_is_quantified():
    from fractions import Fraction as F

    p, q = [F(6, 10), F(4, 10)], [F(1, 2), F(1, 2)]
    medusa = next(x for x in PAIRINGS if x.name == "medusa_typical")
    law = tree_round_law(lambda c: p, lambda c: q, (), [1], medusa.mechanism, medusa.rule)
    first = {}
    for block, w in law.items():
        first[block[0]] = first.get(block[0], 0) + w
    # The seed example of statistics.md 7c: the head proposes token 0, always accepted (p > 0.09).
    assert first == {0: 1}
    assert total_variation(first, {0: p[0], 1: p[1]}) == F(2, 5)
    assert medusa.lossy_by_design


@settings(max_examples=20)
@given(pair=svst.markov_pairs(min_vocab=2, max_vocab=3, max_order=0), branching=st.sampled_from([[2], [2, 2], [3, 1]]))
def test_expected_tokens_per_tree_round_is_at_least_the_chain_of_its_first_branch(pair, branching):
    # A sanity relation used by the runner check: E[len(block)] from the exact law is in [1, depth + 1].
    eagle = next(x for x in PAIRINGS if x.name == "eagle2_top_k_one_hot")
    law = tree_round_law(pair.target, pair.draft, (), branching, eagle.mechanism, eagle.rule)
    e = sum(w * len(b) for b, w in law.items())
    assert 1 <= e <= len(branching) + 1
