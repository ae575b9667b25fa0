"""Classes the blind generalisation study of issue 25 showed missing (tests/study_bugs): each is
named for a seeded buggy sampler outside the catalogue, and stays off the correct rule's rounds.

Structure: the bonus appended after a rejection, the replacement dropped after kept drafts.
Settings: two knobs applied to the draft only (the pair fitted), the truncations before
temperature, q from the draft's raw logits, the target's logits divided by the temperature before
the whole pipeline. Positional pairs, a second or two each.
"""

import numpy as np
import pytest
from test_diagnosis import _diagnose

from specverify.catalogue import ChainSampler
from specverify.diagnosis import NOT_KNOWN, diagnose_rounds
from specverify.diagnosis._evidence import round_evidence
from specverify.diagnosis._models import pipeline
from specverify.dists import SamplingSettings, probs_from_logits
from specverify.harness import run_sampler
from specverify.harness._records import RoundOutput
from specverify.lm.synthetic import make_positional_pair


class BonusAfterBreak(ChainSampler):
    """A rejected round emits its replacement and then a token from the bonus row (a lost for/else)."""

    name = "bonus_after_break_sampler"

    def round(self, pair, ctx, gamma, rng, settings=None):
        out = super().round(pair, ctx, gamma, rng, settings)
        stop = np.nonzero(out.num_accepted < gamma)[0]
        bonus_rows = pair.target_table(settings)[pair.row_index(out.drafts[stop, -1], gamma)]
        tokens = out.tokens.copy()
        tokens[stop, out.num_accepted[stop] + 1] = [rng.choice(len(r), p=r) for r in bonus_rows]
        # the round step's count: every emitted token but the last
        return RoundOutput(tokens, out.num_accepted + (out.num_accepted < gamma), out.drafts, out.next_context)


class ReplacementOnlyFirst(ChainSampler):
    """After m >= 1 kept drafts a rejection ends the round at them, with no replacement."""

    name = "replacement_only_first_sampler"

    def round(self, pair, ctx, gamma, rng, settings=None):
        out = super().round(pair, ctx, gamma, rng, settings)
        k = out.num_accepted
        drop = (k < gamma) & (k >= 1)
        tokens = out.tokens.copy()
        tokens[np.nonzero(drop)[0], k[drop]] = -1
        return RoundOutput(tokens, np.where(drop, k - 1, k), out.drafts, out.next_context)


class TargetWithout(ChainSampler):
    """The target's rows computed without some knobs of the request (the draft applies them)."""

    def __init__(self, *knobs):
        self.knobs, self.name = knobs, "target_without_" + "_".join(knobs)

    def target_rows(self, pair, ridx, settings, *, bonus):
        drop = {"logit_bias": None, "min_p": 0.0, "top_k": 0, "top_p": 1.0, "temperature": 1.0}
        s = settings
        for k in self.knobs:
            s = SamplingSettings(**{**s.to_dict(), k: drop[k]}) if k != "logit_bias" else _no_bias(s)
        return pair.target_table(s)[ridx]


def _no_bias(s):
    d = s.to_dict()
    d.pop("logit_bias", None)
    return SamplingSettings(**d)


class TruncationFirst(ChainSampler):
    """The target applies top-k, top-p and min-p before temperature."""

    name = "truncation_first_sampler"

    def target_rows(self, pair, ridx, settings, *, bonus):
        return pipeline(pair.target_logits, settings, ("top_k", "top_p", "min_p", "temperature"))[ridx]


class RawLogitsQ(ChainSampler):
    """Drafts from the processed law; the q handed to the verifier the softmax of the raw logits."""

    name = "raw_logits_q_sampler"

    def draft_rows_reported(self, pair, ridx, settings, sampled):
        return pair.draft_table(None)[ridx]


class PreScaledTarget(ChainSampler):
    """The target's logits divided by the temperature, then the whole pipeline (temperature again)."""

    name = "pre_scaled_target_sampler"

    def target_rows(self, pair, ridx, settings, *, bonus):
        return probs_from_logits(pair.target_logits / settings.temperature, settings)[ridx]


def _units(sampler, settings_list, *, n=3000, seed=0):
    out = []
    for i, settings in enumerate(settings_list):
        pair = make_positional_pair(32, 4, alpha=0.6, seed=seed + i, settings=settings)
        gen = run_sampler(sampler, pair, n=n, gamma=4, rng=np.random.default_rng(seed + i), settings=settings)
        out.append((round_evidence(gen, pair, 4, label=f"unit {i}", settings=settings), pair, settings))
    return out


@pytest.mark.parametrize(
    "sampler, name",
    [(BonusAfterBreak, "bonus_after_rejection"), (ReplacementOnlyFirst, "replacement_dropped_after_accepts")],
    ids=lambda x: getattr(x, "name", None) or str(x),
)
def test_a_structure_bug_of_the_study_is_named(sampler, name):
    d = _diagnose(sampler())
    assert d.verdict == name, (d.verdict, d.top(3))


def test_verification_that_goes_on_is_not_taken_for_a_bonus_after_the_replacement():
    from test_diagnosis import BY_NAME

    d = _diagnose(BY_NAME["continue_after_rejection"]())
    assert d.verdict == "continue_after_rejection", (d.verdict, d.top(3))


MIN_P = SamplingSettings(temperature=0.8, min_p=0.1)
BIAS = SamplingSettings(temperature=0.8, logit_bias=((0, 3.0), (1, -3.0), (5, 2.0)))
FILTERS = SamplingSettings(temperature=0.6, top_k=8, top_p=0.8)


@pytest.mark.parametrize(
    "sampler, settings_list, name, words",
    [
        (lambda: TargetWithout("min_p", "logit_bias"), [MIN_P, BIAS], "target_missing_knobs", "min_p and logit_bias"),
        (TruncationFirst, [FILTERS], "truncation_before_temperature", ""),
        (RawLogitsQ, [FILTERS], "q_from_raw_logits", ""),
        (PreScaledTarget, [FILTERS], "target_temperature_twice", ""),
    ],
    ids=["knobs", "truncation_first", "raw_q", "pre_scaled"],
)
def test_a_settings_bug_of_the_study_is_named(sampler, settings_list, name, words):
    d = diagnose_rounds(_units(sampler(), settings_list))
    assert d.verdict == name, (d.verdict, d.top(3))
    assert words in d.lead(), d.lead()


def test_the_correct_rule_gets_none_of_the_study_classes():
    d = diagnose_rounds(_units(ChainSampler(), [MIN_P, BIAS, FILTERS, PLAIN, TOP_P]))
    assert d.verdict == NOT_KNOWN, d.lead()


class KnobAtValue(ChainSampler):
    """A knob of the request read at another value: by the target (the draft right) or by both."""

    def __init__(self, knob, wrong, *, both=False):
        self.knob, self.wrong, self.both, self.name = knob, wrong, both, f"{knob}_at_another_value"

    def _alt(self, settings):
        value = self.wrong(getattr(settings, self.knob))
        return settings if value is None else SamplingSettings(**{**settings.to_dict(), self.knob: value})

    def target_rows(self, pair, ridx, settings, *, bonus):
        return pair.target_table(self._alt(settings))[ridx]

    def draft_rows_sampled(self, pair, ridx, settings):
        return pair.draft_table(self._alt(settings) if self.both else settings)[ridx]


PLAIN = SamplingSettings(temperature=0.8)
TOP_P = SamplingSettings(top_p=0.8)


def _bias_twice(b):
    return tuple((i, 2 * v) for i, v in b) if b else None


@pytest.mark.parametrize(
    "sampler, settings_list, words",
    [
        # tests/study_bugs9/parity.py: the caller adds the bias to the raw logits, the pipeline again
        (lambda: KnobAtValue("logit_bias", _bias_twice), [BIAS], "the target uses logit_bias added twice"),
        # a hand-written top-k without the `if top_k` guard: 0 (off) keeps one token
        (lambda: KnobAtValue("top_k", lambda k: 1 if k == 0 else None), [PLAIN, TOP_P], "top_k = 1 where"),
        (lambda: KnobAtValue("top_p", lambda p: 0.6 if p < 1 else None), [TOP_P, FILTERS], "top_p = 0.6"),
        (
            lambda: KnobAtValue("logit_bias", _bias_twice, both=True),
            [BIAS],
            "draft and target use logit_bias added twice",
        ),
    ],
    ids=["bias_twice", "top_k_zero_as_count", "top_p_value", "both_sides"],
)
def test_a_knob_at_another_value_is_named_with_the_knob_and_the_value(sampler, settings_list, words):
    d = diagnose_rounds(_units(sampler(), settings_list))
    assert d.verdict == "target_knob_value", (d.verdict, d.top(3))
    assert words in d.lead(), d.lead()


@pytest.mark.parametrize("pattern", ["window", "flat"])
def test_a_context_window_is_told_from_a_flat_rate_of_wrong_prefixes(pattern):
    # the rounds of a correct sampler, their verification prefix marked wrong as a rotating cache
    # of 128 tokens would (every round past 128 tokens of prefix) or at a flat rate (a KV block
    # boundary): only the first is a window, and its W is fitted
    [(ev, pair, settings)] = _units(ChainSampler(), [None], n=4000)
    ev.prefix_len = np.arange(len(ev.k)) % 400
    rng = np.random.default_rng(1)
    ev.mismatch = ev.prefix_len > 128 if pattern == "window" else rng.random(len(ev.k)) < 0.1
    d = diagnose_rounds([(ev, pair, settings)])
    if pattern == "window":
        assert d.verdict == "target_context_window" and "W = 128" in d.lead(), d.lead()
    else:
        assert d.verdict == "kv_block_wrong_prefix", d.lead()


def test_state_kept_across_sequences_until_a_cache_reset_is_state_not_reset():
    # the diagnosis study's no_reset stepper (tests/user_impls/stateful.py) resets only when its
    # cache fills: a sequence that starts on the old context turns clean there and stays clean.
    # Marked on a correct sampler's rounds: odd sequences start stale and reset at their 12th round
    [(ev, pair, settings)] = _units(ChainSampler(), [None], n=4000)
    r = np.arange(len(ev.k))
    ev.first_round = (r // 20) * 20
    ev.mismatch = ((r // 20) % 2 == 1) & (r % 20 < 12)
    d = diagnose_rounds([(ev, pair, settings)])
    assert d.verdict == "state_not_reset", d.lead()


def test_an_unknown_lead_lists_only_classes_that_score_above_the_target_law():
    from specverify.diagnosis._candidate import Candidate
    from specverify.diagnosis._diagnose import Diagnosis

    def cand(name, llr):
        return Candidate(name, llr, 0.0, {}, [], {}, "")

    ties = Diagnosis(NOT_KNOWN, [cand("kv_block_wrong_prefix", 0.0), cand("state_not_reset", 0.0)], [], "", 10, 0.9, 1)
    assert "no class scores above the target law" in ties.lead() and "kv_block" not in ties.lead(), ties.lead()
    some = Diagnosis(NOT_KNOWN, [cand("replacement_from_p", 5.0), cand("state_not_reset", 0.0)], [], "", 10, 0.9, 1)
    assert "closest tried: replacement_from_p)" in some.lead(), some.lead()


class SoftmaxOfProbabilities(ChainSampler):
    """What a round step that applies the settings to raw logits does when audited without --logits:
    the probability rows it is handed go through the pipeline again, draft and target alike."""

    name = "softmax_of_probabilities"

    def target_rows(self, pair, ridx, settings, *, bonus):
        return probs_from_logits(pair.target_table(settings), settings)[ridx]

    def draft_rows_sampled(self, pair, ridx, settings):
        return probs_from_logits(pair.draft_table(settings), settings)[ridx]


def test_a_settings_step_audited_on_probabilities_is_told_to_use_logits():
    d = diagnose_rounds(_units(SoftmaxOfProbabilities(), [None, FILTERS]))
    assert d.verdict == "probabilities_as_logits", (d.verdict, d.top(3))
    assert "--logits" in d.lead(), d.lead()


def _grid_record(statuses):
    """A plan's units (one per setting of the --logits grid) and their checks' statuses."""
    from types import SimpleNamespace

    from specverify.audit.pipeline.plan import PARITY_GRID
    from specverify.stats import CheckOutcome

    units = [SimpleNamespace(index=i, setting_index=i, settings=s) for i, s in enumerate(PARITY_GRID[: len(statuses)])]
    checks = [
        CheckOutcome(name=f"settings[{i}]", status=st, kind="statistical", summary="", check_id=f"unit/{i}")
        for i, st in enumerate(statuses)
    ]
    return SimpleNamespace(units=units), checks


def test_an_unknown_settings_fail_says_which_knob_the_failing_settings_share():
    from specverify.diagnosis._facts import knob_fact

    # the grid: T 1, T 0.6, T 1.5, top_p, top_k 2, top_k 5, min_p, penalties x 3, bias, all combined
    fail_min_p = ["PASS"] * 6 + ["FAIL"] + ["PASS"] * 4 + ["FAIL"]
    fact = knob_fact(*_grid_record(fail_min_p))
    assert fact is not None and "sets min_p and no passing one (10) does" in fact, fact
    assert "settings[6], settings[11]" in fact, fact
    # top-k 2 and 5 and the combined setting: top_k, not the knobs only the combined one sets
    fail_top_k = ["PASS"] * 4 + ["FAIL", "FAIL"] + ["PASS"] * 5 + ["FAIL"]
    assert "follows top_k;" in knob_fact(*_grid_record(fail_top_k))
    assert "no one sampling knob" in knob_fact(*_grid_record(["FAIL"] * 12))
    # nothing shared (temperature 0.6 and top_p), an undecided unit, or one setting: no fact
    assert knob_fact(*_grid_record(["PASS", "FAIL", "PASS", "FAIL"])) is None
    assert knob_fact(*_grid_record(["INCONCLUSIVE", "FAIL"])) is None
    assert knob_fact(*_grid_record(["FAIL"])) is None
