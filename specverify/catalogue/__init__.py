"""The bug catalogue: known classes of speculative-decoding bugs, and exact decoys.

    from specverify.catalogue import BUGS, DECOYS, ChainSampler, generate
"""

from ._engine import ChainSampler, Generation, Uniforms, generate
from .bugs import BUGS, DECOYS

__all__ = ["BUGS", "DECOYS", "ChainSampler", "Generation", "Uniforms", "generate"]
from .trees import TreeSampler, first_token_deviation  # noqa: E402

__all__ += ["TreeSampler", "first_token_deviation"]
