"""``specverify serve``: an OpenAI-compatible completions endpoint over a local model.

Serves ``POST /v1/completions`` (token-id prompts; ``max_tokens``, ``temperature``, ``top_p``,
``top_k``, ``min_p``, ``repetition_penalty``, ``seed``, ``logprobs``) and ``GET /v1/models``,
with or without speculative decoding, from a seeded model built from a config or a local path.
Sampled tokens come back as ``"token_id:<id>"`` in ``choices[0].logprobs.tokens`` (vLLM's
``return_tokens_as_token_ids`` convention) with their log-probabilities under the processed
target distribution. Built on the standard library's threading HTTP server: no extra dependency.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from ..dists import SamplingSettings
from ..lm.transformers_lm import CausalLM
from .loops import speculative_generate, target_only_generate

__all__ = ["make_server", "serve_forever"]


def _settings(req: dict) -> SamplingSettings:
    return SamplingSettings(temperature=float(req.get("temperature", 1.0)), top_p=float(req.get("top_p", 1.0)),
                            top_k=int(req.get("top_k", 0) or 0), min_p=float(req.get("min_p", 0.0) or 0.0),
                            repetition_penalty=float(req.get("repetition_penalty", 1.0) or 1.0),
                            presence_penalty=float(req.get("presence_penalty", 0.0) or 0.0),
                            frequency_penalty=float(req.get("frequency_penalty", 0.0) or 0.0))


def make_server(target, draft=None, *, host="127.0.0.1", port=0, gamma=4, model_name="specverify-local"):
    """A ThreadingHTTPServer (not started). ``draft=None`` serves target-only decoding."""
    lock = threading.Lock()  # one generation at a time: the models are not re-entrant
    lm = CausalLM(target)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model_name, "object": "model", "speculative": draft is not None}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                prompt = req["prompt"]
                if not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
                    raise ValueError("prompt must be a non-empty list of token ids")
                n = int(req.get("max_tokens", 16))
                s = _settings(req)
            except (ValueError, KeyError, json.JSONDecodeError) as exc:
                return self._send(400, {"error": {"message": str(exc)}})
            gen = torch.Generator().manual_seed(int(req.get("seed", 0)))
            with lock:
                if draft is None:
                    r = target_only_generate(target, prompt, n, s, gen)
                else:
                    r = speculative_generate(target, draft, prompt, n, s, gen, gamma=gamma)
                lp = []
                if req.get("logprobs") is not None:
                    rows = lm.sequence_probs(prompt, r.tokens, s)
                    lp = [float(torch.log(torch.tensor(rows[i, t]))) for i, t in enumerate(r.tokens)]
            self._send(200, {"id": f"cmpl-{time.time_ns()}", "object": "text_completion", "model": model_name,
                             "choices": [{"index": 0, "text": " ".join(map(str, r.tokens)), "finish_reason": "length",
                                          "logprobs": {"tokens": [f"token_id:{t}" for t in r.tokens], "token_logprobs": lp or None}}],
                             "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(r.tokens)}})

    return ThreadingHTTPServer((host, port), Handler)


def serve_forever(server):
    try:
        server.serve_forever()
    finally:
        server.server_close()
