"""llama.cpp through llama-cpp-python's Python API (its server takes only text prompts).

    engine = LlamaCppEngine(gguf_target, draft="prompt-lookup", k=3)        # or draft=gguf_draft
    generate = engine.generator(seeded=True)                                  # for audit_lm

Prompts go in as token ids and ids come out of ``Llama.generate``, the loop that
``create_completion`` runs (and where speculation happens) without its stop at an end-of-sequence
token, so that each sequence has the requested length and the target law is not conditioned on
anything. Settings map to ``create_completion`` keywords (:func:`completion_kwargs`, or
:func:`generate_kwargs`): ``top_k=0`` and
``min_p=0`` switch those filters off, ``repeat_penalty`` is the repetition penalty. llama.cpp
applies temperature after its filters (penalties, top-k, top-p, min-p, then temperature), where
transformers and vLLM apply it first: settings with ``temperature_last=True`` describe its law, and
settings in the other order where the order matters (temperature != 1 with top-p or min-p) are
refused as unsupported. Its repetition penalty counts generated tokens only (``Llama.generate``
creates a sampler per call and never shows it the prompt; llama.cpp's own server does): settings
with ``penalize_prompt=False`` describe it (``SamplingSettings.require_conventions``).

Speculation: ``"prompt-lookup"`` is ``LlamaPromptLookupDecoding(num_pred_tokens=k)``; a GGUF path
is a second model drafting ``k`` greedy tokens (:class:`GreedyDraft`). llama-cpp-python verifies
by sampling the target at each drafted position and keeping drafts while the sample equals the
draft, so the same seed gives the same tokens with or without speculation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings
from ..errors import MalformedOutputError, UnsupportedSettingError

__all__ = [
    "LlamaCppEngine",
    "GreedyDraft",
    "completion_kwargs",
    "generate_kwargs",
    "ids_from_text",
    "penalty_window_refusal",
]


def completion_kwargs(s: SamplingSettings) -> dict[str, Any]:
    """specverify's settings as ``Llama.create_completion`` keywords (temperature 0 is greedy)."""
    if s.logit_bias or s.stop_token_ids:  # not mapped: llama.cpp's own order and stop handling are not audited here
        raise UnsupportedSettingError(f"the llama.cpp adapter maps no logit bias or stop ids ({s.short()})")
    if s.is_greedy:
        return {"temperature": 0.0, "top_k": 1, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}
    s.require_conventions(who="llama-cpp-python", temperature_last=True, penalize_prompt=False)
    return {
        "temperature": float(s.temperature),
        "top_p": float(s.top_p),
        "top_k": int(s.top_k),
        "min_p": float(s.min_p),
        "repeat_penalty": float(s.repetition_penalty),
        "presence_penalty": float(s.presence_penalty),
        "frequency_penalty": float(s.frequency_penalty),
    }


def generate_kwargs(s: SamplingSettings) -> dict[str, Any]:
    """The same settings as ``Llama.generate`` keywords (its names differ: ``temp``)."""
    kw = completion_kwargs(s)
    kw["temp"] = kw.pop("temperature")
    return kw


def penalty_window_refusal(s: SamplingSettings, n: int, window: int) -> str | None:
    """Why llama-cpp-python cannot sample the law of ``s`` over ``n`` generated tokens: its penalties
    count the last ``window`` tokens only (``last_n_tokens_size``, 64 by default), the law counts
    every generated token, so a request with penalties longer than the window follows another law
    (results/engines/llama.cpp-requests: a FAIL from position 71 on at 480 tokens, speculation or
    not). None where they agree."""
    if not s.uses_history or s.is_greedy or n <= window:
        return None
    return (
        f"llama-cpp-python's penalties count the last {window} tokens only (last_n_tokens_size), so it cannot "
        f"sample {s.short()} over {n} tokens, where every generated token counts; build the engine with "
        f"penalty_window >= {n}"
    )


def ids_from_text(text: str) -> list[int]:
    """ " t12 t34" -> [12, 34] (the vocabulary of the GGUF files specverify writes)."""
    try:
        return [int(w[1:]) for w in text.split()]
    except ValueError as exc:
        raise MalformedOutputError(
            f"llama.cpp returned text {text[:80]!r}, not words 't<id>'; the GGUF must be one "
            "written by specverify.engines.write_gguf"
        ) from exc


def _draft_base() -> Any:
    from llama_cpp.llama_speculative import LlamaDraftModel

    return LlamaDraftModel


class GreedyDraft:
    """A second GGUF model proposing ``k`` greedy tokens (llama-cpp-python's ``LlamaDraftModel``
    protocol: called with the ids so far, returns the proposed ids)."""

    def __new__(cls, path: str | os.PathLike[str], k: int, *, n_threads: int = 1) -> Any:
        base = _draft_base()

        class _Draft(base):  # type: ignore[valid-type,misc]
            def __init__(self) -> None:
                from llama_cpp import Llama

                self.k = k
                self.model = Llama(model_path=str(path), n_ctx=512, n_threads=n_threads, verbose=False)

            def __call__(self, input_ids: Sequence[int], **kwargs: Any) -> npt.NDArray[np.intc]:
                out: list[int] = []
                for tok in self.model.generate([int(t) for t in input_ids], top_k=1, temp=0.0, reset=True):
                    out.append(tok)
                    if len(out) >= self.k:
                        break
                return np.array(out, dtype=np.intc)

        return _Draft()


class LlamaCppEngine:
    """One ``llama_cpp.Llama`` over a GGUF target, optionally with a drafter (module docstring)."""

    def __init__(
        self,
        gguf_path: str | os.PathLike[str],
        *,
        draft: str | os.PathLike[str] | None = None,
        k: int = 3,
        n_threads: int = 1,
        seed: int = 0,
        penalty_window: int = 64,
    ) -> None:
        """``penalty_window``: llama-cpp-python's ``last_n_tokens_size``, the tokens its penalties
        count (64 by default: specverify's law counts every generated token, so outputs longer than
        the window need a window as long as the request to be audited with penalties)."""
        from llama_cpp import Llama

        drafter = None
        if draft == "prompt-lookup":
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            drafter = LlamaPromptLookupDecoding(num_pred_tokens=k, max_ngram_size=3)
        elif draft:
            drafter = GreedyDraft(draft, k, n_threads=n_threads)
        self.method = "none" if draft is None else ("prompt-lookup" if draft == "prompt-lookup" else "draft")
        self.llm = Llama(
            model_path=str(gguf_path),
            n_ctx=512,
            n_threads=n_threads,
            seed=seed,
            draft_model=drafter,
            logits_all=True,
            last_n_tokens_size=int(penalty_window),
            verbose=False,
        )

    def run(self, prompt: Sequence[int], n: int, seed: int | None, s: SamplingSettings) -> list[int]:
        """``n`` tokens from ``Llama.generate`` (where llama-cpp-python speculates; it never stops at
        an end-of-sequence token, so every sequence has its full length). ``seed=None`` resets the
        engine to llama.cpp's default seed, a fresh random one per call, as for a caller who never
        passes seeds."""
        if why := penalty_window_refusal(s, n, int(self.llm.last_n_tokens_size)):
            raise UnsupportedSettingError(why)
        import llama_cpp

        self.llm.set_seed(llama_cpp.LLAMA_DEFAULT_SEED if seed is None else int(seed))
        out: list[int] = []
        for tok in self.llm.generate([int(t) for t in prompt], reset=True, **generate_kwargs(s)):
            out.append(int(tok))
            if len(out) >= n:
                break
        return out

    def generator(
        self, *, seeded: bool = True, name: str | None = None, audit_batch: int = 64
    ) -> Callable[[Sequence[int], int, int | None, SamplingSettings], list[int]]:
        """``generate`` for :func:`~specverify.audit.audit_lm`. The engine takes one request at a
        time (batch size 1); ``generate.batch`` runs ``audit_batch`` of them in turn so that the
        auditor computes their laws in one pass."""

        def generate(prompt: Sequence[int], n: int, seed: int | None, s: SamplingSettings) -> list[int]:
            return self.run(prompt, n, seed if seeded else None, s)

        def batch(
            prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int | None], s: SamplingSettings
        ) -> list[list[int]]:
            return [generate(p, n, sd, s) for p, sd in zip(prompts, seeds, strict=True)]

        generate.__name__ = name or f"llama.cpp[{self.method}]"
        generate.batch = batch  # type: ignore[attr-defined]
        generate.batch_size = audit_batch  # type: ignore[attr-defined]
        return generate

    def logits(self, ids: Sequence[int]) -> npt.NDArray[np.float64]:
        """[len(ids), V] logits of one pass over ``ids`` (the engine keeps every row: ``logits_all``)."""
        self.llm.reset()
        self.llm.eval([int(t) for t in ids])
        return np.array(self.llm.scores[: len(ids)], dtype=np.float64)
