"""The shared pipeline against transformers' own processors, and numpy against torch."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from specverify import strategies as svst
from specverify.dists import SamplingSettings, probs_from_logits, process_logits, token_counts
from specverify.dists.torch_ops import process_logits_torch, token_counts_torch

settings.register_profile("dists", max_examples=150, derandomize=True, deadline=None)


def transformers_pipeline(s: SamplingSettings, history: torch.Tensor) -> LogitsProcessorList:
    """What transformers' generate() builds for these settings, in its order."""
    procs = LogitsProcessorList()
    if s.repetition_penalty != 1.0:
        procs.append(RepetitionPenaltyLogitsProcessor(s.repetition_penalty))
    if s.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(s.temperature))
    if s.top_k:
        procs.append(TopKLogitsWarper(s.top_k, min_tokens_to_keep=s.min_tokens_to_keep))
    if s.top_p < 1.0:
        procs.append(TopPLogitsWarper(s.top_p, min_tokens_to_keep=s.min_tokens_to_keep))
    if s.min_p > 0.0:
        procs.append(MinPLogitsWarper(s.min_p, min_tokens_to_keep=s.min_tokens_to_keep))
    return procs


@settings(settings.get_profile("dists"))
@given(
    x=svst.logits(min_size=2, max_size=24, ties=True),
    s=svst.sampling_settings(penalties=False),
    hist=st.lists(st.integers(0, 23), max_size=6),
    rep=st.sampled_from([1.0, 1.3, 0.7]),
)
def test_matches_transformers_processors(x, s, hist, rep):
    s = SamplingSettings(**{**s.to_dict(), "repetition_penalty": rep})
    v = len(x)
    hist = [h % v for h in hist]
    ids = torch.tensor([hist or [0]], dtype=torch.long)
    want = transformers_pipeline(s, ids)(ids, torch.tensor(x[None, :], dtype=torch.float64))[0].numpy()
    got = process_logits(x, s, seen_counts=token_counts(hist or [0], v))
    kept_want, kept_got = np.isfinite(want), np.isfinite(got)
    differ = kept_want != kept_got
    if differ.any():
        # Allowed only at an exact tie on the top-p boundary, where transformers' unstable sort
        # picks arbitrarily among equal logits: same number kept, differing tokens all tied.
        assert s.top_p < 1.0 and kept_want.sum() == kept_got.sum(), (want, got)
        assert len(set(x[differ].tolist())) == 1, (want, got)
    both = kept_want & kept_got
    assert np.allclose(got[both], want[both], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "x, s, kept",
    [
        # top-k keeps every token tied with the k-th largest
        ([3.0, 2.0, 2.0, 1.0], SamplingSettings(top_k=2), [0, 1, 2]),
        # top-p boundary on a tie: the lowest ids are kept
        ([0.0, 0.0, 0.0, 0.0], SamplingSettings(top_p=0.5), [0, 1]),
        ([1.0, 1.0, 0.0], SamplingSettings(top_p=0.6), [0, 1]),
    ],
)
def test_boundary_ties_match_transformers(x, s, kept):
    x = np.asarray(x)
    t = torch.tensor(x[None, :], dtype=torch.float64)
    want = transformers_pipeline(s, torch.zeros(1, 1, dtype=torch.long))(torch.zeros(1, 1, dtype=torch.long), t)[
        0
    ].numpy()
    got = process_logits(x, s)
    assert np.nonzero(np.isfinite(got))[0].tolist() == kept
    assert np.isfinite(got).sum() == np.isfinite(want).sum()


@settings(settings.get_profile("dists"))
@given(
    x=svst.logits(min_size=2, max_size=32), s=svst.sampling_settings(), hist=st.lists(st.integers(0, 31), max_size=8)
)
def test_numpy_and_torch_forms_agree(x, s, hist):
    v = len(x)
    hist = [h % v for h in hist]
    seen = token_counts(hist, v)
    out = token_counts(hist[len(hist) // 2 :], v)
    got = process_logits(x, s, seen_counts=seen, output_counts=out)
    t = process_logits_torch(
        torch.tensor(x),
        s,
        seen_counts=token_counts_torch(torch.tensor([hist], dtype=torch.long), v)[0]
        if hist
        else torch.zeros(v, dtype=torch.float64),
        output_counts=torch.tensor(out),
    ).numpy()
    assert (np.isfinite(got) == np.isfinite(t)).all()
    assert np.allclose(got[np.isfinite(got)], t[np.isfinite(t)], rtol=1e-12, atol=1e-12)


def test_greedy_is_one_hot_at_lowest_id():
    p = probs_from_logits([1.0, 3.0, 3.0, 0.0], SamplingSettings(temperature=0))
    assert p.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_presence_and_frequency_penalties():
    x = np.zeros(4)
    got = process_logits(
        x, SamplingSettings(presence_penalty=0.5, frequency_penalty=0.25), output_counts=token_counts([1, 1, 2], 4)
    )
    assert got.tolist() == [0.0, -1.0, -0.75, 0.0]


def test_logit_bias_is_added_to_the_raw_logits_before_the_penalties():
    # vLLM's order: bias, then the repetition penalty (x / r for x > 0), then temperature
    x = np.array([1.0, 2.0, -1.0, 0.5])
    s = SamplingSettings(temperature=0.5, repetition_penalty=2.0, logit_bias={"2": 3.0, 0: -1.0})
    got = process_logits(x, s, seen_counts=np.array([0, 1, 1, 0]))
    want = np.array([0.0, 2.0 / 2.0, 2.0 / 2.0, 0.5]) / 0.5  # biased [0, 2, 2, 0.5]; ids 1, 2 penalised
    np.testing.assert_allclose(got, want)
    t = process_logits_torch(torch.tensor(x), s, seen_counts=torch.tensor([0, 1, 1, 0]))
    np.testing.assert_allclose(t.numpy(), want)


def test_logit_bias_round_trips_in_the_openai_form_and_names_bad_input():
    s = SamplingSettings(logit_bias=[(3, 1.5), (0, -2)])
    assert s.logit_bias == ((0, -2.0), (3, 1.5)) and s.to_dict()["logit_bias"] == {"0": -2.0, "3": 1.5}
    assert SamplingSettings(**s.to_dict()) == s and "logit_bias" not in SamplingSettings().to_dict()
    for bad in ({"x": 1.0}, {1: float("inf")}, [(1,)], 3, {True: 1.0}):
        with pytest.raises(ValueError, match="logit_bias must map token ids to finite biases"):
            SamplingSettings(logit_bias=bad)
    with pytest.raises(ValueError, match="logit_bias names id 3, outside a vocabulary of 3"):
        probs_from_logits(np.zeros(3), s)
