"""specverify: prove or refute that a speculative-decoding implementation is lossless.

Layers (data flows up; nothing imports from a layer above it):
``dists`` -> ``algorithms`` -> ``theory`` -> ``stats`` -> ``lm`` -> ``runners`` -> ``audit`` ->
``strategies`` / ``pytest_plugin`` / ``cli`` (README.md, "Layout"). The verdict's contract:
docs/verdict.md; the shapes an implementation may take: docs/adapters.md.
"""

from .dists import GREEDY, RequestSettings, SamplingSettings
from .errors import SpecVerifyError

__version__ = "0.1.0"

__all__ = ["GREEDY", "RequestSettings", "SamplingSettings", "SpecVerifyError", "__version__"]
