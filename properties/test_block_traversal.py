"""Block verification (Sun et al., ICLR 2025) and traversal verification (arXiv 2505.12398).

Exact rational arithmetic shows (a) the law of the first L generated tokens equals the target's, for
prefix-dependent pairs; (b) the numpy batch forms emit the scalar references' tokens for the same
uniforms; (c) block verification keeps at least as many drafts as the chain rule on average (the
paper's claim), P(kept >= i) term by term; (d) the wrong variants (the weight used as a token-wise
test, the chain rule's unadjusted residual, the parent weight of traversal taken as the residual's
mass over the draft mass left) have exact counterexamples. The sampling checks use fixed seeds, so
they are deterministic; their thresholds (p < 1e-9) would also bound a false failure under a random
seed below 1e-6 for the whole file.
"""

import json
from collections import Counter
from fractions import Fraction
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, assume, find, given, settings
from hypothesis import strategies as st
from scipy import stats

from specverify import strategies as svst
from specverify.algorithms import FULL, kernel_output_law, round_law, target_law, total_variation
from specverify.algorithms.block_verification import (
    BLOCK_VARIANTS,
    block_first_tokens_law,
    block_kernel_law,
    block_round_law,
    expected_accepted,
    verify_block,
    verify_block_batch,
)
from specverify.algorithms.conformance import BLOCK_FILE_NAME, TRAVERSAL_FILE_NAME, write_block_vectors
from specverify.algorithms.traversal import (
    REMAINING_MASS,
    branching_parents,
    chain_parents,
    traversal_first_tokens_law,
    traversal_kernel_law,
    verify_traversal,
    verify_traversal_batch,
    verify_traversal_chain,
)

ROOT = Path(__file__).resolve().parents[1]
# Existence is all these searches need: no shrinking (the first counterexample found is reported).
FIND = settings(database=None, derandomize=True, max_examples=300, phases=[Phase.generate])
WRONG_BLOCK = [v for v in BLOCK_VARIANTS if not v.exact]
TREES = [[-1], [-1, -1], [-1, 0], [-1, 0, 0], [-1, -1, 0], [-1, 0, -1, 2], branching_parents([2, 1])]


def chain_kernel(p_rows, q_rows, draft):
    return kernel_output_law(p_rows, q_rows, draft, FULL)


def constant(row):
    return lambda ctx: row


# (a) exactness --------------------------------------------------------------------------------


@given(pq=svst.pq_pairs(max_size=6, exact=True), gamma=st.integers(1, 4))
def test_block_first_token_law_is_p_exactly(pq, gamma):
    p, q = pq
    first = Counter()
    for block, w in block_round_law(constant(p), constant(q), (), gamma).items():
        first[block[0]] += w
    assert dict(first) == {i: v for i, v in enumerate(p) if v != 0}


@given(pair=svst.markov_pairs(max_vocab=3, max_order=1), gamma=st.integers(1, 3), length=st.integers(1, 3))
def test_block_first_L_tokens_follow_the_target_law(pair, gamma, length):
    got = block_first_tokens_law(pair.target, pair.draft, (), gamma, length)
    assert got == target_law(pair.target, (), length)
    assert all(isinstance(v, Fraction) for v in got.values())


@given(
    pair=svst.markov_pairs(max_vocab=3, max_order=1),
    parents=st.sampled_from(TREES),
    length=st.integers(1, 2),
    without_replacement=st.booleans(),
)
def test_traversal_first_L_tokens_follow_the_target_law(pair, parents, length, without_replacement):
    got = traversal_first_tokens_law(
        pair.target, pair.draft, (), parents, length, without_replacement=without_replacement
    )
    assert got == target_law(pair.target, (), length)


@settings(max_examples=20)
@given(
    pair=svst.markov_pairs(min_vocab=3, max_vocab=4, max_order=0),
    parents=st.sampled_from([branching_parents([2, 2]), branching_parents([3, 1]), [-1, -1, -1, 2, 2]]),
    without_replacement=st.booleans(),
)
def test_traversal_is_exact_on_wider_trees(pair, parents, without_replacement):
    got = traversal_first_tokens_law(pair.target, pair.draft, (), parents, 2, without_replacement=without_replacement)
    assert got == target_law(pair.target, (), 2)


@given(pair=svst.markov_pairs(max_vocab=3, max_order=1), gamma=st.integers(1, 3))
def test_traversal_on_a_chain_is_block_verification(pair, gamma):
    # The kernel laws of one call agree Fraction for Fraction (slot rows of a chain drawn from the pair).
    draft, p_rows, q_rows = [], [], []
    for _ in range(gamma):
        p_rows.append(pair.target(draft))
        q_rows.append(pair.draft(draft))
        draft.append(max(range(pair.vocab_size), key=lambda x: q_rows[-1][x]))
    p_rows.append(pair.target(draft))
    tree = traversal_kernel_law(p_rows, q_rows + [p_rows[-1]], draft, chain_parents(gamma))
    block = block_kernel_law(p_rows, q_rows, draft)
    assert {(n + 1, y): v for (n, y), v in tree.items()} == block


# (b) the batch forms agree with the scalar references -----------------------------------------


@st.composite
def block_rounds(draw, rounds=3):
    v = draw(st.integers(2, 8))
    g = draw(st.integers(0, 4))
    p = np.array([[draw(svst.probability_vectors(size=v)) for _ in range(g + 1)] for _ in range(rounds)])
    q = np.array([[draw(svst.probability_vectors(size=v)) for _ in range(g)] for _ in range(rounds)]).reshape(
        rounds, g, v
    )
    x = [[draw(st.sampled_from(np.nonzero(q[b, i])[0].tolist())) for i in range(g)] for b in range(rounds)]
    ua = [draw(svst.uniforms(g)) for _ in range(rounds)]
    uf = draw(svst.uniforms(rounds))
    return p, q, np.array(x, dtype=np.int64).reshape(rounds, g), np.array(ua).reshape(rounds, g), np.array(uf)


@given(case=block_rounds())
def test_block_batch_emits_the_reference_tokens(case):
    p, q, x, ua, uf = case
    got = verify_block_batch(x, q, p, ua, uf).as_lists()
    want = [verify_block(p[b], q[b], x[b].tolist(), ua[b].tolist(), float(uf[b])) for b in range(len(x))]
    assert got == want
    ok = [b for b in range(len(x)) if all(q[0, i, t] > 0 for i, t in enumerate(x[b]))]  # drafts valid under row 0
    shared = verify_block_batch(x[ok], q[:1], p[:1], ua[ok], uf[ok]).as_lists()  # leading dim 1 broadcasts
    assert shared == [verify_block(p[0], q[0], x[b].tolist(), ua[b].tolist(), float(uf[b])) for b in ok]


@st.composite
def tree_rounds(draw, rounds=3):
    parents = draw(st.sampled_from(TREES + [chain_parents(3), branching_parents([2, 2])]))
    n, v = len(parents), draw(st.integers(3, 8))
    p = np.array([[draw(svst.probability_vectors(size=v)) for _ in range(n + 1)] for _ in range(rounds)])
    q = np.array([[draw(svst.probability_vectors(size=v)) for _ in range(n + 1)] for _ in range(rounds)])
    x = np.zeros((rounds, n), dtype=np.int64)
    for b in range(rounds):
        for i, par in enumerate(parents):
            taken = {int(x[b, m]) for m in range(i) if parents[m] == par}
            support = [t for t in np.nonzero(q[b, par + 1])[0].tolist() if t not in taken]
            assume(support)  # without replacement the siblings need distinct tokens
            x[b, i] = draw(st.sampled_from(support))
    ua = np.array([draw(svst.uniforms(n)) for _ in range(rounds)]).reshape(rounds, n)
    return parents, p, q, x, ua, np.array(draw(svst.uniforms(rounds)))


@given(case=tree_rounds())
def test_traversal_batch_emits_the_reference_tokens(case):
    parents, p, q, x, ua, uf = case
    got = verify_traversal_batch(x, parents, q, p, ua, uf).as_lists()
    want = [verify_traversal(p[b], q[b], x[b].tolist(), parents, ua[b].tolist(), float(uf[b])) for b in range(len(x))]
    assert got == want


@given(case=block_rounds())
def test_traversal_chain_emits_the_block_tokens(case):
    p, q, x, ua, uf = case
    for b in range(len(x)):
        args = (p[b], q[b], x[b].tolist(), ua[b].tolist(), float(uf[b]))
        assert verify_traversal_chain(*args) == verify_block(*args)


# (c) block verification keeps at least as many drafts as the chain rule ------------------------


def _kept_tail(law, gamma):
    """P(kept >= i) for i = 0..gamma from a round law (kept = len(block) - 1)."""
    return [sum((w for b, w in law.items() if len(b) - 1 >= i), Fraction(0)) for i in range(gamma + 1)]


@given(pq=svst.pq_pairs(max_size=5, exact=True), gamma=st.integers(1, 4))
def test_block_keeps_at_least_the_chain_rules_drafts(pq, gamma):
    p, q = pq
    block = block_round_law(constant(p), constant(q), (), gamma)
    chain = round_law(constant(p), constant(q), (), gamma, FULL)
    assert all(a >= b for a, b in zip(_kept_tail(block, gamma), _kept_tail(chain, gamma)))
    assert expected_accepted(block) >= expected_accepted(chain)


@given(pair=svst.markov_pairs(max_vocab=3, max_order=1), gamma=st.integers(1, 3))
def test_block_keeps_at_least_the_chain_rules_drafts_prefix_dependent(pair, gamma):
    block = block_round_law(pair.target, pair.draft, (), gamma)
    chain = block_round_law(pair.target, pair.draft, (), gamma, chain_kernel)
    assert chain == round_law(pair.target, pair.draft, (), gamma, FULL)  # the plug-in verifier is the chain rule
    assert all(a >= b for a, b in zip(_kept_tail(block, gamma), _kept_tail(chain, gamma)))


def test_the_papers_binary_example():
    # Sun et al.'s motivating example: p = (1/3, 2/3), q = (2/3, 1/3), gamma = 2.
    p, q = [Fraction(1, 3), Fraction(2, 3)], [Fraction(2, 3), Fraction(1, 3)]
    assert expected_accepted(block_round_law(constant(p), constant(q), (), 2)) == Fraction(11, 9)
    assert expected_accepted(round_law(constant(p), constant(q), (), 2, FULL)) == Fraction(10, 9)


# (d) wrong variants are caught -----------------------------------------------------------------


def _tv_to_target(pair, first_tokens_law):
    return total_variation(first_tokens_law(pair), target_law(pair.target, (), 3))


@pytest.mark.parametrize("variant", WRONG_BLOCK, ids=lambda v: v.name)
def test_wrong_block_variants_have_an_exact_counterexample(variant, capsys):
    def law(pair):
        verifier = partial(block_kernel_law, variant=variant)
        return block_first_tokens_law(pair.target, pair.draft, (), 3, 3, verifier)

    # a threshold one position early differs only where the rows change along the block: order 1 there
    order = 1 if variant.threshold_off_by_one else 0
    found = find(
        svst.markov_pairs(min_vocab=2, max_vocab=3, max_order=order),
        lambda pr: _tv_to_target(pr, law) > 0,
        settings=FIND,
    )
    dev = _tv_to_target(found, law)
    p, q = ([str(v) for v in row(())] for row in (found.target, found.draft))
    print(f"{variant.name}: TV {float(dev):.4f} over 3 tokens (gamma 3) on p {p}, q {q}")
    assert dev > 0


def test_traversal_remaining_mass_weight_has_an_exact_counterexample():
    def law(pair):
        return traversal_first_tokens_law(pair.target, pair.draft, (), [-1, 0, 0], 3, variant=REMAINING_MASS)

    found = find(
        svst.markov_pairs(min_vocab=3, max_vocab=3, max_order=0),
        lambda pr: _tv_to_target(pr, law) > 0,
        settings=FIND,
    )
    assert _tv_to_target(found, law) > 0


# conformance vectors and sampling against them ---------------------------------------------------


def test_block_and_traversal_vectors_regenerate_byte_for_byte(tmp_path):
    block, traversal = write_block_vectors(tmp_path)
    assert block.read_text() == (ROOT / "conformance" / BLOCK_FILE_NAME).read_text()
    assert traversal.read_text() == (ROOT / "conformance" / TRAVERSAL_FILE_NAME).read_text()
    for path in (block, traversal):
        for case in json.loads(path.read_text())["cases"]:
            assert sum(Fraction(e["prob"]) for e in case["law"]) == 1, case["id"]


def _fits(counts, law, n):
    assert set(counts) <= set(law), "an output outside the law's support"
    keys = sorted(law)
    exp = np.array([law[k] for k in keys]) * n
    obs = np.array([counts.get(k, 0) for k in keys])
    big = exp >= 5
    obs_p, exp_p = np.append(obs[big], obs[~big].sum()), np.append(exp[big], exp[~big].sum())
    keep = exp_p > 0
    if keep.sum() > 1:
        assert stats.chisquare(obs_p[keep], exp_p[keep]).pvalue > 1e-9


def _rows(rows):
    return np.array([[float(Fraction(v)) for v in r] for r in rows])[None]


def _cases(name):
    return json.loads((ROOT / "conformance" / name).read_text())["cases"]


@pytest.mark.parametrize("case", _cases(BLOCK_FILE_NAME)[::4], ids=lambda c: c["id"])
def test_block_batch_samples_follow_the_vectors(case):
    n, g, rng = 20_000, case["gamma"], np.random.default_rng(11)
    x = np.tile(np.array(case["draft_tokens"]), (n, 1))
    res = verify_block_batch(x, _rows(case["q"]), _rows(case["p"]), rng.random((n, g)), rng.random(n))
    counts = Counter(zip(res.num_accepted.tolist(), res.tokens[np.arange(n), res.num_accepted].tolist()))
    _fits(counts, {(e["accepted"], e["token"]): e["prob_float"] for e in case["law"]}, n)


@pytest.mark.parametrize("case", _cases(TRAVERSAL_FILE_NAME)[::3], ids=lambda c: c["id"])
def test_traversal_batch_samples_follow_the_vectors(case):
    n, parents, rng = 20_000, case["parents"], np.random.default_rng(12)
    x = np.tile(np.array(case["draft_tokens"]), (n, 1))
    p, q = _rows(case["p_by_slot"]), _rows(case["q_by_slot"])
    res = verify_traversal_batch(x, parents, q, p, rng.random((n, len(parents))), rng.random(n))
    counts = Counter(zip(res.node.tolist(), res.tokens[np.arange(n), res.num_accepted].tolist()))
    _fits(counts, {(e["node"], e["token"]): e["prob_float"] for e in case["law"]}, n)
