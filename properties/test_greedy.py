"""Greedy equivalence: speculative greedy output equals target-only greedy, token for token."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from specverify import strategies as svst
from specverify.algorithms import GREEDY_RULE, first_tokens_law, greedy_step, greedy_target_tokens


def _run_greedy(pair, gamma, length):
    out: list[int] = []
    while len(out) < length:

        def target(prefix, proposed):
            return [pair.target(list(prefix) + proposed[:i]) for i in range(len(proposed) + 1)]

        out += greedy_step(out, pair.draft, target, gamma)
    return tuple(out[:length])


@given(pair=svst.markov_pairs(max_vocab=4, max_order=2), gamma=st.integers(1, 5), length=st.integers(1, 8))
def test_greedy_speculative_equals_target_greedy(pair, gamma, length):
    assert _run_greedy(pair, gamma, length) == greedy_target_tokens(pair.target, (), length)


@given(pair=svst.markov_pairs(max_vocab=3, max_order=1), gamma=st.integers(1, 3))
def test_greedy_law_is_a_point_mass_on_target_greedy(pair, gamma):
    law = first_tokens_law(pair.target, pair.draft, (), gamma, 4, GREEDY_RULE)
    assert law == {greedy_target_tokens(pair.target, (), 4): 1}


@given(size=st.integers(2, 8), data=st.data())
def test_ties_break_to_the_lowest_id(size, data):
    # Rows where several tokens share the maximum: the lowest id must win everywhere.
    tied = data.draw(st.sets(st.integers(0, size - 1), min_size=2, max_size=size))
    row = np.full(size, 1.0)
    row[list(tied)] = 5.0
    row = row / row.sum()
    pair = svst.CallableMarkovPair(size, 0, {(): row}, {(): row[::-1].copy()})
    assert _run_greedy(pair, 3, 4) == (min(tied),) * 4
