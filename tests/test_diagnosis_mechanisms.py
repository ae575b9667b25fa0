"""Mechanism families (issue 25): a bug no catalogued class fits, but whose parts each follow a
member of a family, is named by its fitted parts in plain words; one outside every family is not.

Each claim is backed by a seeded buggy sampler outside the catalogue (vectorised rounds on a
positional pair, a second or so each); the samplers that must stay "not a known class" are
test_diagnosis.py's (half-uniform replacement, squared ratio).
"""

import numpy as np
import pytest
from test_diagnosis import MixedResidual, SquaredRatio, _diagnose

from specverify.catalogue import ChainSampler
from specverify.diagnosis import NOT_KNOWN
from specverify.diagnosis._mechanism import DeterministicAccept, fit_mechanism, options_by_part, part_of


class AcceptIffPGeQ(ChainSampler):
    """Outside the catalogue: acceptance is a comparison, p(x) >= q(x), not a coin."""

    name = "accept_iff_p_ge_q_sampler"

    def accept(self, px, qx, U, ctx):
        return px >= qx


class AcceptWithP(ChainSampler):
    """Outside the catalogue: keep with probability p(x)."""

    name = "accept_with_p_sampler"

    def accept(self, px, qx, U, ctx):
        return U.accept < px


class ResidualArgmax(ChainSampler):
    """Outside the catalogue: the replacement is the residual's argmax."""

    name = "residual_argmax_sampler"

    def residual_weights(self, p_row, q_row, x):
        w = np.maximum(p_row - q_row, 0.0)
        out = np.zeros_like(w)
        np.put_along_axis(out, np.argmax(w, -1)[..., None], 1.0, -1)
        return out


class CompareAndReplaceFromP(AcceptIffPGeQ):
    """Two parts wrong at once: the comparison above, and the replacement drawn from p."""

    name = "compare_and_replace_from_p"

    def residual_weights(self, p_row, q_row, x):
        return p_row


@pytest.mark.parametrize(
    "sampler, parts, words",
    [
        (AcceptIffPGeQ, {"acceptance": "accept_iff_p_ge_q"}, "kept iff p(x) >= q(x)"),
        (AcceptWithP, {"acceptance": "accept_with_prob_p"}, "kept with probability p(x)"),
        (ResidualArgmax, {"replacement": "replacement_residual_argmax"}, "argmax of (p - q)+"),
        (
            CompareAndReplaceFromP,
            {"acceptance": "accept_iff_p_ge_q", "replacement": "replacement_from_p"},
            "kept iff p(x) >= q(x)",
        ),
    ],
    ids=lambda x: getattr(x, "name", None) or str(x)[:20],
)
def test_a_bug_in_a_family_is_named_by_its_fitted_parts(sampler, parts, words):
    d = _diagnose(sampler())
    assert d.known and d.verdict.startswith("mechanism("), (d.verdict, d.top(3))
    assert d.to_dict()["candidates"][0]["parts"] == parts, d.to_dict()["candidates"][0]
    assert words in d.lead() and "no catalogued class fits" in d.lead(), d.lead()


@pytest.mark.parametrize("sampler", [MixedResidual, SquaredRatio], ids=lambda s: s.name)
def test_a_bug_outside_every_family_is_still_not_a_known_class(sampler):
    d = _diagnose(sampler())
    assert d.verdict == NOT_KNOWN, (d.verdict, d.lead())


def test_a_catalogued_class_keeps_its_name_before_any_mechanism():
    from test_diagnosis import BY_NAME

    d = _diagnose(BY_NAME["replacement_from_p"]())
    assert d.verdict == "replacement_from_p", d.verdict


def test_a_part_is_kept_only_when_it_pays_for_the_choice():
    # one option per part: the rule (0 nats) against DeterministicAccept at +0.5 nat, which does not
    # pay log(2); at +5 nats it does, and its gain is stated net of the price
    m = DeterministicAccept()
    assert part_of(m) == "acceptance"
    opts = options_by_part([m])
    ref = np.zeros(5)
    low = fit_mechanism(opts, {id(m): np.array([0.0, 0.5, 0, 0, 0])}, ref)
    assert low.chosen == ()
    high = fit_mechanism(opts, {id(m): np.array([0.0, 5.0, 0, 0, 0])}, ref)
    assert [o.model.name for o, _ in high.chosen] == ["accept_iff_p_ge_q"]
    assert high.llr == pytest.approx(5.0 - np.log(2))
