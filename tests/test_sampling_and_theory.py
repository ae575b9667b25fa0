from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats

from specverify import theory
from specverify.dists import exponential_race_sample, inverse_cdf_sample, sample_tokens
from specverify.dists.torch_ops import (
    _inverse_cdf_sample_torch_ops,
    exponential_race_sample_torch,
    inverse_cdf_sample_torch,
)


def test_inverse_cdf_never_returns_zero_weight_tokens():
    w = np.array([0.0, 0.3, 0.0, 0.0, 0.7, 0.0])
    u = np.concatenate([np.linspace(0, 1, 1001, endpoint=False), [1 - 2**-53]])
    out = inverse_cdf_sample(np.broadcast_to(w, (len(u), 6)), u)
    assert set(out.tolist()) == {1, 4}
    assert (out[u < 0.3 - 1e-12] == 1).all() and (out[u > 0.3 + 1e-12] == 4).all()
    for torch_form in (inverse_cdf_sample_torch, _inverse_cdf_sample_torch_ops):  # the CPU dispatch, the ops
        t = torch_form(torch.tensor(np.broadcast_to(w, (len(u), 6)).copy()), torch.tensor(u))
        assert t.tolist() == out.tolist()


@pytest.mark.parametrize("method", ["inverse_cdf", "race"])
def test_samplers_follow_their_law(method):
    # Fixed seed; p-value threshold 1e-9, so even a random seed would false-fail < 1e-9.
    p = np.array([0.5, 0.25, 0.125, 0.0, 0.125])
    x = sample_tokens(np.broadcast_to(p, (200_000, 5)), np.random.default_rng(1), method=method)
    counts = np.bincount(x, minlength=5)
    assert counts[3] == 0
    assert stats.chisquare(counts[p > 0], p[p > 0] * len(x)).pvalue > 1e-9


def test_sampler_bug_is_detected_by_that_check():
    # Negative control for the check above: an off-by-one inverse CDF must fail it.
    p = np.array([0.5, 0.25, 0.125, 0.0, 0.125])
    x = np.minimum(sample_tokens(np.broadcast_to(p, (200_000, 5)), np.random.default_rng(1)) + 1, 4)
    counts = np.bincount(x, minlength=5)
    assert counts[3] > 0 or stats.chisquare(counts[p > 0], p[p > 0] * len(x)).pvalue < 1e-9


def test_race_torch_matches_numpy():
    rng = np.random.default_rng(3)
    w = rng.random((50, 7))
    e = rng.exponential(size=(50, 7))
    assert (
        exponential_race_sample(w, e).tolist()
        == exponential_race_sample_torch(torch.tensor(w), torch.tensor(e)).tolist()
    )


def test_theory_values():
    assert theory.expected_tokens_per_round(Fraction(1, 2), 3) == Fraction(15, 8)
    assert theory.expected_tokens_per_round(1, 4) == 5
    assert theory.expected_tokens_per_round(0.7, 4) == pytest.approx(2.7731, abs=1e-4)
    assert theory.accepted_length_law(Fraction(1, 2), 2) == [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)]
    assert theory.expected_speedup(0.8, 4, 0.05) == pytest.approx(theory.expected_tokens_per_round(0.8, 4) / 1.2)
    g, s = theory.optimal_gamma(0.8, 0.05)
    assert s >= max(theory.expected_speedup(0.8, k, 0.05) for k in range(1, 40)) - 1e-12
    assert theory.optimal_gamma(0.1, 0.9)[0] == 0  # drafting does not pay
    assert theory.acceptance_rate([0.5, 0.5], [1.0, 0.0]) == 0.5
    assert theory.acceptance_rate([0.5, 0.5], [1.0, 0.0], rule="one_hot") == 0.5
    assert theory.rejection_mass([0.2, 0.8], [0.6, 0.4]) == pytest.approx(0.4)
