"""Audits of speculative-decoding implementations. Folders show the layers:

* :mod:`.pipeline`: plan -> collect (checkpoints) -> conclude -> verdict, and the exact checks;
* :mod:`.sources`: what is sampled: adapters over users' implementations, language-model
  generators against a computed law, HTTP endpoints, transformers' speculative features;
* :mod:`.front`: the command line and the reports.

from specverify.audit import audit, KernelAdapter
verdict = audit(KernelAdapter(my_kernel), eps=0.02)
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type checkers; at run time each name is loaded on first use (below)
    from .pipeline.config import LMAuditConfig
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
    from .sources.http_adapter import http_generator
    from .sources.lm_audit import audit_lm, audit_lm_pairs, common_shape_generator, greedy_equivalence, lm_pairs

#: the public names, each loaded on first use: auditing a kernel never imports torch, and the command
#: line answers --help and usage errors before scipy is loaded
_LAZY = {
    "AuditConfig": ".pipeline.run",
    "audit": ".pipeline.run",
    **dict.fromkeys(
        ("Adapter", "GeneratorAdapter", "KernelAdapter", "RoundAdapter", "SamplerAdapter", "SubprocessAdapter"),
        ".sources.adapters",
    ),
    "load_callable": ".sources.adapters",
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
