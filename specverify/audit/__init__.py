"""Audits of speculative-decoding implementations. Folders show the layers:

* :mod:`.pipeline`: plan -> collect (checkpoints) -> conclude -> verdict, and the exact checks;
* :mod:`.sources`: what is sampled: adapters over users' implementations, language-model
  generators against a computed law, HTTP endpoints, transformers' speculative features;
* :mod:`.front`: the command line and the reports.

from specverify.audit import audit, KernelAdapter
verdict = audit(KernelAdapter(my_kernel), eps=0.02)
"""

from .pipeline.run import AuditConfig, audit
from .sources.adapters import (
    Adapter,
    GeneratorAdapter,
    KernelAdapter,
    RoundAdapter,
    SamplerAdapter,
    SubprocessAdapter,
    load_callable,
)

#: public names whose modules import torch: loaded on first use, so that auditing a kernel stays light
_LAZY = {
    "audit_lm": ".sources.lm_audit",
    "common_shape_generator": ".sources.lm_audit",
    "greedy_equivalence": ".sources.lm_audit",
    "audit_lm_pairs": ".sources.lm_audit",
    "lm_pairs": ".sources.lm_audit",
    "LMAuditConfig": ".pipeline.config",
    "http_generator": ".sources.http_adapter",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Adapter",
    "AuditConfig",
    "GeneratorAdapter",
    "KernelAdapter",
    "RoundAdapter",
    "SamplerAdapter",
    "SubprocessAdapter",
    "audit",
    "audit_lm",
    "audit_lm_pairs",
    "lm_pairs",
    "LMAuditConfig",
    "common_shape_generator",
    "greedy_equivalence",
    "http_generator",
    "load_callable",
]
