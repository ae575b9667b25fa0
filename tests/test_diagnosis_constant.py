"""Rounds that emit one fixed token without verifying (``specverify.diagnosis._constant``): a stop
state set by a drafted stop id is named as that path, with its trigger, and no longer as a KV-block
prefix error (set 11's one wrong name); varied mismatched rounds keep the state classes; correct
steps get no diagnosis. Context pairs, seeded: deterministic.
"""

import numpy as np
import pytest
from test_diagnosis import _user

from specverify.diagnosis import NOT_KNOWN, diagnose_rounds
from specverify.diagnosis._constant import constant_rounds
from specverify.diagnosis._evidence import round_evidence
from specverify.dists import SamplingSettings
from specverify.harness import make_context_pair

S = SamplingSettings()


def _units(fn, kind="low", n=200):
    pair = make_context_pair(64, kind, seed=3)
    gen = _user("stateful", fn).generate(pair, n, 4, np.random.default_rng(0), S)
    return [(round_evidence(gen, pair, 4, label="unit", settings=S), pair, S)]


@pytest.mark.parametrize("kind", ["low", "high"])
def test_a_stop_state_set_by_a_drafted_stop_is_named_with_its_trigger(kind):
    d = diagnose_rounds(_units("finished_on_drafted_stop", kind))
    lead = d.lead()
    assert d.verdict == "constant_token_rounds(id=63)", lead
    assert "emit only id 63 (the last id), without drafting or verifying" in lead, lead
    assert "each follows a round that drafted id 63" in lead and "kept or not" in lead, lead
    assert "never on its drafts" in lead and "kv_block" not in lead, lead


def test_correct_stateful_steps_get_no_diagnosis_and_no_fixed_rounds():
    for fn in ("verified_context", "cached_rows"):
        units = _units(fn)
        assert constant_rounds(units) is None
        assert diagnose_rounds(units).verdict == NOT_KNOWN


def _marked(fixed_at, token=63):
    """A correct step's rounds, with the rounds ``fixed_at(ev)`` rewritten as the block [token]
    from a pass that drafted nothing (what the harness records of a finish path)."""
    [(ev, pair, s)] = _units("verified_context", n=400)
    f = fixed_at(ev)
    ev.mismatch = ev.mismatch | f
    ev.drafts[f], ev.k[f], ev.y[f], ev.emitted[f] = -1, 0, token, 1
    return [(ev, pair, s)]


def test_fixed_rounds_at_random_are_named_without_a_trigger():
    rng = np.random.default_rng(5)
    units = _marked(lambda ev: rng.random(len(ev.k)) < 0.05)
    d = diagnose_rounds(units)
    assert d.verdict == "constant_token_rounds(id=63)" and "each follows" not in d.lead(), d.lead()


def test_fixed_rounds_after_an_emitted_stop_name_the_emitted_trigger():
    def after_emitted(ev):
        kept = np.arange(ev.gamma)[None, :] < ev.k[:, None]
        emitted = ((ev.drafts == 63) & kept).any(1) | (ev.y == 63)
        return (ev.prev_round >= 0) & emitted[np.maximum(ev.prev_round, 0)]

    d = diagnose_rounds(_marked(after_emitted))
    assert "each follows a round that emitted id 63" in d.lead() and "kept or not" not in d.lead(), d.lead()


def test_mismatched_rounds_that_vary_are_left_to_the_state_classes():
    # verification on another prefix: the mismatched rounds keep their varied blocks
    [(ev, pair, s)] = _units("verified_context", n=400)
    ev.mismatch = np.random.default_rng(1).random(len(ev.k)) < 0.1
    assert constant_rounds([(ev, pair, s)]) is None
    assert diagnose_rounds([(ev, pair, s)]).verdict == "kv_block_wrong_prefix"
