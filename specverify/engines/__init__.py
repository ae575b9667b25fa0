"""Real inference engines, audited as their users run them (docs/engines.md).

    from specverify.engines import build_engine_models, load_float64, VLLMOffline, LlamaCppEngine

The engine packages are imported lazily: this package imports without vLLM or llama.cpp.
"""

from ._models import MODEL_SPEC, EngineModels, build_engine_models, load_float64, write_gguf
from .llama_cpp import LlamaCppEngine
from .vllm import VLLMOffline, sampling_params_kwargs, speculative_config

__all__ = [
    "MODEL_SPEC",
    "EngineModels",
    "LlamaCppEngine",
    "VLLMOffline",
    "build_engine_models",
    "load_float64",
    "sampling_params_kwargs",
    "speculative_config",
    "write_gguf",
]
