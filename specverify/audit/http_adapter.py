"""Auditing an OpenAI-compatible completions endpoint.

``http_generator(url)`` returns ``generate(prompt, max_new_tokens, seed, settings) -> ids`` for
:func:`specverify.audit.lm_audit.audit_lm` (one-sample, against the target's law computed from a
local copy of the target), and :func:`two_sample_endpoints` compares a speculative endpoint with
a non-speculative one when the target is not available locally (per-position two-sample tests on
salted hash buckets, Holm across positions and settings; it states the eps its sample size detects
and is INCONCLUSIVE when that is above the requested eps).

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


def http_generator(
    base_url: str, *, model: str = "default", timeout: float = 30.0, retries: int = 2, backoff: float = 0.5
):
    url = base_url.rstrip("/") + "/v1/completions"

    def generate(prompt, max_new_tokens, seed, settings):
        payload = {
            "model": model,
            "prompt": list(prompt),
            "max_tokens": max_new_tokens,
            "seed": int(seed),
            "logprobs": 1,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "top_k": settings.top_k,
            "min_p": settings.min_p,
            "repetition_penalty": settings.repetition_penalty,
            "return_tokens_as_token_ids": True,
        }
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
                        raise ImplementationTimeout(
                            f"{url} did not answer within {timeout:g} s ({retries + 1} attempts)"
                        ) from exc
                    raise ImplementationError(f"{url} failed after {retries + 1} attempts: {exc}") from exc
                time.sleep(backoff * 2**attempt)
        try:
            body = json.loads(raw)
            toks = body["choices"][0]["logprobs"]["tokens"]
            return [int(str(t).split("token_id:")[1]) for t in toks]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise MalformedOutputError(
                f"{url} returned a response without choices[0].logprobs.tokens as 'token_id:<id>': {raw[:200]!r}"
            ) from exc

    generate.__name__ = f"http:{base_url}"
    return generate


def _sample_both(endpoints, prompts, length, settings):
    """[A, B]: [n, length] tokens from each (generator, seeds, name), prompts in rotation; or
    (name, error) of the first endpoint that failed."""
    out = []
    for gen, seeds, name in endpoints:
        try:
            out.append(
                np.array(
                    [
                        list(gen(prompts[i % len(prompts)], length, int(seed), settings))[:length]
                        for i, seed in enumerate(seeds)
                    ]
                )
            )
        except ImplementationError as exc:
            return name, exc
    return out


def two_sample_endpoints(
    gen_spec,
    gen_ref,
    *,
    prompts,
    settings,
    vocab_size: int | None = None,
    n_sequences: int = 400,
    length: int = 4,
    alpha: float = 1e-6,
    beta: float = 1e-3,
    eps: float = 0.05,
    seed: int = 0,
    n_bins: int = 32,
    names: tuple[str, str] = ("speculative endpoint", "baseline endpoint"),
) -> Verdict:
    """A speculative endpoint against a non-speculative one, when the target is not available locally.

    Each endpoint answers ``n_sequences`` requests per setting (prompts in turn, fresh seeds); at
    every position the (prompt, token) pairs of the two are compared on ``n_bins`` salted hash
    buckets (chi-square homogeneity), Holm across positions and settings at family-wise rate
    ``alpha``. The verdict states the eps this sample size detects with false-pass rate ``beta``
    at the first Holm step: TV on the buckets >= sqrt(2 lambda* / n) / 2, lambda* the chi-square
    noncentrality for power 1 - beta (two arms of n each: lambda = (n / 2) w^2 >= 2 n TV^2). It is
    a PASS only when that eps is at most the requested ``eps``; otherwise
    INCONCLUSIVE, with the sequences per endpoint that would reach ``eps``.

    ``vocab_size`` (the endpoints' vocabulary) fixes the buckets in advance; without it the key
    space is taken from the largest id seen in either sample (a symmetric function of the pooled
    samples, so the test keeps its level).
    """
    from ..stats import INCONCLUSIVE, noncentrality_for_power
    from .conclude import decide

    t0 = time.perf_counter()
    settings = tuple(settings) if isinstance(settings, (list, tuple)) else (settings,)
    if not prompts or n_sequences < 1 or length < 1 or not settings:
        raise ValueError("need at least one prompt, one setting, n_sequences >= 1 and length >= 1")
    rng = np.random.default_rng(seed)
    m = len(settings) * length  # tests in the Holm family
    lam = noncentrality_for_power(n_bins - 1, alpha / m, beta)
    eps_reached = math.sqrt(2 * lam / n_sequences) / 2
    need = math.ceil(2 * lam / (4 * eps * eps))
    checks, evidence, res, labels = [], [], [], []
    pidx = np.arange(n_sequences) % len(prompts)
    for k, s in enumerate(settings):
        label = f"settings[{k}] {s.short()}"
        seeds = rng.integers(2**31, size=(2, n_sequences))
        samples = _sample_both(((gen_spec, seeds[0], names[0]), (gen_ref, seeds[1], names[1])), prompts, length, s)
        if isinstance(samples, tuple) and isinstance(samples[1], ImplementationError):
            name, exc = samples
            checks.append(CheckOutcome(f"{label}: {name}", FAIL, "exact", str(exc)))
            evidence.append(f"{label}: {name}: {exc}")
            continue
        A, B = samples
        if A.shape != (n_sequences, length) or B.shape != (n_sequences, length) or (A < 0).any() or (B < 0).any():
            msg = f"{label}: an endpoint returned fewer than {length} tokens or a negative id"
            checks.append(CheckOutcome(f"{label}: output", FAIL, "exact", msg))
            evidence.append(msg)
            continue
        v = vocab_size or int(max(A.max(), B.max())) + 1
        if vocab_size and (A.max() >= v or B.max() >= v):
            msg = f"{label}: an endpoint returned id {int(max(A.max(), B.max()))} >= vocabulary size {v}"
            checks.append(CheckOutcome(f"{label}: output", FAIL, "exact", msg))
            evidence.append(msg)
            continue
        # Key each token with its prompt, so that different prompts are not pooled into one law.
        for j in range(length):
            r = binned_homogeneity_test(
                pidx * v + A[:, j],
                pidx * v + B[:, j],
                vocab_size=len(prompts) * v,
                n_bins=n_bins,
                salt=seed * 1000 + k * 100 + j,
            )
            res.append(r)
            labels.append(f"{label}, position {j}")
    adj = holm([r.pvalue for r in res]) if res else []
    enough = eps_reached <= eps
    for lab, r, a in zip(labels, res, adj):
        if a <= alpha:
            msg = f"{lab}: {r.test} p={r.pvalue:.3g} (Holm-adjusted {a:.3g}); {r}"
            checks.append(CheckOutcome(lab, FAIL, "statistical", msg, float(a), eps_reached, 2 * n_sequences))
            evidence.append(msg)
        elif enough:
            checks.append(
                CheckOutcome(
                    lab,
                    PASS,
                    "statistical",
                    f"no deviation of TV >= {eps_reached:.4f} on {n_bins} hash buckets of (prompt, token) "
                    f"({n_sequences:,} sequences per endpoint)",
                    float(a),
                    eps_reached,
                    2 * n_sequences,
                )
            )
        else:
            reach = (
                f"they detect only TV >= {eps_reached:.4f}"
                if eps_reached < 1
                else "too few to detect any deviation (the detectable TV bound exceeds 1)"
            )
            checks.append(
                CheckOutcome(
                    lab,
                    INCONCLUSIVE,
                    "statistical",
                    f"no deviation found in {n_sequences:,} sequences per endpoint, but {reach}; "
                    f"requested {eps:g} needs {need:,}",
                    float(a),
                    eps_reached,
                    2 * n_sequences,
                )
            )
    status = decide(checks)
    needed = {"sequences_per_endpoint": need, "collected": n_sequences} if status == INCONCLUSIVE else None
    return Verdict(
        status,
        alpha,
        beta,
        eps_reached,
        eps,
        seed,
        checks,
        evidence,
        needed,
        2 * n_sequences * length * len(settings),
        time.perf_counter() - t0,
        "two-sample endpoints",
    )
