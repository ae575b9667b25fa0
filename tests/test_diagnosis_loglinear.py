"""The log-linear replacement and bonus laws of issue 25 (``specverify.diagnosis._loglinear``): the
conditional-logit fit recovers known coefficients, a replacement drawn from a law no fixed shape
describes (the residual weighted once more by p, set 10's blind bug) is named as the fitted law in
words, and the correct rule's rounds get no diagnosis. Positional pairs, seeded: deterministic.
"""

import re

import numpy as np
import pytest
from test_diagnosis import _diagnose

from specverify.catalogue import ChainSampler
from specverify.diagnosis import NOT_KNOWN, diagnose_rounds
from specverify.diagnosis._evidence import round_evidence
from specverify.diagnosis._loglinear import _features, _law, fit_conditional_logit, law_in_words
from specverify.harness import run_sampler
from specverify.lm.synthetic import make_positional_pair


def _events(theta, n, seed, part="replacement"):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(24, 0.5), n)
    q = rng.dirichlet(np.full(24, 0.5), n)
    q = np.where(q < 0.01, 0.0, q)  # zeros in q, as truncated draft rows have: [q > 0] is then identified
    q /= q.sum(-1, keepdims=True)
    phi = _features(part, p, q)
    law = _law(phi, np.asarray(theta, dtype=float))
    y = (law.cumsum(-1) < rng.random(n)[:, None]).sum(-1).clip(max=23)
    return phi, y


@pytest.mark.parametrize(
    ("part", "theta"),
    [
        ("replacement", (1.0, 1.0, 0.0, 0.0, 0.0)),
        ("replacement", (1.6, 0.0, 0.0, 0.0, 2.0)),
        ("bonus", (1, 0, 0, 2, 0)),
    ],
)
def test_the_conditional_logit_fit_recovers_the_coefficients_it_was_drawn_with(part, theta):
    phi, y = _events(theta, 4000, seed=3, part=part)
    fit, se, _ = fit_conditional_logit(phi, y, np.array([1.0, 0, 0, 0, 0]))
    assert np.all(np.abs(fit - np.asarray(theta)) < 4 * se + 1e-9), (fit, se)
    # 4,000 events pin the powers and the argmax terms; [q > 0] is nearly collinear with log(q + d)
    # (log d = -20.7 at q = 0), and [p > q] of a replacement is not shown at all (tokens outside the
    # residual's support are never drawn while (p - q)+ has a positive power)
    shown = [0, 1, 2] if part == "replacement" else [0, 1, 3, 4]
    assert np.all(se[shown] < 0.5), se


def test_the_words_show_only_the_coefficients_that_moved():
    theta = np.array([0.98, 1.02, 0.0, 0.0, 6.0])
    assert law_in_words("replacement", theta, np.array([False, True, False, False, False])) == "(p - q)+ x p^1"
    words = law_in_words("replacement", theta, np.array([True, False, False, False, True]))
    assert words == "(p - q)+^0.98 x e^6 where p > q"


class ResidualTimesP(ChainSampler):
    """The replacement drawn from (p - q)+ * p: the residual weighted once more by the target
    (tests/study_bugs10 replacement:residual_reweighted_by_target_probability, a blind bug)."""

    name = "residual_times_p"

    def residual_weights(self, p_row, q_row, x):
        return np.maximum(p_row - q_row, 0.0) * p_row


class ResidualTimesPSquared(ResidualTimesP):
    """Hypothesis cannot draw this one: a second, stronger power of the same shape."""

    name = "residual_times_p_squared"

    def residual_weights(self, p_row, q_row, x):
        return np.maximum(p_row - q_row, 0.0) * p_row**2


@pytest.mark.parametrize(("sampler", "power"), [(ResidualTimesP(), 1.0), (ResidualTimesPSquared(), 2.0)])
def test_a_residual_weighted_by_p_is_named_as_the_fitted_law(sampler, power):
    d = _diagnose(sampler, n=3000, seed=1)
    assert d.verdict.startswith("mechanism(replacement=replacement_loglinear("), d.lead()
    words = d.candidates[0].to_dict()["mechanism"]
    m = re.search(r"weights \(p - q\)\+ x p\^([0-9.]+) \(", words)
    assert m and abs(float(m[1]) - power) <= 0.25, words  # only the weight on p left the rule


def test_the_correct_rule_gets_no_loglinear_law():
    d = _diagnose(ChainSampler(), n=3000, seed=1)
    assert d.verdict == NOT_KNOWN and "loglinear" not in d.lead()


class CoinIsARandomBit(ChainSampler):
    """The acceptance coin drawn as rng.integers(0, 2): a draft the target allows is kept with
    probability 1/2 whatever its ratio (tests/study_bugs10 numerics:coin_drawn_as_random_bit)."""

    name = "coin_is_a_random_bit"

    def accept(self, px, qx, U, ctx):
        return (U.accept < 0.5) & (px > 0)


class DraftProbabilityAsAcceptance(ChainSampler):
    """A draft kept with probability q(x), its own probability (tests/study_bugs2, blind: a wrong class
    was named then). (A square root of the ratio is the one-parameter member ratio_powered(b=0.5),
    cheaper and preferred.)"""

    name = "draft_probability_as_acceptance"

    def accept(self, px, qx, U, ctx):
        return U.accept < qx


@pytest.mark.parametrize(
    ("sampler", "law"),
    [
        (CoinIsARandomBit(), "kept with probability 0.5 wherever p(x) > 0"),
        (DraftProbabilityAsAcceptance(), "min(1, q(x))"),
    ],
)
def test_an_acceptance_test_of_another_form_is_named_with_its_fitted_form(sampler, law):
    d = _diagnose(sampler, n=3000, seed=2)
    assert d.verdict.startswith("mechanism(acceptance=ratio_generalised("), d.lead()
    assert law in d.candidates[0].to_dict()["mechanism"], d.lead()


def test_units_of_two_vocabularies_are_fitted_together():
    """A kernel audit holds a unit with its own odd vocabulary (101 ids beside 64): the events of the
    two cannot share one array, and a pooled fit over them raised until the fit took a block each
    (every kernel FAIL then got the diagnosis 'unavailable')."""
    units = []
    for vocab, seed in ((32, 1), (37, 2)):
        pair = make_positional_pair(vocab, 4, alpha=0.3, seed=seed)
        gen = run_sampler(ResidualTimesP(), pair, n=2000, gamma=4, rng=np.random.default_rng(seed))
        units.append((round_evidence(gen, pair, 4, label=f"vocabulary {vocab}"), pair, None))
    d = diagnose_rounds(units)
    assert d.verdict.startswith("mechanism(replacement=replacement_loglinear("), d.lead()
    assert "x p^" in d.candidates[0].to_dict()["mechanism"]


class EveryTestMarkedFailed(ChainSampler):
    """The rejections read with ~ on a uint8 accept mask (bitwise: 1 -> 254): position 0 always counts
    as the first rejection, so no draft is ever kept (tests/study_bugs11 counting, a blind bug)."""

    name = "every_test_marked_failed"

    def accept(self, px, qx, U, ctx):
        return np.zeros_like(px, dtype=bool)


def test_a_round_that_never_keeps_a_draft_is_named_so_and_points_at_the_count():
    d = _diagnose(EveryTestMarkedFailed(), n=3000, seed=3, alpha=0.9)  # high overlap: no envelope mimics it
    assert d.verdict == "mechanism(acceptance=ratio_generalised(never))", d.lead()
    mech = d.candidates[0].to_dict()
    assert "a draft is never kept" in mech["mechanism"] and "count of kept drafts" in mech["check"], mech
