"""Bad input raises a specverify error naming the problem and the fix."""

import numpy as np
import pytest
import torch

from specverify import errors
from specverify.dists import check_same_vocab, check_token_ids, validate_logits, validate_probs


@pytest.mark.parametrize(
    "row, cls, words",
    [
        ([0.5, np.nan, 0.5], errors.InvalidDistributionError, "NaN or infinite"),
        ([0.5, np.inf, 0.5], errors.InvalidDistributionError, "NaN or infinite"),
        ([0.7, -0.2, 0.5], errors.InvalidDistributionError, "negative"),
        ([0.5, 0.2, 0.2], errors.InvalidDistributionError, "sum to 1"),
        ([], errors.ShapeError, "empty vocabulary"),
        (0.5, errors.ShapeError, "scalar"),
    ],
)
def test_invalid_probabilities_are_named(row, cls, words):
    with pytest.raises(cls, match=words):
        validate_probs(row)


def test_errors_are_value_errors_too():
    with pytest.raises(ValueError):
        validate_probs([1.0, 1.0])


def test_message_says_how_to_fix():
    with pytest.raises(errors.InvalidDistributionError) as e:
        validate_probs([2.0, -1.0])
    assert "logits" in str(e.value) and "softmax" in str(e.value)


def test_float32_rounding_is_accepted_and_renormalised():
    p = torch.softmax(torch.randn(3, 50_000, generator=torch.Generator().manual_seed(0)), -1)
    out = validate_probs(p)
    assert out.dtype == np.float64 and np.allclose(out.sum(-1), 1.0, atol=1e-15)


def test_wrong_ndim():
    with pytest.raises(errors.ShapeError, match="dimension"):
        validate_probs([[0.5, 0.5]], ndim=1)


@pytest.mark.parametrize(
    "row, words",
    [([0.0, np.nan], "NaN"), ([0.0, np.inf], r"\+inf"), ([-np.inf, -np.inf], "entirely -inf")],
)
def test_invalid_logits(row, words):
    with pytest.raises(errors.InvalidLogitsError, match=words):
        validate_logits(row)


def test_masked_logits_are_fine():
    assert validate_logits([0.0, -np.inf]).shape == (2,)


def test_vocabulary_mismatch():
    with pytest.raises(errors.VocabularyMismatchError, match="vocabulary size 3 but q has 4"):
        check_same_vocab(np.ones(3), np.ones(4))


def test_token_ids_out_of_range():
    with pytest.raises(errors.ShapeError, match="padding"):
        check_token_ids([1, -1], 5)
    assert check_token_ids([0, 4], 5).tolist() == [0, 4]


def test_settings_validation():
    from specverify.dists import SamplingSettings

    for bad in [dict(temperature=-1), dict(top_p=0.0), dict(top_k=-2), dict(min_p=1.5), dict(repetition_penalty=0)]:
        with pytest.raises(errors.InvalidSettingsError):
            SamplingSettings(**bad)
