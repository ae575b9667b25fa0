"""The target's law as a non-speculative endpoint of the same model reports it.

A speculative deployment too large to load beside the auditor (a 70B model on a GPU server) is
audited one-sample against the law its own non-speculative twin reports: for each sampled request
(prompt + continuation) one ``POST /v1/completions`` to the reference with the whole sequence as the
prompt and ``prompt_logprobs = K`` (vLLM's field; -1: every token, which vLLM allows when started
with ``--max-logprobs -1``) returns, at each position, the raw log-probabilities of the top-K
tokens and of the token that was there. The auditor applies the request's settings to them
(:mod:`specverify.dists._reported`): with the whole vocabulary the law is exact up to the
reference's logit precision; with K < V the unreported tokens are bounded, tokens the bounds
cannot place are left out of the stream test and counted against the most mass the bounds allow,
so a correct engine never FAILs for want of a tail. The reference's own precision, and the
difference between its logits and the speculative engine's target (another batch shape, another
kernel), is the logit tolerance ``logit_tol``: the verdict holds for an engine within it.

``ReportedLaw`` offers the auditor methods the LM audit calls on a local float64 model
(:class:`~specverify.lm.transformers_lm.CausalLM`): ``vocab_size``, ``batch_sequence_boundaries``
and ``batch_sequence_probs``, plus ``refuses`` (a setting log-probabilities cannot express:
UNSUPPORTED, never FAIL) and ``greedy`` (the reference's own greedy output).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ...dists import (
    GREEDY,
    FilterBoundary,
    SamplingSettings,
    filter_boundaries,
    process_logits,
    running_counts,
    softmax,
)
from ...dists._reported import ReportedRow, reported_boundary, reported_law_refuses
from ...errors import ImplementationError, MalformedOutputError, SpecVerifyError, UnsupportedSettingError
from .http_adapter import _payload, _post_with_retries, _ServedModel, parse_completion_ids

__all__ = ["ReportedLaw", "probe_vocab"]


class ReportedLaw:
    """The target's law read from ``base_url``'s ``prompt_logprobs`` (module docstring).

    ``top_logprobs``: K tokens per position (-1: the whole vocabulary); ``vocab_size``: the
    served model's; ``concurrency``: requests in flight at once."""

    def __init__(
        self, base_url: str, *, vocab_size: int, top_logprobs: int = -1, timeout: float = 120.0, retries: int = 2,
        concurrency: int = 4, model: str | None = None,
    ) -> None:  # fmt: skip
        if top_logprobs == 0 or top_logprobs < -1:
            raise ValueError(f"top_logprobs={top_logprobs}: pass K >= 1 tokens per position, or -1 for all")
        self.base_url, self.vocab_size = base_url.rstrip("/"), int(vocab_size)
        self.top = self.vocab_size if top_logprobs == -1 else min(int(top_logprobs), self.vocab_size)
        self.asked = top_logprobs
        self.timeout, self.retries, self.concurrency = timeout, retries, concurrency
        self._served = _ServedModel(self.base_url, model, timeout)

    @property
    def complete(self) -> bool:
        """Whether every token's log-probability is reported (the law is then exact)."""
        return self.top >= self.vocab_size

    @property
    def identity(self) -> str:
        return f"{self.base_url} ({self._served.name()}), top {self.top} of {self.vocab_size}"

    def refuses(self, s: SamplingSettings) -> str | None:
        """Why the law of ``s`` cannot be computed from what this reference reports, or None."""
        why = reported_law_refuses(s, complete=self.complete)
        return None if why is None else f"the reference endpoint's log-probabilities cannot give this law: {why}"

    # -- fetching ---------------------------------------------------------------------------------

    def rows(self, prompts: Sequence[Sequence[int]], seqs: Sequence[Sequence[int]]) -> list[list[ReportedRow]]:
        """Per sequence, the reported row of each continuation position (one request per distinct
        sequence; nothing is kept after: a long audit's rows would fill the memory)."""
        keys = [tuple(int(t) for t in p) + tuple(int(t) for t in q) for p, q in zip(prompts, seqs, strict=True)]
        todo = sorted(set(keys))
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            got = dict(zip(todo, pool.map(self._fetch, todo), strict=True))
        return [got[k][len(p) :] for k, p in zip(keys, prompts, strict=True)]  # type: ignore[misc]

    def _fetch(self, ids: tuple[int, ...]) -> list[ReportedRow | None]:
        """[None] + the rows of positions 1 .. len(ids) - 1 of ``ids`` (position 0 has no law)."""
        body = _payload(self._served.name(), ids, 1, 0, GREEDY)
        body.update(prompt_logprobs=self.asked, logprobs=None, ignore_eos=False)
        raw = self._post(body)
        entries = _prompt_logprobs(raw, self.base_url, len(ids))
        rows = [ReportedRow.from_mapping(e, self.top) for e in entries[1:]]
        return [None, *rows]

    # -- the auditor's methods ----------------------------------------------------------------------

    def batch_sequence_boundaries(
        self, prompts: list[list[int]], seqs: list[list[int]], settings: SamplingSettings, *, tol: float
    ) -> list[tuple[np.ndarray, FilterBoundary]]:
        """Per sequence: (laws [m, V], their :class:`FilterBoundary`), as the local auditor's."""
        return [
            self._boundaries(rows, list(q), settings, tol)
            for q, rows in zip(seqs, self.rows(prompts, seqs), strict=True)
        ]

    def _boundaries(
        self, rows: list[ReportedRow], seq: list[int], s: SamplingSettings, tol: float
    ) -> tuple[np.ndarray, FilterBoundary]:
        """One sequence's laws [m, V] and boundary sets: every position in one pipeline call when
        the whole vocabulary is reported, else position by position (the tail's bounds)."""
        v, m = self.vocab_size, len(seq)
        # generated tokens before each position (presence and frequency penalties)
        gen = running_counts(seq, v, window=s.penalty_window)[:m] if m else np.zeros((0, v))
        if self.complete:
            x = np.full((m, v), -1e4)  # vLLM reports -9999 for -inf
            for t, row in enumerate(rows):
                x[t, row.ids] = np.maximum(row.lps, -1e4)
            probs = softmax(process_logits(x, s, seen_counts=gen, output_counts=gen))
            return probs, filter_boundaries(x, s, tol=tol, seen_counts=gen, output_counts=gen)
        parts = [reported_boundary(row, v, s, tol=tol, output_counts=gen[t]) for t, row in enumerate(rows)]
        return np.concatenate([p for p, _ in parts]).reshape(m, v), FilterBoundary(
            sure=np.concatenate([b.sure for _, b in parts]).reshape(m, v),
            possible=np.concatenate([b.possible for _, b in parts]).reshape(m, v),
            ambiguous_bound=np.concatenate([b.ambiguous_bound for _, b in parts]),
        )

    def batch_sequence_probs(
        self, prompts: list[list[int]], seqs: list[list[int]], settings: SamplingSettings | None = None
    ) -> list[np.ndarray]:
        """Per sequence [m, V]: the law where the whole vocabulary is reported; otherwise an upper
        bound on each token's probability (1 for a token the bounds cannot place), which is what
        the seed check needs (a repeat is a finding only when its probability is small)."""
        s = settings or SamplingSettings()
        out = []
        for probs, b in self.batch_sequence_boundaries(prompts, seqs, s, tol=0.0):
            if self.complete:
                out.append(probs)
                continue
            kept = np.where(b.sure, probs, 0.0)
            upper = kept / np.maximum(kept.sum(-1, keepdims=True), 1e-300)
            out.append(np.where(b.possible & ~b.sure, 1.0, upper))
        return out

    def greedy(self, prompt: Sequence[int], n: int) -> list[int]:
        """The reference's own greedy continuation of ``prompt`` (``n`` tokens)."""
        raw = self._post(_payload(self._served.name(), prompt, n, 0, GREEDY))
        try:
            return parse_completion_ids(raw, self.base_url)[0]
        except MalformedOutputError as exc:
            raise SpecVerifyError(f"the reference endpoint failed: {exc}") from exc

    def _post(self, body: dict[str, Any]) -> bytes:
        """The reference's answer; its failure stops the audit (it is not the audited engine's)."""
        try:
            return _post_with_retries(
                self.base_url + "/v1/completions", body, timeout=self.timeout, retries=self.retries, backoff=0.5
            )
        except (ImplementationError, UnsupportedSettingError) as exc:
            raise SpecVerifyError(f"the reference endpoint failed: {exc}") from exc

    def top_two_margin(self, prefix: Sequence[int]) -> float:
        """The reference's raw log-probability margin between its two most likely next tokens
        after ``prefix`` (with K = 1 the second is unreported: at most the cap, the first itself)."""
        row = self.rows([list(prefix)], [[0]])[0][0]  # the row of position len(prefix), whatever follows
        top = np.sort(row.lps)[::-1]
        return float(top[0] - (top[1] if self.top >= 2 else row.cap))


def probe_vocab(base_url: str, *, timeout: float = 60.0, model: str | None = None) -> int | None:
    """The vocabulary a reference serves, counted from ``prompt_logprobs = -1`` on a two-token prompt
    (vLLM's ``/v1/models`` does not say it); None when the reference refuses every token."""
    body = _payload(_ServedModel(base_url.rstrip("/"), model, timeout).name(), [0, 0], 1, 0, GREEDY)
    body.update(prompt_logprobs=-1, logprobs=None)
    try:
        raw = _post_with_retries(
            base_url.rstrip("/") + "/v1/completions", body, timeout=timeout, retries=1, backoff=0.5
        )
        return len(_prompt_logprobs(raw, base_url, 2)[1])
    except SpecVerifyError:
        return None


def _prompt_logprobs(raw: bytes, url: str, n: int) -> list[dict[int, float]]:
    """``choices[0].prompt_logprobs`` as [{}] + one {id: logprob} per position 1 .. n - 1."""
    try:
        entries = json.loads(raw)["choices"][0]["prompt_logprobs"]
        out: list[dict[int, float]] = [{}]
        for e in entries[1:n]:
            out.append({int(k): float(v["logprob"] if isinstance(v, dict) else v) for k, v in e.items()})
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise SpecVerifyError(
            f"{url} returned no usable choices[0].prompt_logprobs ({raw[:200]!r}); the reference must support "
            "vLLM's prompt_logprobs (start vLLM with --max-logprobs -1 for every token)"
        ) from exc
    if len(out) != n:
        raise SpecVerifyError(f"{url} returned prompt_logprobs for {len(out)} of {n} positions")
    return out
