"""Sampling settings: exact when applied identically to draft and target; a shown, exact
counterexample when applied to one side only."""

from fractions import Fraction

import numpy as np
from hypothesis import find, given, settings
from hypothesis import strategies as st

from specverify import strategies as svst
from specverify.algorithms import FULL, PositionRule, first_token_law, total_variation
from specverify.algorithms.exact_law import _full_accept, _full_replacement
from specverify.dists import probs_from_logits


def _exact(row):
    fr = [Fraction(float(v)) for v in row]
    s = sum(fr)
    return [f / s for f in fr]


@given(
    pl=svst.logits(size=6, ties=True),
    ql=svst.logits(size=6, ties=True),
    s=svst.sampling_settings(penalties=False),
    gamma=st.integers(1, 3),
)
def test_identical_settings_keep_the_processed_target_law(pl, ql, s, gamma):
    p = _exact(probs_from_logits(pl, s))
    q = _exact(probs_from_logits(ql, s))
    assert first_token_law(p, q, gamma, FULL) == {i: v for i, v in enumerate(p) if v}


def misreported_q_rule(actual_q):
    """The draft samples from ``actual_q`` but the verifier is told the reported q."""
    return PositionRule(
        "misreported_q", lambda q: {x: v for x, v in enumerate(actual_q) if v}, _full_accept, _full_replacement
    )


def _one_sided_deviation(case):
    pl, ql, s = case
    p_req = _exact(probs_from_logits(pl, s))  # the law the request asks for
    q_req = _exact(probs_from_logits(ql, s))
    p_raw = _exact(probs_from_logits(pl))  # target left at default settings (vllm#9834)
    q_raw = _exact(probs_from_logits(ql))
    target_only = first_token_law(p_raw, q_req, 1, FULL)
    misreported = first_token_law(p_req, q_raw, 1, misreported_q_rule(q_req))  # transformers#47932
    want = {i: v for i, v in enumerate(p_req) if v}
    return total_variation(target_only, want), total_variation(misreported, want)


def test_one_sided_settings_give_an_exact_counterexample(capsys):
    cases = st.tuples(
        svst.logits(size=4, ties=False), svst.logits(size=4, ties=False), svst.sampling_settings(penalties=False)
    )
    found = find(
        cases,
        lambda c: min(_one_sided_deviation(c)) > 0,
        settings=settings(database=None, derandomize=True, max_examples=500),
    )
    tv_target, tv_misreported = _one_sided_deviation(found)
    print(f"counterexample: target logits {found[0]}, draft logits {found[1]}, settings {found[2].short()}")
    print(f"  target at default settings: TV {float(tv_target):.4f}; raw q reported: TV {float(tv_misreported):.4f}")
    assert tv_target > 0 and tv_misreported > 0


def test_known_one_sided_counterexample_is_large():
    # Temperature 0.5 on the draft side only, target raw: a concrete, hand-checkable case.
    pl = np.log(np.array([0.5, 0.3, 0.2]))
    s = svst.SamplingSettings(temperature=0.5)
    tv_target, tv_mis = _one_sided_deviation((pl, pl, s))
    assert float(tv_target) > 0.1 and float(tv_mis) > 0.05
