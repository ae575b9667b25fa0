"""``specverify serve``: an OpenAI-compatible completions endpoint over a local model.

Serves ``POST /v1/completions`` (token-id prompts; ``max_tokens``, ``temperature``, ``top_p``,
``top_k``, ``min_p``, ``repetition_penalty``, ``seed``, ``logprobs``) and ``GET /v1/models``,
with or without speculative decoding, from a seeded model built from a config or a local path.
Sampled tokens come back as ``"token_id:<id>"`` in ``choices[0].logprobs.tokens`` (vLLM's
``return_tokens_as_token_ids`` convention) with their log-probabilities under the processed
target distribution. Built on the standard library's threading HTTP server: no extra dependency.

A request the server cannot honour (a prompt that is not a non-empty list of ids in [0, V),
``max_tokens`` that is not an integer >= 1, settings out of range such as ``temperature < 0`` or
``top_p`` outside (0, 1], a body that is not a JSON object) is answered with HTTP 400 and
``{"error": {"message": "...", "type": "invalid_request_error", "param": "...", "code": 400}}``,
OpenAI's error shape; a generation that fails is a 500 in the same shape.
"""

from __future__ import annotations

import json
import math
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import torch

from ..dists import SamplingSettings
from ..errors import InvalidSettingsError
from ..lm.transformers_lm import CausalLM
from .loops import speculative_generate, target_only_generate

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["make_server", "serve_forever", "default_models", "parse_request", "BadRequest"]


class BadRequest(ValueError):
    """A request the server answers with HTTP 400 and ``{"error": {"message": ...}}``."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@overload
def _number(req: dict[str, Any], key: str, default: float, *, integer: Literal[False] = False) -> float: ...
@overload
def _number(req: dict[str, Any], key: str, default: int, *, integer: Literal[True]) -> int: ...
def _number(req: dict[str, Any], key: str, default: float, *, integer: bool = False) -> float:
    """req[key] as a number (an int when ``integer``); absent or null gives the default."""
    v = req.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise BadRequest(f"{key} must be {'an integer' if integer else 'a number'}, got {v!r}", key)
    if not math.isfinite(v):
        raise BadRequest(f"{key} must be finite, got {v!r}", key)
    return v


def _settings(req: dict[str, Any]) -> SamplingSettings:
    kw: dict[str, float | int] = dict(
        temperature=float(_number(req, "temperature", 1.0)),
        top_p=float(_number(req, "top_p", 1.0)),
        top_k=int(_number(req, "top_k", 0, integer=True)),
        min_p=float(_number(req, "min_p", 0.0)),
        repetition_penalty=float(_number(req, "repetition_penalty", 1.0)),
        presence_penalty=float(_number(req, "presence_penalty", 0.0)),
        frequency_penalty=float(_number(req, "frequency_penalty", 0.0)),
    )
    if kw["top_k"] == -1:  # vLLM's "off"
        kw["top_k"] = 0
    stops, bias = req.get("stop_token_ids") or (), req.get("logit_bias") or ()
    try:
        # each value has its field's type
        return SamplingSettings(**kw, stop_token_ids=stops, logit_bias=bias)  # type: ignore[arg-type]
    except InvalidSettingsError as exc:
        raise BadRequest(str(exc), str(exc).split(" ", 1)[0]) from exc


def parse_request(
    req: Any, *, vocab_size: int, max_positions: int | None = None
) -> tuple[list[int], int, SamplingSettings, int, bool]:
    """Validate a /v1/completions body: (prompt, max_tokens, settings, seed, logprobs) or BadRequest."""
    if not isinstance(req, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(req).__name__}")
    if "prompt" not in req:
        raise BadRequest("missing 'prompt': pass a non-empty list of token ids", "prompt")
    prompt = req["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]  # a batch of one prompt
    if not isinstance(prompt, list) or not prompt:
        raise BadRequest(
            f"prompt must be a non-empty list of token ids (this server takes no text), got {type(prompt).__name__}"
            + ("" if isinstance(prompt, list) else f" {str(prompt)[:40]!r}"),
            "prompt",
        )
    for i, t in enumerate(prompt):
        if isinstance(t, bool) or not isinstance(t, int):
            raise BadRequest(f"prompt[{i}] = {t!r} is not a token id (an integer)", "prompt")
        if not 0 <= t < vocab_size:
            raise BadRequest(f"prompt[{i}] = {t} is outside the vocabulary [0, {vocab_size})", "prompt")
    n = _number(req, "max_tokens", 16, integer=True)
    if n < 1:
        raise BadRequest(f"max_tokens must be an integer >= 1, got {n}", "max_tokens")
    if max_positions is not None and len(prompt) + n > max_positions:
        raise BadRequest(
            f"prompt ({len(prompt)} tokens) plus max_tokens ({n}) exceeds the model's {max_positions} positions",
            "max_tokens",
        )
    # a request without a seed gets a fresh one (before, every unseeded request got seed 0, so unseeded
    # requests of one prompt returned the same tokens: NVIDIA/TensorRT-LLM#19487's bug, found by the seed check)
    seed = _number(req, "seed", secrets.randbits(63), integer=True)
    if not 0 <= seed < 2**63:
        raise BadRequest(f"seed must lie in [0, 2**63), got {seed}", "seed")
    if req.get("n", 1) != 1 or req.get("stream"):
        raise BadRequest("this server returns one choice without streaming; drop 'n' and 'stream'", "n")
    return prompt, n, _settings(req), seed, req.get("logprobs") is not None


def _prompt_logprobs_asked(req: Any, vocab_size: int) -> int | None:
    """``prompt_logprobs`` (vLLM's field): None, K >= 0 tokens per position, or -1 for all."""
    if req.get("prompt_logprobs") is None:
        return None
    k = _number(req, "prompt_logprobs", 0, integer=True)
    if k < -1:
        raise BadRequest(f"prompt_logprobs must be an integer >= 0, or -1 for every token; got {k}", "prompt_logprobs")
    return vocab_size if k == -1 else min(k, vocab_size)


def _prompt_logprobs(lm: CausalLM, prompt: list[int], k: int) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM's ``prompt_logprobs``: None, then per position the raw float32 log-probabilities of its
    top ``k`` tokens and of the token there, ``{"id": {"logprob", "rank", "decoded_token"}}``."""
    with torch.no_grad():
        lp = torch.log_softmax(lm.logits(prompt)[:-1].float(), -1)  # [L - 1, V]: the law of tokens 1 .. L - 1
    out: list[dict[str, dict[str, Any]] | None] = [None]
    order = torch.sort(lp, dim=-1, descending=True, stable=True).indices
    for j, t in enumerate(prompt[1:]):
        ids = order[j, :k].tolist()
        rank = {int(i): r + 1 for r, i in enumerate(ids)}
        if t not in rank:
            ids.append(t)
            rank[t] = int((lp[j] > lp[j, t]).sum()) + 1
        out.append({str(i): {"logprob": float(lp[j, i]), "rank": rank[i], "decoded_token": str(i)} for i in ids})
    return out


def default_models(
    *, model_path: str | None = None, vocab: int = 256, seed: int = 0, speculative: bool = False
) -> tuple[PreTrainedModel, PreTrainedModel | None]:
    """(target, draft or None): the models ``specverify serve`` serves, built here so that an audit
    computes the law of exactly the same target. Without ``model_path``, a seeded 6-layer Llama
    (``layered_target``) whose 2-layer early exit is the draft; with it, the local model and its
    1-layer early exit."""
    from ..lm.transformers_lm import early_exit_copy, layered_target, load_local

    if model_path:
        target = load_local(model_path)
        return target, (early_exit_copy(target, layers=1) if speculative else None)
    target = layered_target("llama", vocab=vocab, hidden=64, layers=6, heads=4, seed=seed, lm_head_scale=6.0, keep=2)
    return target, (early_exit_copy(target, layers=2) if speculative else None)


# long: the request handler class is defined inside, closing over the models
def make_server(
    target: PreTrainedModel,
    draft: PreTrainedModel | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    gamma: int = 4,
    model_name: str = "specverify-local",
) -> ThreadingHTTPServer:
    """A ThreadingHTTPServer (not started). ``draft=None`` serves target-only decoding."""
    lock = threading.Lock()  # one generation at a time: the models are not re-entrant
    lm = CausalLM(target)
    vocab_size = int(target.config.vocab_size)
    max_positions = getattr(target.config, "max_position_embeddings", None) or getattr(
        target.config, "n_positions", None
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:  # quiet
            pass

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": model_name,
                                "object": "model",
                                "speculative": draft is not None,
                                "vocab_size": vocab_size,
                            }
                        ],
                    },
                )
            else:
                self._error(404, f"no route {self.path}; GET /v1/models or POST /v1/completions", kind="not_found")

        def _error(
            self, code: int, message: str, param: str | None = None, kind: str = "invalid_request_error"
        ) -> None:
            self._send(code, {"error": {"message": message, "type": kind, "param": param, "code": code}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/completions":
                return self._error(404, f"no route {self.path}; POST /v1/completions", kind="not_found")
            try:
                try:
                    length = int(self.headers.get("Content-Length", 0))
                    req = json.loads(self.rfile.read(length)) if length > 0 else None
                except (ValueError, json.JSONDecodeError) as exc:
                    raise BadRequest(f"the body is not JSON: {exc}") from exc
                prompt, n, s, seed, want_lp = parse_request(req, vocab_size=vocab_size, max_positions=max_positions)
            except BadRequest as exc:
                return self._error(400, str(exc), exc.param)
            asked = req.get("model") if isinstance(req, dict) else None
            if asked is not None and asked != model_name:  # as vLLM answers: a client must use the listed name
                return self._error(404, f"the model `{asked}` does not exist; GET /v1/models lists {model_name!r}",
                                   "model", kind="not_found")  # fmt: skip
            try:
                k_prompt = _prompt_logprobs_asked(req, vocab_size)  # req: a dict, parse_request checked
            except BadRequest as exc:
                return self._error(400, str(exc), exc.param)
            gen = torch.Generator().manual_seed(seed)
            try:
                with lock:
                    if draft is None:
                        r = target_only_generate(target, prompt, n, s, gen)
                    else:
                        r = speculative_generate(target, draft, prompt, n, s, gen, gamma=gamma)
                    lp, top = [], []
                    if want_lp:
                        rows = lm.sequence_probs(prompt, r.tokens, s)
                        lp = [float(torch.log(torch.tensor(rows[i, t]))) for i, t in enumerate(r.tokens)]
                        top = [{f"token_id:{int(row.argmax())}": float(np.log(row.max()))} for row in rows]
                    prompt_lp = None if k_prompt is None else _prompt_logprobs(lm, prompt, k_prompt)
            # a failed generation is a 500 with its reason, never a dropped connection
            except Exception as exc:  # noqa: BLE001
                return self._error(500, f"generation failed: {type(exc).__name__}: {exc}", kind="server_error")
            self._send(
                200,
                {
                    "id": f"cmpl-{time.time_ns()}",
                    "object": "text_completion",
                    "model": model_name,
                    "choices": [
                        {
                            "index": 0,
                            "prompt_logprobs": prompt_lp,
                            "text": " ".join(map(str, r.tokens)),
                            "finish_reason": "stop" if r.tokens and r.tokens[-1] in s.stop_token_ids else "length",
                            "logprobs": {
                                "tokens": [f"token_id:{t}" for t in r.tokens],
                                "token_logprobs": lp or None,
                                "top_logprobs": top or None,  # the most likely id per token (logprobs=1)
                            },
                        }
                    ],
                    "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(r.tokens)},
                },
            )

    return ThreadingHTTPServer((host, port), Handler)


def serve_forever(server: ThreadingHTTPServer) -> None:
    try:
        server.serve_forever()
    finally:
        server.server_close()
