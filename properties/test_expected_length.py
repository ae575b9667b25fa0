"""The expected-length formula and the truncated geometric law, checked by exact enumeration."""

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from specverify import strategies as svst
from specverify import theory
from specverify.algorithms import FULL, ONE_HOT, SAMPLE_AND_MATCH, round_law

RULE_ALPHA = {
    FULL: lambda p, q: sum(min(a, b) for a, b in zip(p, q)),
    ONE_HOT: lambda p, q: sum(a * b for a, b in zip(p, q)),
    SAMPLE_AND_MATCH: lambda p, q: sum(a * b for a, b in zip(p, q)),
}


@given(pq=svst.pq_pairs(max_size=5, exact=True), gamma=st.integers(1, 4), which=st.sampled_from(list(RULE_ALPHA)))
def test_expected_tokens_per_round_matches_formula(pq, gamma, which):
    p, q = pq
    law = round_law(lambda c: p, lambda c: q, (), gamma, which)
    expected = sum(w * len(block) for block, w in law.items())
    alpha = RULE_ALPHA[which](p, q)
    assert expected == theory.expected_tokens_per_round(alpha, gamma)
    length_law = [Fraction(0)] * (gamma + 1)
    for block, w in law.items():
        length_law[len(block) - 1] += w
    assert length_law == theory.accepted_length_law(alpha, gamma)


@given(pair=svst.markov_pairs(max_vocab=3, max_order=1), gamma=st.integers(1, 3))
def test_position_dependent_product_form(pair, gamma):
    # A chain whose rows depend on the position but not on the drafted tokens: use a model keyed
    # by prefix length, so acceptance a_i is the overlap of the i-th rows.
    keys = sorted(pair.target_rows)
    rows = [(pair.target_rows[keys[i % len(keys)]], pair.draft_rows[keys[i % len(keys)]]) for i in range(gamma + 1)]

    def target(ctx):
        return rows[len(ctx)][0]

    def draft(ctx):
        return rows[len(ctx)][1]

    law = round_law(target, draft, (), gamma, FULL)
    expected = sum(w * len(b) for b, w in law.items())
    alphas = [sum(min(a, b) for a, b in zip(*rows[i])) for i in range(gamma)]
    assert expected == theory.expected_tokens_position_dependent(alphas)
    length_law = [Fraction(0)] * (gamma + 1)
    for block, w in law.items():
        length_law[len(block) - 1] += w
    assert length_law == theory.accepted_length_law_position_dependent(alphas)


@given(pq=svst.pq_pairs(max_size=8, exact=True))
def test_rejection_mass_identity(pq):
    p, q = pq
    beta = sum(min(a, b) for a, b in zip(p, q))
    assert 1 - beta == sum(max(0, a - b) for a, b in zip(p, q))


@given(alpha=st.floats(0, 1), gamma=st.integers(0, 16))
def test_closed_form_equals_power_sum(alpha, gamma):
    closed = theory.expected_tokens_per_round(alpha, gamma)
    assert abs(closed - sum(alpha**k for k in range(gamma + 1))) < 1e-9 * (gamma + 1)
