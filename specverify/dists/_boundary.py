"""Which tokens a filter keeps when the logits are known only to within a tolerance.

An engine computes its logits in float32, float16 or bfloat16, the auditor in float64; they differ
by a small ``tol`` (measured: 1e-5 for vLLM in float32, 5e-3 for llama.cpp with an f16 KV cache).
Top-k, top-p and min-p cut the sorted distribution at a boundary, and a token within ``tol`` of
that boundary may be kept by the engine and dropped by the float64 pipeline, or the reverse. For
an engine whose logits are within ``tol`` of the auditor's:

* ``sure``: kept under every such perturbation; ``possible``: kept under some. The engine keeps a
  set S with sure <= S <= possible (every filter keeps a prefix of the order by logit);
* given that the engine emits a token of ``sure``, its law is the auditor's law restricted to
  ``sure`` and renormalised, up to the tolerance itself (whatever S is: restriction commutes with
  renormalisation), so tokens in ``sure`` can be tested exactly;
* ``ambiguous_bound`` bounds the probability that the engine emits a token of
  ``possible - sure``: W_A e^e / (W_sure e^-e + W_A e^e), with W the softmax weights of the
  sampled logits and e the tolerance in that space.

The cut is found per row by bisection on rank under the extreme perturbations of the token at
rank r: the one most favourable to keeping it lowers every token above it by ``d`` and raises it
and every token below by ``d`` (top-k: it passes the tokens above; top-p: the mass above it
shrinks; min-p: it gains on the maximum); the least favourable lowers it, raises every token above
it and every token that can pass it (within 2d below), and lowers the rest. ``d`` is ``tol`` in
the space the filters see: divided by the temperature when it comes first, and multiplied by the
repetition penalty's factor (which scales logits by up to max(r, 1/r)).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from ._processing import _apply_penalties, process_logits
from ._settings import SamplingSettings
from ._validate import validate_logits

__all__ = ["FilterBoundary", "filter_boundaries"]


@dataclasses.dataclass(frozen=True)
class FilterBoundary:
    """Per row [N, V]: tokens kept under every (``sure``) and under some (``possible``) perturbation
    of the logits within the tolerance, and [N] the bound on the engine's mass on the difference."""

    sure: np.ndarray
    possible: np.ndarray
    ambiguous_bound: np.ndarray

    @property
    def ambiguous(self) -> np.ndarray:
        """[N, V]: tokens whose inclusion depends on the perturbation."""
        out: np.ndarray = self.possible & ~self.sure
        return out


def _filters_only(s: SamplingSettings) -> SamplingSettings:
    return SamplingSettings(top_k=s.top_k, top_p=s.top_p, min_p=s.min_p, min_tokens_to_keep=s.min_tokens_to_keep)


def _has_filter(s: SamplingSettings, v: int) -> bool:
    return (0 < s.top_k < v) or s.top_p < 1.0 or s.min_p > 0.0


def _cut(zs: np.ndarray, filt: SamplingSettings, d: float, favourable: bool) -> np.ndarray:
    """[N]: how many leading ranks of the sorted rows ``zs`` are kept under their own extreme
    perturbation (module docstring)."""
    n, v = zs.shape
    ranks = np.arange(v)[None, :]
    rows = np.arange(n)
    lo = np.zeros(n, dtype=np.int64)  # rank 0 is always kept (min_tokens_to_keep >= 1)
    hi = np.full(n, v, dtype=np.int64)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        if favourable:  # those above it down, it and those below up
            shift = np.where(ranks < mid[:, None], -d, d)
        else:  # it down, those above it and those that can pass it up, the rest down
            passes = zs > zs[rows, mid][:, None] - 2 * d
            shift = np.where(passes & (ranks != mid[:, None]), d, -d)
        kept = np.isfinite(process_logits(zs + shift, filt)[rows, mid])
        lo = np.where(kept, mid, lo)
        hi = np.where(kept, hi, mid)
    return lo + 1


def filter_boundaries(
    logits: ArrayLike,
    settings: SamplingSettings,
    *,
    tol: float,
    seen_counts: ArrayLike | None = None,
    output_counts: ArrayLike | None = None,
) -> FilterBoundary:
    """The boundary sets of ``logits`` [N, V] under ``settings`` for a logit tolerance ``tol``
    (module docstring); the counts are those of :func:`process_logits`, per row."""
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol={tol!r}: a bound on |engine logit - float64 logit|, finite and >= 0")
    x = _apply_penalties(validate_logits(logits), settings, seen_counts, output_counts)
    nominal = np.isfinite(process_logits(logits, settings, seen_counts=seen_counts, output_counts=output_counts))
    n, v = x.shape
    if settings.is_greedy or tol == 0 or not _has_filter(settings, v):
        return FilterBoundary(sure=nominal, possible=nominal, ambiguous_bound=np.zeros(n))
    r = settings.repetition_penalty
    scale = max(r, 1.0 / r) if settings.uses_history else 1.0
    t = settings.temperature
    z = x if settings.temperature_last else x / t
    d = tol * scale / (1.0 if settings.temperature_last else t)
    order = np.argsort(-z, axis=-1, kind="stable")
    zs = np.take_along_axis(z, order, axis=-1)
    filt = _filters_only(settings)
    sure_sorted = np.arange(v)[None, :] < _cut(zs, filt, d, favourable=False)[:, None]
    possible_sorted = np.arange(v)[None, :] < _cut(zs, filt, d, favourable=True)[:, None]
    sure, possible = np.empty_like(sure_sorted), np.empty_like(possible_sorted)
    np.put_along_axis(sure, order, sure_sorted, axis=-1)
    np.put_along_axis(possible, order, possible_sorted, axis=-1)
    sure, possible = sure & nominal, possible | nominal  # bisection assumes monotone cuts; keep the order
    w = np.exp(x / t - (x / t).max(axis=-1, keepdims=True))  # weights of the sampled logits
    e = tol * scale / t
    w_sure = np.where(sure, w, 0.0).sum(-1) * np.exp(-e)
    w_amb = np.where(possible & ~sure, w, 0.0).sum(-1) * np.exp(e)
    return FilterBoundary(sure=sure, possible=possible, ambiguous_bound=w_amb / (w_sure + w_amb))
