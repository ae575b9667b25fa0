"""Distributions: validation, the shared logits-processing pipeline, sampling primitives.

Public surface; implementation lives in private modules. The torch forms are in
:mod:`specverify.dists.torch_ops` (imported on demand so that numpy-only users never load torch).
"""

from ._boundary import FilterBoundary, filter_boundaries
from ._processing import probs_from_logits, process_logits, running_counts, softmax, token_counts
from ._sampling import (
    exponential_race_sample,
    gumbel_max_sample,
    inverse_cdf_sample,
    inverse_cdf_sample_many,
    inverse_cdf_sample_scalar,
    sample_tokens,
)
from ._settings import GREEDY, RequestSettings, SamplingSettings
from ._validate import (
    SUM_TOLERANCE,
    as_float64,
    check_same_vocab,
    check_token_ids,
    validate_logits,
    validate_probs,
)

__all__ = [
    "FilterBoundary",
    "GREEDY",
    "SUM_TOLERANCE",
    "SamplingSettings",
    "RequestSettings",
    "as_float64",
    "check_same_vocab",
    "check_token_ids",
    "exponential_race_sample",
    "filter_boundaries",
    "gumbel_max_sample",
    "inverse_cdf_sample",
    "inverse_cdf_sample_many",
    "inverse_cdf_sample_scalar",
    "probs_from_logits",
    "process_logits",
    "running_counts",
    "sample_tokens",
    "softmax",
    "token_counts",
    "validate_logits",
    "validate_probs",
]
