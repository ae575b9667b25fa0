"""Decoding loops on transformers models: target-only and chain speculative decoding with a
draft model, KV caches with rollback, the shared sampling pipeline applied to both models.

    from specverify.runners import target_only_generate, speculative_generate
"""

from .loops import RunResult, acceptance_z, speculative_generate, target_only_generate

__all__ = ["RunResult", "acceptance_z", "speculative_generate", "target_only_generate"]
