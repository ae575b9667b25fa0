"""Statistics with stated error rates: every test has its sample-size and detectable-deviation
companions (TensorFlow Probability's pattern), result objects (scipy's), and the verdict contract.
"""

from ._anderson import ad_limit_sf, anderson_darling_uniform
from ._counts import EventCountResult, event_count_test
from ._gof import exact_multinomial_test, g_test, monte_carlo_gof_test, pearson_test, pool_cells, tv_interval
from ._multiple import benjamini_hochberg, holm
from ._power import (
    chi2_power,
    min_detectable_ks,
    min_detectable_tv,
    min_samples_for_ks,
    min_samples_for_tv,
    noncentrality_for_power,
    samples_any_test_needs_for_tv,
)
from ._results import EXACT_FAILURE, Cell, GofResult
from ._sequential import MultinomialEProcess
from ._serial import SERIAL_STRATUM, serial_dependence_test
from ._stratified import (
    WHITEBOX_CONTEXT_STRATA,
    WHITEBOX_STRATA_WITH_DRAFTS,
    StratumResult,
    acceptance_given_draft_test,
    draft_repeat_eprocess,
    replacement_independence_test,
    stratified_position_tests,
    token_at_stop,
    whitebox_context_tests,
    whitebox_round_tests,
)
from ._stream import (
    DEFAULT_BINS,
    DEFAULT_COMPONENT_NAMES,
    DEFAULT_COMPONENTS,
    StreamLaw,
    StreamTestResult,
    binned_stream_test,
    default_stream_test,
    loglik_score_test,
    pit_test,
    pit_values,
    stratified_stream_test,
    zero_mass_failure,
)
from ._twosample import binned_homogeneity_test, homogeneity_test
from ._verdict import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SCHEMA_VERSION,
    SKIPPED,
    UNSUPPORTED,
    CheckOutcome,
    Status,
    Verdict,
)

__all__ = [
    "EventCountResult",
    "event_count_test",
    # goodness of fit, two-sample
    "pearson_test",
    "g_test",
    "exact_multinomial_test",
    "monte_carlo_gof_test",
    "pool_cells",
    "tv_interval",
    "anderson_darling_uniform",
    "ad_limit_sf",
    "homogeneity_test",
    "binned_homogeneity_test",
    # power, detectable deviation, sample size
    "chi2_power",
    "noncentrality_for_power",
    "samples_any_test_needs_for_tv",
    "min_detectable_tv",
    "min_samples_for_tv",
    "min_detectable_ks",
    "min_samples_for_ks",
    # multiple testing, sequential
    "holm",
    "benjamini_hochberg",
    "MultinomialEProcess",
    # streams of emitted tokens
    "StreamLaw",
    "StreamTestResult",
    "DEFAULT_BINS",
    "DEFAULT_COMPONENTS",
    "DEFAULT_COMPONENT_NAMES",
    "binned_stream_test",
    "default_stream_test",
    "stratified_stream_test",
    "serial_dependence_test",
    "SERIAL_STRATUM",
    "loglik_score_test",
    "pit_test",
    "pit_values",
    "zero_mass_failure",
    # white-box strata of the rounds
    "StratumResult",
    "WHITEBOX_CONTEXT_STRATA",
    "WHITEBOX_STRATA_WITH_DRAFTS",
    "acceptance_given_draft_test",
    "draft_repeat_eprocess",
    "replacement_independence_test",
    "stratified_position_tests",
    "whitebox_context_tests",
    "whitebox_round_tests",
    "token_at_stop",
    # result objects and the verdict contract
    "Cell",
    "GofResult",
    "EXACT_FAILURE",
    "CheckOutcome",
    "Verdict",
    "Status",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "SKIPPED",
    "UNSUPPORTED",
    "SCHEMA_VERSION",
]
