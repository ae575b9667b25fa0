"""Reference speculative algorithms.

Each rule exists as a scalar executable spec (:mod:`.chain_reference`), a numpy batch form
(:mod:`.chain_numpy`), a torch form (:mod:`.chain_torch`, import on demand), and an exact law
(:mod:`.exact_law`). The uniform contract shared by the three sampling forms is documented in
:mod:`.chain_reference`.
"""

from ._fused import fused_kernel_available, numpy_fallback
from .block_verification import (
    BLOCK,
    BLOCK_VARIANTS,
    BlockVariant,
    block_first_tokens_law,
    block_kernel_law,
    block_round_law,
    verify_block,
    verify_block_batch,
)
from .chain_numpy import (
    ChainResult,
    draft_and_verify_batch,
    verify_chain_batch,
    verify_greedy_batch,
    verify_one_hot_batch,
    verify_sample_and_match_batch,
)
from .chain_reference import (
    argmax_lowest,
    greedy_step,
    speculative_step,
    verify_chain,
    verify_greedy,
    verify_one_hot,
    verify_sample_and_match,
)
from .exact_law import (
    FULL,
    GREEDY_RULE,
    ONE_HOT,
    RULES,
    SAMPLE_AND_MATCH,
    PositionRule,
    first_token_law,
    first_tokens_law,
    greedy_target_tokens,
    kernel_output_law,
    round_law,
    target_law,
    total_variation,
)
from .traversal import (
    TRAVERSAL,
    TraversalResult,
    traversal_first_tokens_law,
    traversal_kernel_law,
    traversal_round_law,
    verify_traversal,
    verify_traversal_batch,
)

__all__ = [
    "ChainResult",
    "FULL",
    "GREEDY_RULE",
    "ONE_HOT",
    "RULES",
    "SAMPLE_AND_MATCH",
    "PositionRule",
    "argmax_lowest",
    "draft_and_verify_batch",
    "first_token_law",
    "first_tokens_law",
    "fused_kernel_available",
    "numpy_fallback",
    "greedy_step",
    "greedy_target_tokens",
    "kernel_output_law",
    "round_law",
    "speculative_step",
    "target_law",
    "total_variation",
    "verify_chain",
    "verify_chain_batch",
    "verify_greedy",
    "verify_greedy_batch",
    "verify_one_hot",
    "verify_one_hot_batch",
    "verify_sample_and_match",
    "verify_sample_and_match_batch",
    "BLOCK",
    "BLOCK_VARIANTS",
    "BlockVariant",
    "block_first_tokens_law",
    "block_kernel_law",
    "block_round_law",
    "verify_block",
    "verify_block_batch",
    "TRAVERSAL",
    "TraversalResult",
    "traversal_first_tokens_law",
    "traversal_kernel_law",
    "traversal_round_law",
    "verify_traversal",
    "verify_traversal_batch",
]
