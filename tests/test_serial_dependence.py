"""The consecutive-pairs test: fresh randomness at every position (specverify.stats.serial_dependence_test).

A sampler that draws two positions of a round from one uniform keeps every token's own law exact,
so no per-token stratum sees it; the pairs of consecutive tokens do. Every statistical assertion
here uses a fixed seed (deterministic); the null calibration over many seeds, the power curve and
the exact far tail are in ``scripts/serial_calibration.py`` (scripts/results/serial_calibration.txt).
"""

from __future__ import annotations

import numpy as np
import pytest

from specverify.algorithms.block_verification import verify_block_batch
from specverify.audit import audit
from specverify.audit.sources.adapters import SamplerAdapter
from specverify.catalogue import BUGS, DECOYS
from specverify.dists import inverse_cdf_sample_many, probs_from_logits
from specverify.harness import run_sampler
from specverify.lm.synthetic import make_markov_pair, make_positional_pair
from specverify.stats import StreamLaw, serial_dependence_test

SHARED = next(b for b in BUGS if b.name == "randomness_shared_across_positions")
V, GAMMA = 64, 4


def _pvalue(sampler, *, markov=False, rounds=3000, seed=0):
    pair = make_markov_pair(V, alpha=0.9, seed=1) if markov else make_positional_pair(V, GAMMA, alpha=0.9, seed=1)
    g = run_sampler(sampler, pair, n=rounds, gamma=GAMMA, rng=np.random.default_rng(seed))
    law = StreamLaw(pair.target_table())
    return serial_dependence_test(law, g.tokens, g.row, g.sequence, g.position, rng=np.random.default_rng(seed + 1))


@pytest.mark.parametrize("sampler", DECOYS, ids=lambda c: c.name)
def test_exact_samplers_are_not_flagged(sampler):
    r = _pvalue(sampler())
    assert r.df > 0 and r.pvalue > 1e-4, r


def test_sequences_that_span_rounds_are_not_flagged_and_the_bug_is():
    assert _pvalue(DECOYS[0](), markov=True).pvalue > 1e-4
    assert _pvalue(SHARED(), markov=True).pvalue < 1e-12


def test_block_verification_is_not_flagged():
    """Block verification decides where a round stops from the whole block; the next token is still
    p-distributed given the prefix and that the round goes on (its module docstring), so the
    position may group the pairs."""
    pair = make_positional_pair(V, GAMMA, alpha=0.9, seed=1)
    P, Q = probs_from_logits(pair.target_logits), probs_from_logits(pair.draft_logits)[:GAMMA]
    rng = np.random.default_rng(3)
    n = 3000
    x = np.stack([inverse_cdf_sample_many(Q[j], rng.random(n)) for j in range(GAMMA)], axis=1)
    res = verify_block_batch(x, Q[None], P[None], rng.random((n, GAMMA)), rng.random(n))
    k = res.num_accepted + 1
    pos = np.concatenate([np.arange(m) for m in k])
    toks = res.tokens[np.arange(GAMMA + 1)[None, :] < k[:, None]]
    r = serial_dependence_test(StreamLaw(P), toks, pos, np.repeat(np.arange(n), k), pos, rng=rng)
    assert r.df > 0 and r.pvalue > 1e-4, r


def test_the_bonus_drawn_with_the_last_drafts_uniform_is_caught_and_located():
    r = _pvalue(SHARED(), rounds=1000)
    assert r.pvalue < 1e-12, r
    assert r.worst_cells[0].label.startswith(f"position {GAMMA},"), r.worst_cells  # the bonus follows the last draft
    assert r.worst_cells[0].observed > r.worst_cells[0].expected


def test_pairs_are_formed_within_each_sequence_whatever_order_the_sequences_come_in():
    """Pairs are formed in each sequence's emitted order, whatever order sequences come in."""
    pair = make_positional_pair(V, GAMMA, alpha=0.9, seed=1)
    g = run_sampler(SHARED(), pair, n=1000, gamma=GAMMA, rng=np.random.default_rng(0))
    law = StreamLaw(pair.target_table())
    perm = np.argsort(-g.sequence, kind="stable")  # sequences reversed, each one's tokens in order
    a = serial_dependence_test(law, g.tokens, g.row, g.sequence, g.position, rng=np.random.default_rng(1))
    b = serial_dependence_test(
        law, g.tokens[perm], g.row[perm], g.sequence[perm], g.position[perm], rng=np.random.default_rng(1)
    )
    assert (a.n, a.df, a.statistic) == (b.n, b.df, b.statistic) and a.pvalue < 1e-12


def test_too_few_pairs_is_said_not_passed_silently():
    pair = make_positional_pair(V, GAMMA, alpha=0.9, seed=1)
    g = run_sampler(DECOYS[0](), pair, n=5, gamma=GAMMA, rng=np.random.default_rng(0))
    r = serial_dependence_test(
        StreamLaw(pair.target_table()), g.tokens, g.row, g.sequence, g.position, rng=np.random.default_rng(0)
    )
    assert r.df == 0 and r.pvalue == 1.0 and "fewer than 40 consecutive pairs" in r.note


def test_mismatched_lengths_name_the_fix():
    law = StreamLaw(np.full((2, 4), 0.25))
    with pytest.raises(ValueError, match="one entry per emitted token"):
        serial_dependence_test(law, [0, 1, 2], [0, 1], [0, 0, 0], [0, 1, 2], rng=np.random.default_rng(0))


def test_the_audit_fails_on_the_pairs_and_names_the_class():
    v = audit(SamplerAdapter(SHARED()), seed=0, eps=0.1)
    assert v.status == "FAIL"
    failed = [c for c in v.checks if c.status == "FAIL"]
    assert any(c.stratum == "consecutive tokens" for c in failed), [c.summary for c in failed]
    d = v.to_dict()["diagnosis"]
    assert d["verdict"] == "randomness_shared_across_positions", d["lead"]
    assert "its own uniform or noise" in d["lead"]
