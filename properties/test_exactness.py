"""Exactness of the reference rules, in exact rational arithmetic.

For every generated draft/target pair (prefix-dependent Markov models), gamma and length L, the
law of the first L tokens produced by repeated speculative rounds equals the target's own law,
Fraction for Fraction. Checked for the full rule, one-hot and sample-and-match.
"""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specverify import strategies as svst
from specverify.algorithms import (
    FULL,
    ONE_HOT,
    SAMPLE_AND_MATCH,
    first_token_law,
    first_tokens_law,
    target_law,
)

EXACT_RULES = [FULL, ONE_HOT, SAMPLE_AND_MATCH]


@pytest.mark.parametrize("rule", EXACT_RULES, ids=lambda r: r.name)
@given(pq=svst.pq_pairs(max_size=6, exact=True), gamma=st.integers(1, 4))
def test_first_token_law_is_p_exactly(rule, pq, gamma):
    p, q = pq
    law = first_token_law(p, q, gamma, rule)
    assert law == {i: v for i, v in enumerate(p) if v != 0}
    assert all(isinstance(v, Fraction) for v in law.values())


@pytest.mark.parametrize("rule", EXACT_RULES, ids=lambda r: r.name)
@given(pair=svst.markov_pairs(max_vocab=3, max_order=1), gamma=st.integers(1, 3), length=st.integers(1, 3))
def test_first_L_tokens_follow_the_target_law(rule, pair, gamma, length):
    got = first_tokens_law(pair.target, pair.draft, (), gamma, length, rule)
    want = target_law(pair.target, (), length)
    assert got == want


@given(pair=svst.markov_pairs(min_vocab=2, max_vocab=2, max_order=2), gamma=st.integers(1, 3))
def test_order_two_models_are_exact_too(pair, gamma):
    got = first_tokens_law(pair.target, pair.draft, (), gamma, 3, FULL)
    assert got == target_law(pair.target, (), 3)


@given(pair=svst.markov_pairs(max_vocab=3, max_order=1, exact=False), gamma=st.integers(1, 3))
def test_float64_law_matches_target_to_rounding(pair, gamma):
    got = first_tokens_law(pair.target, pair.draft, (), gamma, 3, FULL)
    want = target_law(pair.target, (), 3)
    keys = set(got) | set(want)
    assert max(abs(got.get(k, 0.0) - want.get(k, 0.0)) for k in keys) < 1e-12
