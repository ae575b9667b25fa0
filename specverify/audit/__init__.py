"""Audits of speculative-decoding implementations: adapters, the run, the verdict, the report.

from specverify.audit import audit, KernelAdapter
verdict = audit(KernelAdapter(my_kernel), eps=0.02)
"""

from .adapters import (
    Adapter,
    GeneratorAdapter,
    KernelAdapter,
    RoundAdapter,
    SamplerAdapter,
    SubprocessAdapter,
    load_callable,
)
from .run import AuditConfig, audit

__all__ = [
    "Adapter",
    "AuditConfig",
    "GeneratorAdapter",
    "KernelAdapter",
    "RoundAdapter",
    "SamplerAdapter",
    "SubprocessAdapter",
    "audit",
    "load_callable",
]
