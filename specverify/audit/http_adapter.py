"""Auditing an OpenAI-compatible completions endpoint.

``http_generator(url)`` returns ``generate(prompt, max_new_tokens, seed, settings) -> ids`` for
:func:`specverify.audit.lm_audit.audit_lm` (one-sample, against the target's law computed from a
local copy of the target), and :func:`two_sample_endpoints` compares a speculative endpoint with
a non-speculative one when the target is not available locally (per-position two-sample tests on
salted hash buckets, Holm across positions).

Token ids are read from ``choices[0].logprobs.tokens`` entries ``"token_id:<id>"`` (vLLM's
``return_tokens_as_token_ids``). Timeouts are retried with backoff; a request that still times
out, an HTTP error, or a response without the expected fields becomes a finding, never a crash.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request

import numpy as np

from ..errors import ImplementationError, ImplementationTimeout, MalformedOutputError
from ..stats import FAIL, PASS, CheckOutcome, Verdict, binned_homogeneity_test, holm

__all__ = ["http_generator", "two_sample_endpoints"]


def _post(url, payload, timeout):
    data = json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def http_generator(base_url: str, *, model: str = "default", timeout: float = 30.0, retries: int = 2, backoff: float = 0.5):
    url = base_url.rstrip("/") + "/v1/completions"

    def generate(prompt, max_new_tokens, seed, settings):
        payload = {"model": model, "prompt": list(prompt), "max_tokens": max_new_tokens, "seed": int(seed), "logprobs": 1,
                   "temperature": settings.temperature, "top_p": settings.top_p, "top_k": settings.top_k, "min_p": settings.min_p,
                   "repetition_penalty": settings.repetition_penalty, "return_tokens_as_token_ids": True}
        last = None
        for attempt in range(retries + 1):
            try:
                raw = _post(url, payload, timeout)
                break
            except (TimeoutError, urllib.error.URLError) as exc:
                is_timeout = isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)
                if isinstance(exc, urllib.error.HTTPError) and exc.code < 500:
                    raise ImplementationError(f"{url} answered HTTP {exc.code}: {exc.read()[:200]!r}") from exc
                last = exc
                if attempt == retries:
                    if is_timeout:
                        raise ImplementationTimeout(f"{url} did not answer within {timeout:g} s ({retries + 1} attempts)") from exc
                    raise ImplementationError(f"{url} failed after {retries + 1} attempts: {exc}") from exc
                time.sleep(backoff * 2**attempt)
        try:
            body = json.loads(raw)
            toks = body["choices"][0]["logprobs"]["tokens"]
            return [int(str(t).split("token_id:")[1]) for t in toks]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise MalformedOutputError(f"{url} returned a response without choices[0].logprobs.tokens as 'token_id:<id>': "
                                       f"{raw[:200]!r}") from exc

    generate.__name__ = f"http:{base_url}"
    return generate


def two_sample_endpoints(gen_spec, gen_ref, *, prompts, settings, vocab_size: int, n_sequences: int = 400, length: int = 4,
                         alpha: float = 1e-6, seed: int = 0, n_bins: int = 32) -> Verdict:
    """Speculative endpoint against a non-speculative one, position by position (Holm)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    A = np.array([gen_spec(prompts[i % len(prompts)], length, int(rng.integers(2**31)), settings) for i in range(n_sequences)])
    B = np.array([gen_ref(prompts[i % len(prompts)], length, int(rng.integers(2**31)), settings) for i in range(n_sequences)])
    # Pair each prompt's tokens with (prompt, position) so that different prompts are not pooled.
    res = []
    for j in range(length):
        key_a = (np.arange(n_sequences) % len(prompts)) * vocab_size + A[:, j]
        key_b = (np.arange(n_sequences) % len(prompts)) * vocab_size + B[:, j]
        res.append(binned_homogeneity_test(key_a, key_b, vocab_size=len(prompts) * vocab_size, n_bins=n_bins, salt=seed + j))
    adj = holm([r.pvalue for r in res])
    checks = [CheckOutcome(f"position {j}", FAIL if a <= alpha else PASS, "statistical", str(r), float(a), None, 2 * n_sequences)
              for j, (r, a) in enumerate(zip(res, adj))]
    failed = [c for c in checks if c.status == FAIL]
    # Two-sample power on B hash cells: each arm n, lambda = n w^2 / 2, w >= 2 TV.
    from ..stats import noncentrality_for_power

    eps = math.sqrt(2 * noncentrality_for_power(n_bins - 1, alpha / length, 1e-3) / n_sequences) / 2
    return Verdict(FAIL if failed else PASS, alpha, 1e-3, eps, None, seed, checks, [c.summary for c in failed], None,
                   2 * n_sequences * length, time.perf_counter() - t0, "two-sample endpoints")
