"""The harness: what an implementation is shown (whole prefixes, consecutive calls, read-only
float64 rows) and the context models it is shown them on."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify import SamplingSettings
from specverify.harness import SequenceView, make_context_pair, run_round_step


def test_the_law_depends_on_the_last_two_tokens_and_the_position():
    pair = make_context_pair(64, "high", seed=1)
    a = pair.row_of([5, 1, 2])
    assert pair.row_of([9, 1, 2]) == a  # the third-last token does not matter (order 2)
    assert sum(pair.row_of([k, 2]) != pair.row_of([1, 2]) for k in range(2, 40)) > 30  # the second-last does
    assert sum(pair.row_of([7] * n + [1, 2]) != a for n in range(2, 40)) > 30  # the length does


_ODD_IDS = st.sampled_from([-1, 64, 65, 3.0, np.int32(5), np.uint8(7), True])


@settings(max_examples=300, deadline=None)
@given(
    order=st.integers(0, 3),
    positional=st.booleans(),
    prefix=st.lists(st.one_of(st.integers(0, 19), _ODD_IDS), max_size=12),
)
def test_the_dense_row_tables_give_the_rows_the_hash_gives_one_key_at_a_time(order, positional, prefix):
    # row_of's fast path (every window of a length hashed at once) against the per-key hash; ids
    # that are not vocabulary ids (an implementation's own prefixes) take the hash path alike
    pair = make_context_pair(20, "low", order=order, positional=positional, seed=order)
    assert pair._dense is not None

    def by_hash(t):
        return pair._row_of(t, tuple(prefix[max(0, t - order) : t]) if order else ())

    assert pair.row_of(prefix) == by_hash(len(prefix))
    assert pair.rows_along(prefix, 0, len(prefix) + 1) == [by_hash(t) for t in range(len(prefix) + 1)]


@pytest.mark.parametrize("kind", ["low", "high", "greedy"])
def test_pairs_are_valid_at_a_large_vocabulary(kind):
    pair = make_context_pair(131_072, kind, rows=8, seed=0)
    p = pair.law_probs([1, 2, 3], SamplingSettings(top_p=0.9))
    assert p.shape == (131_072,) and abs(p.sum() - 1) < 1e-9


def test_overlap_regimes():
    low, high = make_context_pair(64, "low", seed=2), make_context_pair(64, "high", seed=2)
    acc_low = np.minimum(low.target_table(), low.draft_table()).sum(1)
    acc_high = np.minimum(high.target_table(), high.draft_table()).sum(1)
    assert acc_low.mean() < 0.4 and (acc_low == 0).any()  # disjoint supports on some rows
    assert (low.target_table() == 0).mean() > 0.05  # zero-heavy rows
    assert acc_high.mean() > 0.9 and (np.abs(acc_high - 1) < 1e-12).mean() > 0.2  # draft == target rows


def test_greedy_pair_has_ties_near_ties_and_disagreements():
    pair = make_context_pair(64, "greedy", seed=3)
    t, d = pair.target_logits, pair.draft_logits
    top = np.sort(t, 1)[:, ::-1]
    assert (top[:, 0] == top[:, 1]).mean() > 0.03  # exact ties
    assert (np.abs(top[:, 0] - top[:, 1] - 1e-6) < 1e-9).mean() > 0.01  # near ties
    disagree = np.argmax(d, 1) != np.argmax(t, 1)
    assert 0.05 < disagree.mean() < 0.4  # the bonus position is still reached often


def test_a_step_sees_whole_prefixes_as_consecutive_calls_and_read_only_rows():
    pair = make_context_pair(32, "high", seed=4)
    view = SequenceView(pair, SamplingSettings())
    calls = []

    def step(prefix, draft, target, gamma, rng):
        q = draft(prefix)
        with pytest.raises(ValueError):
            q[0] = 1.0  # read-only
        rows = target(prefix, [1, 2])
        assert rows.shape == (3, 32) and rows.dtype == np.float64 and not rows.flags.writeable
        out = [int(rng.integers(32))]
        calls.append((list(prefix), out))
        return out

    gen = run_round_step(
        step, view, n=3, length=5, gamma=2, rng=np.random.default_rng(0), settings_param=None, timeout=None, name="s"
    )
    assert len(gen.tokens) == 15 and gen.rounds == 15
    for (p0, o0), (p1, _) in zip(calls, calls[1:]):
        assert p1 == p0 + o0 or len(p1) < len(p0) + len(o0)  # the same sequence goes on, or a new one starts
    assert sum(len(p1) < len(p0) for (p0, _), (p1, _) in zip(calls, calls[1:])) == 2  # two new sequences


def _full_rule_step(always_accept=False):
    def step(prefix, draft, target, gamma, rng):
        xs, qs = [], []
        for _ in range(gamma):
            q = draft(prefix + xs)
            xs.append(int(rng.choice(len(q), p=q)))
            qs.append(q)
        p = target(prefix, xs)
        for j, x in enumerate(xs):
            if not always_accept and rng.random() >= p[j][x] / qs[j][x]:
                r = np.maximum(p[j] - qs[j], 0)
                return xs[:j] + [int(rng.choice(len(r), p=r / r.sum()))]
        return xs + [int(rng.choice(p.shape[1], p=p[gamma]))]

    return step


def test_tiny_transformers_context():
    """context='transformers': the law depends on the whole prefix; a correct step PASSes at a
    coarse eps with a fixed number of sequences, and a step that accepts every draft FAILs."""
    pytest.importorskip("transformers")
    from specverify.audit import RoundAdapter, audit

    opts = dict(
        context="transformers",
        settings=(SamplingSettings(),),
        vocab=32,
        eps=0.5,
        rounds=40,
        exact_checks=False,
        gamma=3,
        long_length=0,  # the 512-token unit and the stop unit have their own tests; this one is the context
        stop_token_ids=(),
    )
    good = audit(RoundAdapter(_full_rule_step(), name="good"), **opts)
    assert good.status == "PASS", good.headline()
    assert "tiny transformers" in good.checks[0].summary
    bad = audit(RoundAdapter(_full_rule_step(always_accept=True), name="always_accept"), **opts, fail_fast=True)
    assert bad.status == "FAIL", bad.headline()


def test_drafts_are_what_the_pass_held_beyond_the_true_prefix():
    """A step may re-send context tokens in the proposal (KV block logic); its drafts are still
    the tokens beyond the true prefix, so the white-box strata test the right tokens."""
    pair = make_context_pair(32, "high", seed=5)
    seen = []

    def step(prefix, draft, target, gamma, rng):
        xs = [int(rng.integers(32)) for _ in range(gamma)]
        target(prefix[:-1], [prefix[-1]] + xs)
        seen.append(xs)
        return xs[:1]

    gen = run_round_step(
        step,
        SequenceView(pair, SamplingSettings()),
        n=2,
        length=4,
        gamma=3,
        rng=np.random.default_rng(1),
        settings_param=None,
        timeout=None,
        name="s",
    )
    assert gen.drafts.tolist() == seen
