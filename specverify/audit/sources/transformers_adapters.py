"""Generators that run transformers' own speculative features, for :func:`audit_lm`.

    gen = hf_generator(target, mode="assisted", assistant=draft, gamma=4)
    gen = hf_generator(target, mode="prompt_lookup", gamma=4)
    gen = hf_generator(target, mode="early_exit", exit_layer=1)
    gen = hf_generator(target, mode="target_only")

Each returns ``generate(prompt, max_new_tokens, seed, settings) -> list[int]``. Settings map to
``generate`` keywords explicitly (``top_k=0`` when off, since transformers otherwise defaults to
top-k 50 when sampling); presence and frequency penalties do not exist in transformers and raise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import torch

from ...dists import SamplingSettings
from ...errors import InvalidSettingsError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["hf_generator", "hf_kwargs"]

#: the transformers decoding features hf_generator runs
HFMode = Literal["assisted", "prompt_lookup", "early_exit", "target_only"]


def hf_kwargs(s: SamplingSettings) -> dict[str, object]:
    if s.presence_penalty or s.frequency_penalty:
        raise InvalidSettingsError(
            "transformers has no presence/frequency penalty; audit those with specverify's runner"
        )
    s.require_conventions(who="transformers")
    kw: dict[str, object]
    if s.is_greedy:
        kw = dict(do_sample=False)
    else:
        kw = dict(do_sample=True, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p)
        if s.min_p:
            kw["min_p"] = s.min_p
    if s.repetition_penalty != 1.0:
        kw["repetition_penalty"] = s.repetition_penalty
    return kw


def hf_generator(
    target: PreTrainedModel,
    *,
    mode: HFMode = "assisted",
    assistant: PreTrainedModel | None = None,
    gamma: int | None = 4,
    exit_layer: int = 1,
) -> Callable[[Sequence[int], int, int, SamplingSettings], list[int]]:
    """``generate(prompt, n, seed, settings)`` running transformers' ``generate`` with ``mode``. With
    ``gamma=None``, assisted generation runs as transformers configures it by default (its heuristic
    number of draft tokens and its assistant confidence threshold: speed knobs, not the law);
    otherwise ``gamma`` draft tokens per round, constant, and no threshold."""
    from transformers import logging as hf_logging

    hf_logging.set_verbosity_error()
    device = next(target.parameters()).device

    def generate(prompt: Sequence[int], max_new_tokens: int, seed: int, settings: SamplingSettings) -> list[int]:
        torch.manual_seed(seed)
        kw = hf_kwargs(settings)
        if mode == "assisted" and gamma is None:
            kw.update(assistant_model=assistant)
        elif mode == "assisted":
            kw.update(
                assistant_model=assistant,
                num_assistant_tokens=gamma,
                num_assistant_tokens_schedule="constant",
                assistant_confidence_threshold=0.0,
            )
        elif mode == "prompt_lookup":
            kw.update(prompt_lookup_num_tokens=gamma or 4)
        elif mode == "early_exit":
            kw.update(
                assistant_early_exit=exit_layer,
                num_assistant_tokens=gamma or 4,
                num_assistant_tokens_schedule="constant",
                assistant_confidence_threshold=0.0,
            )
        elif mode != "target_only":
            raise ValueError(f"unknown mode {mode!r}")
        x = torch.tensor([list(prompt)], device=device)
        with torch.no_grad():
            out = target.generate(
                x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=max_new_tokens,
                # without stop ids every request runs to max_new_tokens; with them, transformers stops at the first
                min_new_tokens=0 if settings.stop_token_ids else max_new_tokens,
                pad_token_id=0,
                eos_token_id=list(settings.stop_token_ids) or None,
                **kw,
            )
        ids: list[int] = out[0, len(prompt) :].tolist()
        return ids

    generate.__name__ = f"transformers-{mode}"
    return generate
