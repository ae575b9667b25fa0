"""The diagnosis of a FAIL: each claim backed by a buggy variant, seeded and deterministic.

Round evidence comes from catalogue samplers run on a positional pair (vectorised, a second or
so each); two bugs outside the catalogue must get "not a known class", the reference none.
"""

import numpy as np
import pytest

from specverify.audit import run as audit_run
from specverify.audit.adapters import SamplerAdapter
from specverify.audit.report import render_html
from specverify.catalogue import BUGS, ChainSampler
from specverify.diagnosis import CLASSES, NOT_KNOWN, diagnose_rounds, round_evidence
from specverify.harness import run_sampler
from specverify.lm.synthetic import make_positional_pair

BY_NAME = {b.name: b for b in BUGS}


def _diagnose(sampler, *, n=3000, seed=0, alpha=0.3):
    pair = make_positional_pair(32, 4, alpha=alpha, seed=seed)
    gen = run_sampler(sampler, pair, n=n, gamma=4, rng=np.random.default_rng(seed))
    ev = round_evidence(gen, pair, 4, label="unit")
    return diagnose_rounds([(ev, pair, None)])


class MixedResidual(ChainSampler):
    """Outside the catalogue: the replacement is half residual, half uniform."""

    name = "mixed_residual"

    def residual_weights(self, p_row, q_row, x):
        w = np.maximum(p_row - q_row, 0.0)
        w = w / np.maximum(w.sum(-1, keepdims=True), 1e-300)
        return 0.5 * w + 0.5 / w.shape[-1]


class SquaredRatio(ChainSampler):
    """Outside the catalogue: accept with probability min(1, p/q) squared."""

    name = "squared_ratio"

    def accept(self, px, qx, U, ctx):
        with np.errstate(divide="ignore", invalid="ignore"):
            return U.accept < np.minimum(1.0, px / qx) ** 2


@pytest.mark.parametrize(
    "name, alpha",
    [("replacement_from_p", 0.3), ("bonus_from_previous_row", 0.8), ("same_uniform_all_positions", 0.5),
     ("residual_wrong_sign", 0.3)],
)
def test_a_catalogued_bug_is_named_first(name, alpha):
    # the bonus bug needs rounds that keep every draft: a high-overlap pair
    d = _diagnose(BY_NAME[name](), alpha=alpha)
    assert d.verdict == name, d.top(5)
    assert d.candidates[0].llr_vs_target >= d.min_llr and d.candidates[0].explained >= d.min_explained


def test_facts_say_which_stratum_moved_and_to_which_law():
    d = _diagnose(BY_NAME["replacement_from_p"]())
    assert "acceptances match min(1, p/q) given the draft" in d.facts
    assert "replacements do not match (p - q)+; they match p" in d.facts
    assert "bonus tokens match p" in d.facts


def test_a_bonus_bug_is_located_where_every_draft_was_accepted():
    d = _diagnose(BY_NAME["bonus_from_previous_row"](), alpha=0.8)
    assert "only when every draft was accepted" in d.facts
    assert "only positions after the first" in d.facts


@pytest.mark.parametrize("sampler", [MixedResidual, SquaredRatio])
def test_a_bug_outside_the_catalogue_is_not_a_known_class(sampler):
    d = _diagnose(sampler())
    assert d.verdict == NOT_KNOWN, [(c.name, c.llr_vs_target, c.explained) for c in d.candidates[:3]]
    assert "not a known class" in d.lead()


def test_the_reference_gets_no_class():
    d = _diagnose(ChainSampler())
    assert d.verdict == NOT_KNOWN


def test_every_class_cites_what_it_was_modelled_on_and_what_to_check():
    for c in CLASSES.values():
        assert c.references and all(c.references) and c.check and c.mechanism, c.name


def test_a_failed_audit_carries_a_versioned_diagnosis_in_json_terminal_and_html():
    v = audit_run.audit(SamplerAdapter(BY_NAME["replacement_from_p"]()), rounds=6000, exact_checks=False)
    assert v.status == "FAIL"
    d = v.to_dict()
    assert d["schema"] == "specverify.verdict/2"
    assert d["diagnosis"]["version"] == 1 and d["diagnosis"]["verdict"] == "replacement_from_p"
    assert v.diagnosis_lead()[0].startswith("Diagnosis: most likely replacement_from_p")
    page = render_html(v)
    assert page.index("Diagnosis: most likely") < page.index('class="headline FAIL"')


def test_a_passing_audit_has_no_diagnosis():
    v = audit_run.audit(SamplerAdapter(ChainSampler()), rounds=3000, exact_checks=False)
    assert v.status != "FAIL" and v.diagnosis is None and v.diagnosis_lead() == []
