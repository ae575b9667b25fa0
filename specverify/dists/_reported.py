"""The law of a request's settings when the target's raw distribution is known only in part.

A non-speculative endpoint of the same model reports, at each position of a sampled continuation,
the raw log-probabilities ``a`` of its top-K tokens (vLLM's ``prompt_logprobs``), not the whole
distribution. The auditor applies the request's settings itself. With ``K = V`` this is the
ordinary pipeline on ``a`` (log-probabilities are logits up to a constant, which no setting here
sees). With ``K < V`` the unknown tokens, the *tail*, are bounded, not known:

* each has raw log-probability at most ``cap``, the smallest reported top-K value, and together
  they hold raw mass ``R = 1 - sum(exp(a))``; ``n = V - K`` of them;
* their mass in the sampled law, in the scale where a known token weighs ``exp(a / T)``, is at
  most ``H = R exp(cap (1/T - 1))`` for ``T <= 1`` (``x^(1/T)`` is at most ``x exp(cap (1/T - 1))``
  for ``x <= exp(cap)``) and ``H = n^(1 - 1/T) R^(1/T)`` for ``T > 1`` (concave: an even spread is
  the maximum);
* penalties (presence, frequency, both >= 0) only lower a tail token, so the bounds hold.

Every decision is then taken under the worst case for it, with the known values also within
``tol`` of the engine's: a known token is ``sure`` when every filter keeps it with the tail placed
to cut it (as many tail tokens as the mass allows just above it for top-k, all the tail's mass
above it for top-p, a tail maximum at ``cap`` for min-p) and ``possible`` when some filter pass
keeps it with the tail placed to spare it. The tail is ``possible`` unless some filter surely cuts
a token at ``cap``. As in :mod:`specverify.dists._boundary`, the engine's law given a sure token
is the reported law restricted to the sure tokens and renormalised, which is tested exactly, and
its mass on the rest (ambiguous known tokens and the tail) is bounded by
``W_A e^e / (W_sure e^-e + W_A e^e)`` with the tail's ``H`` in ``W_A``.

Not expressible from log-probabilities, and refused by :func:`reported_law_refuses`: the
repetition penalty (it scales a logit by its sign, which a log-probability does not carry), and
with ``K < V`` a logit bias, negative penalties and ``min_tokens_to_keep > 1``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._boundary import FilterBoundary, filter_boundaries
from ._processing import process_logits, softmax
from ._settings import SamplingSettings

__all__ = ["ReportedRow", "reported_law_refuses", "reported_boundary"]


@dataclasses.dataclass(frozen=True)
class ReportedRow:
    """One position as the reference reported it: its top-K ``ids`` [K] with raw log-probabilities
    ``lps`` [K], and ``cap``, the largest raw log-probability another token can have (the K-th)."""

    ids: np.ndarray
    lps: np.ndarray
    cap: float

    @classmethod
    def from_mapping(cls, top: dict[int, float], k: int) -> ReportedRow:
        """From ``{id: logprob}`` holding the top ``k`` and perhaps the token that was there. Only
        the top ``k`` are kept: the token there is reported *because* it was sampled, and a law
        whose known set depends on the sample would be biased towards it."""
        ids = np.fromiter(top, dtype=np.int64, count=len(top))
        lps = np.fromiter(top.values(), dtype=np.float64, count=len(top))
        keep = np.argsort(-lps, kind="stable")[: min(k, len(lps))]
        return cls(ids=ids[keep], lps=lps[keep], cap=float(lps[keep[-1]]))


def reported_law_refuses(s: SamplingSettings, *, complete: bool) -> str | None:
    """Why the law of ``s`` cannot be computed from reported log-probabilities (None: it can);
    ``complete``: the reference reports the whole vocabulary."""
    if s.repetition_penalty != 1.0:
        return (
            "the repetition penalty scales each logit by its sign, which reported log-probabilities do not carry; "
            "audit it against a local copy of the target (--model)"
        )
    if complete:
        return None
    if s.logit_bias:
        return "a logit bias can lift an unreported token; ask the reference for every token (--reference-logprobs -1)"
    if s.presence_penalty < 0 or s.frequency_penalty < 0:
        return "negative penalties can lift an unreported token; ask the reference for every token"
    if s.min_tokens_to_keep > 1:
        return "min_tokens_to_keep > 1 is not bounded over unreported tokens; ask the reference for every token"
    return None


def reported_boundary(
    row: ReportedRow, vocab: int, s: SamplingSettings, *, tol: float, output_counts: np.ndarray | None = None
) -> tuple[np.ndarray, FilterBoundary]:
    """(the processed law [1, V] restricted to no tail, its :class:`FilterBoundary` [1, V]) of one
    reported position under ``s`` (module docstring); ``output_counts`` [V] counts the generated
    tokens before it (presence and frequency penalties)."""
    if len(row.ids) >= vocab:  # the whole vocabulary: the ordinary pipeline, with its tolerance
        x = np.full(vocab, -np.inf)
        x[row.ids] = row.lps
        x = np.maximum(x, -1e4)[None]  # -inf clamped (vLLM reports -9999 for them)
        gen = None if output_counts is None else output_counts[None]
        probs = softmax(process_logits(x, s, seen_counts=gen, output_counts=gen))
        return probs, filter_boundaries(x, s, tol=tol, seen_counts=gen, output_counts=gen)
    x = row.lps.copy()
    if output_counts is not None and (s.presence_penalty or s.frequency_penalty):
        c = output_counts[row.ids]
        x = x - s.presence_penalty * (c > 0) - s.frequency_penalty * c
    if s.is_greedy:
        sure, possible, tail, bound = _greedy_sets(x, row.cap, tol)
    else:
        sure, possible, tail, bound = _filtered_sets(x, row, vocab, s, tol)
    return _as_rows(x, row.ids, vocab, s, sure, possible, tail, bound)


def _as_rows(
    x: np.ndarray, ids: np.ndarray, vocab: int, s: SamplingSettings, sure: np.ndarray, possible: np.ndarray,
    tail: bool, bound: float,
) -> tuple[np.ndarray, FilterBoundary]:  # fmt: skip
    """The [1, V] law over the sure tokens and the [1, V] boundary sets, tail ids ambiguous."""
    probs = np.zeros((1, vocab))
    w = np.exp((x - x.max()) / (s.temperature or 1.0)) if not s.is_greedy else (x == x.max()).astype(float)
    w = np.where(possible, w, 0.0)
    probs[0, ids] = w / w.sum() if w.sum() > 0 else 0.0
    sure_v = np.zeros((1, vocab), dtype=bool)
    possible_v = np.full((1, vocab), tail)
    sure_v[0, ids], possible_v[0, ids] = sure, possible
    return probs, FilterBoundary(sure=sure_v, possible=possible_v, ambiguous_bound=np.array([bound]))


def _greedy_sets(x: np.ndarray, cap: float, tol: float) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """The argmax is sure when it beats every other token and the tail's cap by more than 2 tol."""
    top = int(np.argmax(x))
    rivals = max(np.max(np.delete(x, top), initial=-np.inf), cap)
    possible = x + tol >= x[top] - tol
    if x[top] - tol > rivals + tol:
        return np.arange(len(x)) == top, possible, False, 0.0
    return np.zeros(len(x), dtype=bool), possible, cap + tol >= x[top] - tol, 1.0


def _tail_mass(r: float, cap: float, n: int, t: float) -> float:
    """The most raw mass ``r`` over ``n`` tokens each at most ``exp(cap)`` weighs after ``x -> x^(1/t)``."""
    if r <= 0 or n == 0:
        return 0.0
    if t <= 1:
        return float(r * np.exp(cap * (1 / t - 1)))
    return float(n ** (1 - 1 / t) * r ** (1 / t))


# long: one pass per filter (top-k, top-p, min-p), each a sure and a possible set, kept together
def _filtered_sets(
    x: np.ndarray, row: ReportedRow, vocab: int, s: SamplingSettings, tol: float
) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """(sure [K'], possible [K'], tail possible, bound on the engine's ambiguous mass)."""
    t, d = s.temperature, tol
    n = vocab - len(row.ids)
    r = max(0.0, 1.0 - float(np.exp(row.lps - d).sum()))  # the tail's raw mass, at most
    cap = min(row.cap, float(np.log(r)) if r > 0 else -np.inf) + d
    has_tail = n > 0 and r > 0

    def g(v: Any) -> Any:  # the space the filters see (temperature first, or llama.cpp's last)
        return v if s.temperature_last else v / t

    h_f = r if s.temperature_last else _tail_mass(r, cap, n, t)  # the tail's mass there, at most
    lo, hi = x - d, x + d
    sure = np.ones(len(x), dtype=bool)
    possible = np.ones(len(x), dtype=bool)
    tail = has_tail
    above_hi = hi[None, :] >= lo[:, None]  # [i, j]: j may be above i
    above_lo = lo[None, :] > hi[:, None]  # [i, j]: j is surely above i
    np.fill_diagonal(above_hi, False)
    k = s.top_k
    if k and k < vocab:
        count = np.zeros(len(x))
        if has_tail:
            count = np.where(lo <= cap, np.minimum(n, np.floor(r / np.exp(lo))), 0.0)
        sure &= above_hi.sum(1) + count < k
        possible &= above_lo.sum(1) < k
        tail &= int((lo > cap).sum()) < k
    if s.top_p < 1.0:
        wl, wh = np.exp(g(lo) - g(hi.max())), np.exp(g(hi) - g(hi.max()))
        scale = np.exp(-g(hi.max()))
        tail_f = h_f * scale if has_tail else 0.0
        up = np.where(above_hi, possible[None, :] * wh[None, :], 0).sum(1) + np.where(lo <= cap, tail_f, 0.0) * tail
        below = np.where(~above_hi, sure[None, :] * wl[None, :], 0)
        np.fill_diagonal(below, 0)
        new_sure = up / (up + wl + below.sum(1)) < s.top_p
        up_f = np.where(above_lo, sure[None, :] * wl[None, :], 0).sum(1)
        rest = np.where(~above_lo, possible[None, :] * wh[None, :], 0)
        np.fill_diagonal(rest, 0)
        new_possible = up_f / (up_f + wh + rest.sum(1) + tail_f * tail) < s.top_p
        t_up = float((np.where(lo > cap, sure * wl, 0)).sum())
        tail &= t_up / (float((possible * wh).sum()) + tail_f + np.exp(g(cap) - g(hi.max()))) < s.top_p
        sure, possible = sure & new_sure, possible & new_possible
    if s.min_p > 0.0:
        top_hi = max(float(g(hi).max()), g(cap) if has_tail else -np.inf)
        top_lo = float(g(lo).max())
        sure &= g(lo) >= np.log(s.min_p) + top_hi
        possible &= g(hi) >= np.log(s.min_p) + top_lo
        tail &= g(cap) >= np.log(s.min_p) + top_lo
    sure &= possible
    ws_lo, ws_hi = np.exp((lo - hi.max()) / t), np.exp((hi - hi.max()) / t)
    h_s = _tail_mass(r, cap, n, t) * np.exp(-hi.max() / t) if tail else 0.0
    w_sure = float(ws_lo[sure].sum())
    w_amb = float(ws_hi[possible & ~sure].sum()) + h_s
    return sure, possible, tail, (w_amb / (w_sure + w_amb) if w_amb > 0 else 0.0)
