"""Statistics with stated error rates: every test has its sample-size and detectable-deviation
companions (TensorFlow Probability's pattern), result objects (scipy's), and the verdict contract.
"""

from ._anderson import ad_limit_sf, anderson_darling_uniform
from ._gof import exact_multinomial_test, g_test, monte_carlo_gof_test, pearson_test, pool_cells
from ._multiple import benjamini_hochberg, holm
from ._power import (
    chi2_power,
    min_detectable_ks,
    min_detectable_tv,
    min_samples_for_ks,
    min_samples_for_tv,
    noncentrality_for_power,
)
from ._results import Cell, GofResult
from ._sequential import MultinomialEProcess
from ._stratified import (
    WHITEBOX_CONTEXT_STRATA,
    WHITEBOX_STRATA_WITH_DRAFTS,
    StratumResult,
    acceptance_given_draft_test,
    draft_repeat_eprocess,
    replacement_independence_test,
    stratified_position_tests,
    whitebox_context_tests,
    whitebox_round_tests,
)
from ._stream import (
    DEFAULT_BINS,
    DEFAULT_COMPONENTS,
    StreamLaw,
    StreamTestResult,
    binned_stream_test,
    default_stream_test,
    loglik_score_test,
    pit_test,
    pit_values,
    plain_pearson_stream_test,
    stratified_stream_test,
    vllm_position_chi2,
)
from ._twosample import binned_homogeneity_test, homogeneity_test
from ._verdict import FAIL, INCONCLUSIVE, PASS, SCHEMA_VERSION, CheckOutcome, Verdict

__all__ = [name for name in dir() if not name.startswith("_")]
