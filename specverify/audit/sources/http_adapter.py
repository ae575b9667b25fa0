"""Auditing an OpenAI-compatible completions endpoint.

``http_generator(url)`` returns ``generate(prompt, max_new_tokens, seed, settings) -> ids`` for
:func:`specverify.audit.sources.lm_audit.audit_lm` (one-sample, against the target's law computed from a
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
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Protocol, cast

import numpy as np
import numpy.typing as npt

from ...dists import SamplingSettings
from ...errors import ImplementationError, ImplementationTimeout, MalformedOutputError, UnsupportedSettingError
from ...stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, GofResult, Verdict, binned_homogeneity_test, holm

__all__ = ["http_generator", "two_sample_endpoints", "two_sample_verdict", "parse_completion_ids"]

#: a generator an endpoint is sampled through: generate(prompt, max_new_tokens, seed, settings) -> ids
EndpointGenerate = Callable[[Sequence[int], int, int, SamplingSettings], Sequence[int]]
#: one setting's two samples, ([n, length] tokens of the first endpoint, of the second), or
#: (name, error) of the first endpoint that failed
EndpointSamples = Sequence[npt.NDArray[Any]] | tuple[str, Exception]


class HttpGenerate(Protocol):
    """What :func:`http_generator` returns: ``generate(prompt, max_new_tokens, seed, settings) -> ids``
    with ``batch(prompts, max_new_tokens, seeds, settings) -> [ids]`` and ``batch_size``."""

    __name__: str
    batch: Callable[[Sequence[Sequence[int]], int, Sequence[int | None], SamplingSettings], list[list[int]]]
    batch_size: int

    def __call__(
        self, prompt: Sequence[int], max_new_tokens: int, seed: int | None, settings: SamplingSettings
    ) -> list[int]: ...


def _post(url: str, payload: dict[str, Any], timeout: float) -> bytes:
    data = json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body: bytes = r.read()
        return body


def _payload(
    model: str, prompt: Sequence[int], max_new_tokens: int, seed: int | None, settings: SamplingSettings, n: int = 1
) -> dict[str, Any]:
    """A /v1/completions body: token-id prompt, every sampling setting explicit, and the full length
    by ``ignore_eos`` (not ``min_tokens``, which bans the end-of-sequence token and so changes the
    law sampled from); a request with ``stop_token_ids`` ends at the first of them."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": [int(t) for t in prompt],
        "max_tokens": int(max_new_tokens),
        "ignore_eos": True,
        "n": int(n),
        "logprobs": 1,
        "temperature": float(settings.temperature),
        "top_p": float(settings.top_p),
        "top_k": int(settings.top_k),
        "min_p": float(settings.min_p),
        "repetition_penalty": float(settings.repetition_penalty),
        "presence_penalty": float(settings.presence_penalty),
        "frequency_penalty": float(settings.frequency_penalty),
        "return_tokens_as_token_ids": True,
    }
    if seed is not None:
        body["seed"] = int(seed)
    if settings.stop_token_ids:  # vLLM's and SGLang's field; ignore_eos leaves these stops in force
        body["stop_token_ids"] = list(settings.stop_token_ids)
    if settings.logit_bias:  # the OpenAI field: {"id": bias}
        body["logit_bias"] = {str(t): b for t, b in settings.logit_bias}
    return body


def _post_with_retries(url: str, payload: dict[str, Any], *, timeout: float, retries: int, backoff: float) -> bytes:
    """The raw body; timeouts and 5xx are retried with exponential backoff, 4xx are not (the
    request itself is wrong, or the setting is refused: an unsupported setting when it says so)."""
    for attempt in range(retries + 1):
        try:
            return _post(url, payload, timeout)
        except (TimeoutError, urllib.error.URLError) as exc:
            if isinstance(exc, urllib.error.HTTPError) and exc.code < 500:
                text = exc.read()[:300].decode(errors="replace")
                if "not yet supported" in text or "not supported" in text:
                    raise UnsupportedSettingError(f"{url} refused the setting: {text}") from exc
                raise ImplementationError(f"{url} answered HTTP {exc.code}: {text!r}") from exc
            if attempt == retries:
                if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
                    raise ImplementationTimeout(
                        f"{url} did not answer within {timeout:g} s ({retries + 1} attempts)"
                    ) from exc
                raise ImplementationError(f"{url} failed after {retries + 1} attempts: {exc}") from exc
            time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def parse_completion_ids(raw: bytes, url: str = "the endpoint") -> list[list[int]]:
    """Token ids of every choice, from ``choices[i].logprobs.tokens`` entries ``"token_id:<id>"``."""
    try:
        body = json.loads(raw)
        return [[int(str(t).split("token_id:")[1]) for t in c["logprobs"]["tokens"]] for c in body["choices"]]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise MalformedOutputError(
            f"{url} returned a response without choices[i].logprobs.tokens as 'token_id:<id>': {raw[:200]!r}; "
            "send return_tokens_as_token_ids (vLLM) or the same convention"
        ) from exc


def _choices(raw: bytes, url: str, n: int, *, with_logprobs: bool) -> list[Any]:
    """The ids of each of the ``n`` choices (with their token_logprobs when asked)."""
    ids: list[Any] = parse_completion_ids(raw, url)
    if with_logprobs:
        lps, tops = _token_logprobs(raw, url), _top_logprobs(raw)
        ids = [{"ids": i, "logprobs": lp, "top_logprobs": t} for i, lp, t in zip(ids, lps, tops, strict=False)]
    if len(ids) != n:
        raise MalformedOutputError(
            f"{url} returned {len(ids)} choices for n={n}; an OpenAI-compatible completions endpoint "
            "answers a request for n completions with n choices (check that the server honours n)"
        )
    return ids


def _token_logprobs(raw: bytes, url: str) -> list[list[float]]:
    """``choices[i].logprobs.token_logprobs`` of every choice (one float per sampled token)."""
    try:
        return [[float(x) for x in c["logprobs"]["token_logprobs"]] for c in json.loads(raw)["choices"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedOutputError(
            f"{url} returned no choices[i].logprobs.token_logprobs (one number per token): {raw[:200]!r}"
        ) from exc


def _top_logprobs(raw: bytes) -> list[list[dict[int, float]] | None]:
    """``choices[i].logprobs.top_logprobs`` ({"token_id:<id>": logprob} per token) as {id: logprob}
    per token, or None for a choice without them (a server may not send them)."""
    out: list[list[dict[int, float]] | None] = []
    for c in json.loads(raw)["choices"]:
        top = (c.get("logprobs") or {}).get("top_logprobs")
        if not top:
            out.append(None)
            continue
        try:
            out.append([{int(str(k).split("token_id:")[1]): float(v) for k, v in (row or {}).items()} for row in top])
        except (IndexError, TypeError, ValueError, AttributeError):
            out.append(None)  # keys that are not "token_id:<id>": nothing to check them against
    return out


def _groups(prompts: Sequence[Sequence[int]], seeds: Sequence[int | None], per_request: int) -> list[tuple[int, int]]:
    """Runs of one prompt, at most ``per_request`` long: one request with ``n`` completions each."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(prompts):
        j = i + 1
        while j < len(prompts) and j - i < per_request and list(prompts[j]) == list(prompts[i]):
            j += 1
        out.append((i, j))
        i = j
    return out


class _ServedModel:
    """The model name of an endpoint's requests, asked of ``/v1/models`` once, on first use."""

    def __init__(self, base_url: str, given: str | None, timeout: float) -> None:
        self.base_url, self.timeout, self._name = base_url, timeout, given
        self._lock = threading.Lock()

    def name(self) -> str:
        with self._lock:
            if self._name is None:
                self._name = _listed_model(self.base_url, self.timeout) or "default"
            return self._name


def _listed_model(base_url: str, timeout: float) -> str | None:
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=min(timeout, 10)) as r:
            return str(json.loads(r.read())["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):  # URLError and HTTPError are OSErrors
        return None


def http_generator(
    base_url: str,
    *,
    model: str | None = None,
    timeout: float = 30.0,
    retries: int = 2,
    backoff: float = 0.5,
    concurrency: int = 1,
    completions_per_request: int = 1,
    seeded: bool = True,
    on_response: Callable[[dict[str, Any], bytes], object] | None = None,
    temperature_last: bool = False,
    check_logprobs: Literal["processed", "raw"] | None = None,
    batch_invariant: bool = False,
) -> HttpGenerate:
    """``generate(prompt, n, seed, settings)`` over ``POST {base_url}/v1/completions``.

    ``generate.batch(prompts, n, seeds, settings)`` (used by :func:`audit_lm`) sends up to
    ``concurrency`` requests at once; consecutive equal prompts are merged into one request with
    ``n`` = up to ``completions_per_request`` completions (the seed of the run's first sequence).
    ``seeded=False`` (or ``seed=None``) sends no seed (the server's own generator); ``on_response(body, raw)`` sees
    every request and its raw answer (for logging or recording). ``temperature_last`` is the
    server's order: False for vLLM, SGLang and transformers-based servers, True for llama.cpp's
    (settings whose law depends on the order and that the server cannot follow are unsupported).
    ``check_logprobs`` ('processed' or 'raw', vLLM's ``logprobs_mode``) returns the token_logprobs beside
    the ids for the audit to check; ``batch_invariant=True`` declares a seeded request's tokens independent
    of its batch (the seed check compares it alone and among concurrent requests). ``model``: by default
    the first name ``GET /v1/models`` lists (vLLM answers any other with HTTP 404)."""
    url, served = base_url.rstrip("/") + "/v1/completions", _ServedModel(base_url, model, timeout)

    def one(
        prompt: Sequence[int], n_new: int, seed: int | None, settings: SamplingSettings, n: int = 1
    ) -> list[list[int]]:
        settings.require_conventions(who=url, temperature_last=temperature_last)
        body = _payload(served.name(), prompt, n_new, seed if seeded else None, settings, n)
        raw = _post_with_retries(url, body, timeout=timeout, retries=retries, backoff=backoff)
        if on_response is not None:
            on_response(body, raw)
        return _choices(raw, url, n, with_logprobs=check_logprobs is not None)

    def generate(prompt: Sequence[int], max_new_tokens: int, seed: int | None, settings: SamplingSettings) -> list[int]:
        return one(prompt, max_new_tokens, seed, settings)[0]

    def batch(
        prompts: Sequence[Sequence[int]], max_new_tokens: int, seeds: Sequence[int | None], settings: SamplingSettings
    ) -> list[list[int]]:
        groups = _groups(prompts, seeds, max(1, completions_per_request))
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futs = [pool.submit(one, prompts[i], max_new_tokens, seeds[i], settings, j - i) for i, j in groups]
            return [ids for f in futs for ids in f.result()]

    gen = cast(HttpGenerate, generate)  # a function with attributes: .batch, .batch_size, what it declares
    declared: dict[str, object] = {"batch_invariant": batch_invariant, "sends_seed": seeded, "seed_optional": True}
    declared.update({"logprobs_mode": check_logprobs} if check_logprobs else {})
    for k, v in declared.items():
        setattr(gen, k, v)
    gen.batch = batch
    gen.batch_size = max(1, concurrency) * max(1, completions_per_request)
    gen.__name__ = f"http:{base_url}"
    return gen


def _sample_both(
    endpoints: Sequence[tuple[EndpointGenerate, npt.NDArray[np.int64], str]],
    prompts: Sequence[Sequence[int]],
    length: int,
    settings: SamplingSettings,
) -> EndpointSamples:
    """[A, B]: [n, length] tokens from each (generator, seeds, name), prompts in rotation; or
    (name, error) of the first endpoint that failed."""
    out: list[npt.NDArray[Any]] = []
    for gen, seeds, name in endpoints:
        try:
            out.append(
                np.array(
                    [
                        list(gen(prompts[i % len(prompts)], length, int(sd), settings))[:length]
                        for i, sd in enumerate(seeds)
                    ]
                )
            )
        except ImplementationError as exc:
            return name, exc
    return out


def two_sample_endpoints(
    gen_spec: EndpointGenerate,
    gen_ref: EndpointGenerate,
    *,
    prompts: Sequence[Sequence[int]],
    settings: SamplingSettings | Sequence[SamplingSettings],
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

    Each endpoint answers ``n_sequences`` requests per setting (prompts in turn, fresh seeds); the
    samples are compared by :func:`two_sample_verdict`.
    """
    t0 = time.perf_counter()
    grid = tuple(settings) if isinstance(settings, (list, tuple)) else (cast(SamplingSettings, settings),)
    if not prompts or n_sequences < 1 or length < 1 or not grid:
        raise ValueError("need at least one prompt, one setting, n_sequences >= 1 and length >= 1")
    rng = np.random.default_rng(seed)
    samples: list[EndpointSamples] = []
    for s in grid:
        seeds = rng.integers(2**31, size=(2, n_sequences))
        samples.append(
            _sample_both(((gen_spec, seeds[0], names[0]), (gen_ref, seeds[1], names[1])), prompts, length, s)
        )
    prompt_index = np.arange(n_sequences) % len(prompts)
    v = two_sample_verdict(
        samples,
        settings=grid,
        prompt_index=prompt_index,
        n_prompts=len(prompts),
        vocab_size=vocab_size,
        alpha=alpha,
        beta=beta,
        eps=eps,
        seed=seed,
        n_bins=n_bins,
    )
    v.seconds = time.perf_counter() - t0
    return v


def _output_problem(
    label: str, A: npt.NDArray[Any], B: npt.NDArray[Any], n_sequences: int, length: int, vocab_size: int | None
) -> str | None:
    """A message when a sample is malformed (short, negative or out-of-vocabulary ids), else None."""
    if A.shape != (n_sequences, length) or B.shape != (n_sequences, length) or (A < 0).any() or (B < 0).any():
        return f"{label}: an endpoint returned fewer than {length} tokens or a negative id"
    if vocab_size and (A.max() >= vocab_size or B.max() >= vocab_size):
        return f"{label}: an endpoint returned id {int(max(A.max(), B.max()))} >= vocabulary size {vocab_size}"
    return None


# long: a 15-line docstring with the power formula, and the verdict's fields written out by name
def two_sample_verdict(
    samples: Sequence[EndpointSamples],
    *,
    settings: Sequence[SamplingSettings],
    prompt_index: npt.ArrayLike,
    n_prompts: int,
    vocab_size: int | None = None,
    alpha: float = 1e-6,
    beta: float = 1e-3,
    eps: float = 0.05,
    seed: int = 0,
    n_bins: int = 32,
    subject: str = "two-sample endpoints",
) -> Verdict:
    """Two samples per setting, ``samples[k] = (A, B)`` ([n, length] token arrays, row i drawn for
    prompt ``prompt_index[i]``) or ``(name, error)`` when one side failed.

    At every position the (prompt, token) pairs are compared on ``n_bins`` salted hash buckets
    (chi-square homogeneity), Holm across positions and settings at family-wise rate ``alpha``.
    The verdict states the eps this sample size detects with false-pass rate ``beta`` at the first
    Holm step: TV on the buckets >= sqrt(2 lambda* / n) / 2, lambda* the chi-square noncentrality
    for power 1 - beta (two arms of n each: lambda = (n / 2) w^2 >= 2 n TV^2). It is a PASS only
    when that eps is at most the requested ``eps``; otherwise INCONCLUSIVE, with the sequences
    per side that would reach ``eps``. ``vocab_size`` fixes the buckets in advance; without it the
    key space is taken from the largest id seen in either sample (a symmetric function of the
    pooled samples, so the test keeps its level).
    """
    from ...stats import noncentrality_for_power

    index = np.asarray(prompt_index)
    n_sequences = len(index)
    length = max((x[0].shape[1] for x in samples if isinstance(x[0], np.ndarray) and x[0].ndim == 2), default=1)
    lam = noncentrality_for_power(n_bins - 1, alpha / (len(settings) * length), beta)
    eps_reached = math.sqrt(2 * lam / n_sequences) / 2
    checks, evidence, res, labels = _two_sample_tests(
        samples, settings, index, n_prompts=n_prompts, length=length, vocab_size=vocab_size, n_bins=n_bins,
        seed=seed,
    )  # fmt: skip
    adj: list[float] = list(holm([r.pvalue for r in res])) if res else []
    for lab, r, a in zip(labels, res, adj, strict=False):
        checks.append(
            _two_sample_outcome(
                lab,
                r,
                float(a),
                alpha=alpha,
                eps=eps,
                eps_reached=eps_reached,
                lam=lam,
                n_sequences=n_sequences,
                n_bins=n_bins,
                evidence=evidence,
            )
        )
    from ..pipeline.conclude import make_verdict

    need = math.ceil(2 * lam / (4 * eps * eps))
    short = f"{n_sequences:,} sequences per endpoint detect TV >= {eps_reached:.4g}; about {need:,} would reach {eps:g}"
    return make_verdict(
        checks,
        evidence,
        alpha=alpha,
        beta=beta,
        eps=eps,
        seed=seed,
        needed={
            "sequences_per_endpoint": need,
            "collected": n_sequences,
            "statement": f"{short}: run with --rounds {need}",
            "statement_python": f"{short}: run with n_sequences={need}",
        },
        samples=2 * n_sequences * length * len(settings),
        seconds=0.0,
        subject=subject,
    )


def _two_sample_tests(
    samples: Sequence[EndpointSamples],
    settings: Sequence[SamplingSettings],
    prompt_index: npt.NDArray[Any],
    *,
    n_prompts: int,
    length: int,
    vocab_size: int | None,
    n_bins: int,
    seed: int,
) -> tuple[list[CheckOutcome], list[str], list[GofResult], list[str]]:
    """(exact failures, their evidence, the per-position homogeneity tests, their labels)."""
    checks: list[CheckOutcome] = []
    evidence: list[str] = []
    res: list[GofResult] = []
    labels: list[str] = []
    for k, (s, pair) in enumerate(zip(settings, samples, strict=True)):
        label = f"settings[{k}] {s.short()}"
        if isinstance(pair, tuple) and isinstance(pair[1], Exception):
            checks.append(CheckOutcome(name=f"{label}: {pair[0]}", status=FAIL, kind="exact", summary=str(pair[1])))
            evidence.append(f"{label}: {pair[0]}: {pair[1]}")
            continue
        A, B = (np.asarray(x) for x in pair)
        problem = _output_problem(label, A, B, len(prompt_index), length, vocab_size)
        if problem:
            checks.append(CheckOutcome(name=f"{label}: output", status=FAIL, kind="exact", summary=problem))
            evidence.append(problem)
            continue
        v = vocab_size or int(max(A.max(), B.max())) + 1
        for j in range(length):  # each token keyed with its prompt: prompts are not pooled into one law
            res.append(
                binned_homogeneity_test(prompt_index * v + A[:, j], prompt_index * v + B[:, j],
                                        vocab_size=n_prompts * v, n_bins=n_bins, salt=seed * 1000 + k * 100 + j)
            )  # fmt: skip
            labels.append(f"{label}, position {j}")
    return checks, evidence, res, labels


def _two_sample_outcome(
    lab: str,
    r: GofResult,
    adjusted: float,
    *,
    alpha: float,
    eps: float,
    eps_reached: float,
    lam: float,
    n_sequences: int,
    n_bins: int,
    evidence: list[str],
) -> CheckOutcome:
    if adjusted <= alpha:
        msg = f"{lab}: {r.test} p={r.pvalue:.3g} (Holm-adjusted {adjusted:.3g}); {r}"
        evidence.append(msg)
        return CheckOutcome(
            name=lab, status=FAIL, kind="statistical", summary=msg, pvalue=adjusted, eps=eps_reached, n=2 * n_sequences
        )
    if eps_reached <= eps:
        return CheckOutcome(
            name=lab,
            status=PASS,
            kind="statistical",
            pvalue=adjusted,
            eps=eps_reached,
            n=2 * n_sequences,
            summary=f"no deviation of TV >= {eps_reached:.4f} on {n_bins} hash buckets of (prompt, token) "
            f"({n_sequences:,} sequences per side)",
        )
    reach = (
        f"they detect only TV >= {eps_reached:.4f}"
        if eps_reached < 1
        else "too few to detect any deviation (the detectable TV bound exceeds 1)"
    )
    return CheckOutcome(
        name=lab,
        status=INCONCLUSIVE,
        kind="statistical",
        pvalue=adjusted,
        eps=eps_reached,
        n=2 * n_sequences,
        summary=f"no deviation found in {n_sequences:,} sequences per side, but {reach}; "
        f"requested {eps:g} needs {math.ceil(2 * lam / (4 * eps * eps)):,}",
    )
