"""A context model made of two seeded tiny transformers models: the law of the next token depends
on the whole prefix, as in production (no table, no hashing). Slower than the table pairs (one
forward pass per call of ``target``), so an option (``AuditConfig(context="transformers")``,
CLI ``--context transformers``), not the default.

Kinds: ``high`` drafts with the target's weights plus 5% relative noise; ``low`` drafts with an
independently seeded model of the same shape. Laws are computed in float64 from the models' own
float64 copies, and the laws of emitted tokens are per token (``Generation.law``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings, probs_from_logits
from ._contexts import history_counts

if TYPE_CHECKING:  # torch and transformers are imported lazily: the table pairs need neither
    from transformers import PreTrainedModel

__all__ = ["ModelPair", "make_model_pair"]

_CACHE_LIMIT = 200_000


class ModelPair:
    """Target and draft causal LMs behind the interface of :class:`ContextPair`."""

    tabled = False
    order: int | None = None
    positional = True

    def __init__(self, target: PreTrainedModel, draft: PreTrainedModel, *, kind: str) -> None:
        import torch

        self.models = {False: target.to(torch.float64).eval(), True: draft.to(torch.float64).eval()}
        self.kind = kind
        self.vocab_size = int(target.get_output_embeddings().weight.shape[0])
        self._cache: dict[tuple[bool, tuple[int, ...]], npt.NDArray[np.float64]] = {}

    def label(self) -> str:
        return f"{self.kind} (tiny transformers pair, law depends on the whole prefix)"

    def row_of(self, prefix: Sequence[int]) -> int:
        return 0  # untabled: laws are stored per token

    def rows_along(self, seq: Sequence[int], start: int, stop: int) -> list[int]:
        return [0] * max(0, stop - start)

    def law_logits(self, prefix: Sequence[int], *, draft: bool = False) -> npt.NDArray[np.float64]:
        key = (draft, tuple(int(t) for t in prefix))
        if key not in self._cache:
            self._fill(key[1], draft)
        return self._cache[key]

    def _fill(self, ids: tuple[int, ...], draft: bool) -> None:
        """One uncached pass over ``ids``; every prefix of it is cached (read-only rows)."""
        import torch

        if not ids:
            raise ValueError("a prefix must hold at least one token (the audit's prompts have 2 to 5)")
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        with torch.no_grad():
            out = self.models[draft](input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy()
        out.flags.writeable = False
        for t in range(len(ids)):
            self._cache[(draft, ids[: t + 1])] = out[t]

    def law_probs(
        self, prefix: Sequence[int], settings: SamplingSettings | None, *, draft: bool = False, n_prompt: int = 0
    ) -> npt.NDArray[np.float64]:
        row = self.law_logits(prefix, draft=draft)
        if settings is not None and settings.uses_history:
            seen, out = history_counts(prefix, n_prompt, settings, self.vocab_size)
            return probs_from_logits(row, settings, seen_counts=seen, output_counts=out)
        return probs_from_logits(row, settings)


def make_model_pair(vocab: int, kind: str = "high", *, seed: int = 0) -> ModelPair:
    """A seeded tiny Llama target (2 layers, hidden 32) with a draft of the given kind."""
    from ..lm.transformers_lm import build_model, perturbed_copy

    if kind not in ("low", "high"):
        raise ValueError(f"kind={kind!r}: a model pair is 'low' or 'high'")
    target = build_model("llama", vocab=vocab, hidden=32, layers=2, heads=2, seed=seed, lm_head_scale=6.0)
    if kind == "high":
        draft = perturbed_copy(target, eps=0.05, seed=seed + 1)
    else:
        draft = build_model("llama", vocab=vocab, hidden=32, layers=2, heads=2, seed=seed + 7919, lm_head_scale=6.0)
    return ModelPair(target, draft, kind=kind)
