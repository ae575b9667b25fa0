"""The bug catalogue: known classes of speculative-decoding bugs, and exact decoys.

from specverify.catalogue import BUGS, DECOYS, ChainSampler
from specverify.harness import run_sampler   # drives any of them on a table pair
"""

from ..harness import ChainSampler, Uniforms
from .bugs import BUGS, DECOYS
from .trees import TreeSampler, first_token_deviation

__all__ = ["BUGS", "DECOYS", "ChainSampler", "Uniforms", "TreeSampler", "first_token_deviation"]
