"""llama.cpp through llama-cpp-python's Python API, and through its OpenAI server.

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
with ``penalize_prompt=False`` describe it, and its penalty window (``last_n_tokens_size``) settings
with that ``penalty_window`` (``SamplingSettings.require_conventions``).

Two ways in (``api``): ``"generate"`` (the default) as above; ``"completion"`` calls
``Llama.create_completion``, what llama-cpp-python's users and its OpenAI server call: its stops
(text stops; the end-of-sequence token always ends a request, so a request must list it among
``stop_token_ids``: :func:`stop_texts`), its returned logprobs (raw: the log-softmax of the
model's logits, read back by token text; ``generator(logprobs=K)``) and its seeds (a request
without one gets what ``create_completion`` derives for it) are then the engine's own.

The server (``python -m llama_cpp.server``, :func:`serve_llama`) takes text prompts only; a GGUF
written with ``write_gguf(..., tokenizer="t5")`` (a unigram vocabulary of the same words) turns
" t12 t34" back into [12, 34], so :func:`llama_server_generator` sends ids as text and reads them
back from ``logprobs.tokens``. It serves one request at a time (a lock around one ``Llama``).

Speculation: ``"prompt-lookup"`` is ``LlamaPromptLookupDecoding(num_pred_tokens=k)``; a GGUF path
is a second model drafting ``k`` greedy tokens (:class:`GreedyDraft`). llama-cpp-python verifies
by sampling the target at each drafted position and keeping drafts while the sample equals the
draft, so the same seed gives the same tokens with or without speculation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

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
    "stop_texts",
    "completion_output",
    "serve_llama",
    "llama_server_generator",
    "text_prompt",
]


def completion_kwargs(s: SamplingSettings) -> dict[str, Any]:
    """specverify's settings as ``Llama.create_completion`` keywords (temperature 0 is greedy)."""
    if s.logit_bias or s.stop_token_ids:  # not mapped: llama.cpp's own order and stop handling are not audited here
        raise UnsupportedSettingError(f"the llama.cpp adapter maps no logit bias or stop ids ({s.short()})")
    if s.is_greedy:
        return {"temperature": 0.0, "top_k": 1, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}
    # the penalty window depends on the request's length: penalty_window_refusal checks it
    s.require_conventions(who="llama-cpp-python", temperature_last=True, penalize_prompt=False, penalty_window=None)
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
    count the last ``window`` tokens only (``last_n_tokens_size``, 64 by default), the law the last
    ``s.penalty_window`` (0: every generated token), and over ``n`` tokens the two differ unless
    the windows are equal or both hold the ``n - 1`` tokens before the last position
    (results/engines/llama.cpp-requests: a FAIL from position 71 on at 480 tokens with the law's
    window at 0 and the engine's at 64, speculation or not). None where they agree."""
    if not s.uses_history or s.is_greedy:
        return None
    law, engine = s.penalty_window or n, window or n
    if law == engine or min(law, engine) >= n - 1:
        return None
    return (
        f"llama-cpp-python's penalties count the last {window} tokens only (last_n_tokens_size), so it cannot "
        f"sample {s.short()} over {n} tokens; audit it with penalty_window={window}, or build the engine "
        f"with penalty_window >= {n}"
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


def _one_id(piece: str, eos: int | None = None) -> int:
    """The id of one token's text; "" is the end-of-sequence token's (the one token without text
    in specverify's GGUF vocabularies), where ``eos`` is given."""
    if piece == "" and eos is not None:
        return eos
    ids = ids_from_text(piece)
    if len(ids) != 1:
        raise MalformedOutputError(f"llama.cpp returned the token text {piece!r}, not one word 't<id>'")
    return ids[0]


def stop_texts(stop_token_ids: Sequence[int], *, eos: int, vocab: int, greedy: bool = False) -> list[str]:
    """``create_completion``'s ``stop`` strings for ``stop_token_ids`` (the GGUF's words " t<id>").

    llama-cpp-python stops on text and ends every request at its end-of-sequence token: a request
    whose stop ids leave out ``eos`` follows another law than the one audited, and an id whose
    text starts another id's (" t45" in " t451") would stop early; both are declined
    (UnsupportedSettingError naming the fix). A greedy request is taken without ``eos``: its
    output is one sequence, declined afterwards only if it ends there (:func:`_ended_at_eos`)."""
    ids = [int(t) for t in stop_token_ids]
    if eos not in ids and not greedy:
        raise UnsupportedSettingError(
            f"llama-cpp-python's completion ends every request at its end-of-sequence token {eos}; "
            f"audit it with stop_token_ids that include {eos} (got {ids})"
        )
    clash = [t for t in ids if t != eos and any(str(u).startswith(str(t)) for u in range(3, vocab) if u != t)]
    if clash:
        raise UnsupportedSettingError(
            f"llama-cpp-python stops on text, and the text of stop id(s) {clash} begins another token's "
            f"(' t{clash[0]}' in ' t{clash[0]}0'); choose stop ids of {len(str(vocab - 1))} digits"
        )
    return [f" t{t}" for t in ids if t != eos]


def _ended_at_eos(ids: Sequence[int], n: int, s: SamplingSettings, eos: int) -> None:
    """A greedy request taken without ``eos`` among its stops, which llama.cpp ended there anyway."""
    if eos not in s.stop_token_ids and len(ids) < n and ids and ids[-1] == eos:
        raise UnsupportedSettingError(
            f"llama-cpp-python ended a greedy request at its end-of-sequence token {eos} after {len(ids) - 1} "
            f"tokens; the audit's greedy law has no stop there (list {eos} among stop_token_ids)"
        )


def completion_output(choice: Mapping[str, Any], stop_token_ids: Sequence[int], *, eos: int) -> dict[str, Any]:
    """A ``create_completion`` choice as specverify's request output: ``ids``, and ``logprobs`` /
    ``top_logprobs`` where they can be matched to them; ``ended_at_eos`` where the request ended at
    the end-of-sequence token (whose log-probability llama-cpp-python does not list).

    The ids are the words of ``text`` (cut before a stop string), then the stop token: the last of
    ``logprobs.tokens`` where it is a stop id, else ``eos`` (llama-cpp-python breaks before listing
    it). ``logprobs.tokens`` leaves out every token whose id is the model's begin-of-sequence id
    (its loop skips them wherever they occur), so the logprobs are returned only where the tokens
    they list are the ids; otherwise the request's logprobs go unchecked."""
    ids = ids_from_text(str(choice.get("text") or ""))
    lp = choice.get("logprobs") or None
    listed = [_one_id(t) for t in lp["tokens"]] if lp and "tokens" in lp else None
    ended_at_eos = False
    if choice.get("finish_reason") == "stop":
        if listed and listed[-1] in stop_token_ids and listed[-1] != eos:
            ids.append(listed[-1])
        elif listed is None and any(t != eos for t in stop_token_ids):
            raise MalformedOutputError("llama.cpp stopped without logprobs.tokens: which stop id ended it is unknown")
        else:
            ids, ended_at_eos = [*ids, eos], True
    out: dict[str, Any] = {"ids": ids, "ended_at_eos": ended_at_eos}
    if lp is None or listed != ids[: len(ids) - ended_at_eos]:
        return out
    out["logprobs"] = [float(x) for x in lp["token_logprobs"]]
    if lp.get("top_logprobs"):
        out["top_logprobs"] = [{_one_id(k, eos): float(v) for k, v in (d or {}).items()} for d in lp["top_logprobs"]]
    return out


def _request_output(out: dict[str, Any], eos: int, eos_logprob: Callable[[], float] | None) -> dict[str, Any]:
    """``out`` of :func:`completion_output` as the audit reads it: the end-of-sequence token's
    log-probability appended from ``eos_logprob()`` where it ended the request (no logprobs for that
    request where None: over HTTP the row cannot be read)."""
    ended = out.pop("ended_at_eos")
    if not ended or "logprobs" not in out:
        return out
    if eos_logprob is None:
        return {"ids": out["ids"]}
    lp = eos_logprob()
    out["logprobs"] = [*out["logprobs"], lp]
    if "top_logprobs" in out:
        out["top_logprobs"] = [*out["top_logprobs"], {eos: lp}]
    return out


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
                self.model = Llama(model_path=str(path), n_ctx=0, n_threads=n_threads, verbose=False)

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
        api: Literal["generate", "completion"] = "generate",
    ) -> None:
        """``penalty_window``: llama-cpp-python's ``last_n_tokens_size``, the tokens its penalties
        count (64 by default: specverify's law counts every generated token, so outputs longer than
        the window need a window as long as the request to be audited with penalties). ``api``:
        which of llama-cpp-python's calls serves a request (module docstring)."""
        if api not in ("generate", "completion"):
            raise ValueError(f"api={api!r}: 'generate' (Llama.generate) or 'completion' (create_completion)")
        self.api = api
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
            n_ctx=0,
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

    def complete(
        self, prompt: Sequence[int], n: int, seed: int | None, s: SamplingSettings, *, logprobs: int | None = None
    ) -> dict[str, Any]:
        """At most ``n`` tokens from ``create_completion`` with the request's stops and seed (None:
        none sent), read by :func:`completion_output`; ``logprobs=K`` asks for the top K (asked
        for 1 anyway where a stop string needs its token named)."""
        if why := penalty_window_refusal(s, n, int(self.llm.last_n_tokens_size)):
            raise UnsupportedSettingError(why)
        eos = int(self.llm.token_eos())
        stops = stop_texts(s.stop_token_ids, eos=eos, vocab=int(self.llm.n_vocab()), greedy=s.is_greedy)
        kw = completion_kwargs(dataclasses.replace(s, stop_token_ids=()))
        k = logprobs if logprobs is not None else (1 if stops else None)
        response = self.llm.create_completion(
            [int(t) for t in prompt], max_tokens=n, stop=stops, logprobs=k, seed=seed, **kw
        )
        out = completion_output(response["choices"][0], s.stop_token_ids, eos=eos)
        row = len(prompt) - 2 + len(out["ids"])  # where the last id, the end-of-sequence token, was sampled
        out = _request_output(out, eos, lambda: self._logprob_at(row, eos))
        _ended_at_eos(out["ids"], n, s, eos)
        return out

    def _logprob_at(self, row: int, token: int) -> float:
        """The log-probability of ``token`` in the engine's logits row ``row`` (as llama-cpp-python
        computes ``token_logprobs``)."""
        if row >= self.llm.n_tokens:
            raise MalformedOutputError(f"llama.cpp kept no logits row {row} (n_tokens {self.llm.n_tokens})")
        return float(self.llm.logits_to_logprobs(self.llm.scores[row])[token])

    def generator(
        self, *, seeded: bool = True, name: str | None = None, audit_batch: int = 64, logprobs: int | None = None
    ) -> Callable[[Sequence[int], int, int | None, SamplingSettings], Any]:
        """``generate`` for :func:`~specverify.audit.audit_lm`. The engine takes one request at a
        time (batch size 1); ``generate.batch`` runs ``audit_batch`` of them in turn so that the
        auditor computes their laws in one pass. ``logprobs=K`` (``api="completion"`` only) returns
        each token's raw log-probability and the top K beside the ids, for the audit to check."""
        if logprobs is not None and self.api != "completion":
            raise ValueError("logprobs come from create_completion: build the engine with api='completion'")

        def generate(prompt: Sequence[int], n: int, seed: int | None, s: SamplingSettings) -> Any:
            seed = seed if seeded else None
            if self.api == "completion":
                out = self.complete(prompt, n, seed, s, logprobs=logprobs)
                return out if logprobs is not None else out["ids"]
            return self.run(prompt, n, seed, s)

        def batch(
            prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int | None], s: SamplingSettings
        ) -> list[list[int]]:
            return [generate(p, n, sd, s) for p, sd in zip(prompts, seeds, strict=True)]

        generate.__name__ = name or f"llama.cpp[{self.method}]"
        if logprobs is not None:
            generate.logprobs_mode = "raw"  # type: ignore[attr-defined]  # log-softmax of the logits, as returned
        # seed=None: a request without a seed; the same seed reproduces a request
        generate.seed_optional = generate.seeded = generate.sends_seed = seeded  # type: ignore[attr-defined]
        generate.batch = batch  # type: ignore[attr-defined]
        generate.batch_size = audit_batch  # type: ignore[attr-defined]
        return generate

    def logits(self, ids: Sequence[int]) -> npt.NDArray[np.float64]:
        """[len(ids), V] logits of one pass over ``ids`` (the engine keeps every row: ``logits_all``)."""
        self.llm.reset()
        self.llm.eval([int(t) for t in ids])
        return np.array(self.llm.scores[: len(ids)], dtype=np.float64)


def text_prompt(ids: Sequence[int]) -> str:
    """[12, 34] -> " t12 t34" (ids 0-2 are special tokens with no word: refused)."""
    if any(int(t) < 3 for t in ids):
        raise ValueError(f"prompt {list(ids)[:8]}...: ids 0-2 are special tokens with no text; use ids >= 3")
    return "".join(f" t{int(t)}" for t in ids)


@contextlib.contextmanager
def serve_llama(
    gguf_path: str | os.PathLike[str],
    *,
    draft: Literal["prompt-lookup"] | None = None,
    k: int = 3,
    penalty_window: int = 64,
    python: str | None = None,
    port: int | None = None,
    n_threads: int = 1,
    startup_timeout: float = 120.0,
    log: str | os.PathLike[str] | None = None,
) -> Iterator[str]:
    """Run llama-cpp-python's OpenAI server on 127.0.0.1 for the block; yields its base URL.
    ``draft="prompt-lookup"`` is the server's one speculative method (``--draft_model
    prompt-lookup-decoding``, ``k`` tokens); ``penalty_window`` its ``--last_n_tokens_size``."""
    from ._server import free_port, server_process

    port = port or free_port()
    cmd = [python or sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "0", "--logits_all", "true", "--n_threads", str(n_threads),
           "--last_n_tokens_size", str(int(penalty_window)), "--verbose", "false"]  # fmt: skip
    if draft == "prompt-lookup":
        cmd += ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", str(int(k))]
    elif draft is not None:
        raise ValueError(f"draft={draft!r}: llama-cpp-python's server speculates by 'prompt-lookup' only")
    url = f"http://127.0.0.1:{port}"
    with server_process(cmd, url=url, health="/v1/models", who="llama-cpp-python", timeout=startup_timeout,
                        log=log) as up:  # fmt: skip
        yield up


def llama_server_generator(
    base_url: str,
    *,
    vocab: int,
    eos: int = 2,
    seeded: bool = True,
    logprobs: int | None = None,
    penalty_window: int = 64,
    concurrency: int = 1,
    timeout: float = 120.0,
) -> Callable[[Sequence[int], int, int | None, SamplingSettings], Any]:
    """``generate(prompt, n, seed, settings)`` over llama-cpp-python's ``POST /v1/completions``:
    the prompt as text (:func:`text_prompt`), stops as :func:`stop_texts`, the ids read back from
    ``logprobs.tokens``; ``logprobs=K`` returns the raw log-probabilities beside them.
    ``concurrency`` requests are sent at once (the server queues them)."""
    from ..audit.sources.http_adapter import _post_with_retries

    url = base_url.rstrip("/") + "/v1/completions"

    def generate(prompt: Sequence[int], n: int, seed: int | None, s: SamplingSettings) -> Any:
        if why := penalty_window_refusal(s, n, penalty_window):
            raise UnsupportedSettingError(why)
        stops = stop_texts(s.stop_token_ids, eos=eos, vocab=vocab, greedy=s.is_greedy)
        body: dict[str, Any] = {"prompt": text_prompt(prompt), "max_tokens": int(n), "stop": stops,
                                "logprobs": logprobs if logprobs is not None else (1 if stops else None),
                                **completion_kwargs(dataclasses.replace(s, stop_token_ids=()))}  # fmt: skip
        if seeded and seed is not None:
            body["seed"] = int(seed)
        raw = _post_with_retries(url, body, timeout=timeout, retries=1, backoff=1.0)
        choice = json.loads(raw)["choices"][0]
        out = _request_output(completion_output(choice, s.stop_token_ids, eos=eos), eos, None)
        _ended_at_eos(out["ids"], n, s, eos)
        return out if logprobs is not None else out["ids"]

    def batch(prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int | None], s: SamplingSettings) -> list[Any]:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(lambda ps: generate(ps[0], n, ps[1], s), zip(prompts, seeds, strict=True)))

    generate.__name__ = f"llama.cpp-server:{base_url}"
    if logprobs is not None:
        generate.logprobs_mode = "raw"  # type: ignore[attr-defined]
    generate.seed_optional = generate.seeded = generate.sends_seed = seeded  # type: ignore[attr-defined]
    generate.batch = batch  # type: ignore[attr-defined]
    generate.batch_size = 32  # type: ignore[attr-defined]
    return generate
