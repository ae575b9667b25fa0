"""Candidate laws of a round, one per bug class: the events of :mod:`._evidence` under each.

A model computes, for a chunk of n usable rounds, the conditional probabilities of the events
(module docstring of ``_evidence``):

    accept(c)    [n, g]   A_j = P(x_j kept | x_0 .. x_{j-1} kept, the drafts)
    replaced(c)  [n, V]   law of the final token of the rounds that stopped at k < g
    bonus(c)     [n, V]   law of the final token of the rounds that kept every draft
    draft_law(c) [n, g, V] law of each drafted token given the ones before (own drafts only)
    structural(ev) [R]    probability of the structural event (a non-standard block / another
                          verification prefix) of every round

The reference model is the full rule (accept iff u < p(x)/q(x), replacement (p - q)+ / (1 -
beta), bonus p_gamma): under it the output law is the target's. Each bug model changes one hook,
the way the bug changed one line. Laws are rows over the vocabulary (each sums to one); rows
whose weights vanish fall back to p, as the textbook code does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dists import SamplingSettings, probs_from_logits

if TYPE_CHECKING:  # annotations only: the evidence module sits beside this one
    from ._evidence import RoundEvidence

__all__ = ["Chunk", "Tables", "RoundModel", "EPS"]

#: probability floor: an event a model deems impossible costs log(EPS) = -20.7 nats, so that one
#: stray event cannot veto a model that explains everything else
EPS = 1e-9


@dataclasses.dataclass
class Tables:
    """[M, V] rows a model's implementation would use: verification target, bonus target, the
    draft law drafts are drawn from, and the q the ratio and residual use."""

    P: np.ndarray
    Pb: np.ndarray
    Qs: np.ndarray
    Qr: np.ndarray
    extra: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # 'P...' target-like, 'Q...' draft-like


@dataclasses.dataclass
class Chunk:
    """Gathered rows of n usable rounds (shapes in the module docstring)."""

    X: np.ndarray  # [n, g]
    k: np.ndarray  # [n]
    P: np.ndarray  # [n, g + 1, V] verification target rows (row g: the bonus position's)
    Pb: np.ndarray  # [n, V] bonus rows
    Qs: np.ndarray  # [n, g, V]
    Qr: np.ndarray  # [n, g, V]
    Qb: np.ndarray  # [n, V] draft row at the bonus position
    spare: np.ndarray  # [n, g]
    extra: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # gathered like P (names 'P...') or Qr
    Pm1: np.ndarray | None = None  # [n, V] target row of the token before position 0 (row 0 where unknown)
    # the tables Qs and Pb were gathered from, with their row ids ([n, g], [n]); None: not known
    source: tuple[Tables, np.ndarray, np.ndarray] | None = None
    #: [n] what came before each round in its sequence: AFTER_NOTHING (its first round), AFTER_REJECTION,
    #: AFTER_FULL (a round that kept every draft); None: not known
    after: np.ndarray | None = None
    #: {context: [n, g + 1] rows of the target table} of each position on a wrong context
    #: (``_evidence.CONTEXTS``), read from ``source``'s table; None: not known (positional pairs)
    ctx: dict[str, np.ndarray] | None = None

    def mapped(self, name: str, f: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``f(self.Qs)`` or ``f(self.Pb)`` for a row-wise ``f``, computed on the table's rows and
        gathered when the rows' source is known: a table has far fewer rows than a chunk."""
        if self.source is None:
            out: np.ndarray = f(getattr(self, name))
            return out
        tab, qrow, pbrow = self.source
        out = f(getattr(tab, name))[qrow if name == "Qs" else pbrow]
        return out

    def at(self, A: np.ndarray, j: np.ndarray | None = None) -> np.ndarray:
        """A[i, j_i, x_i] for the position j_i of each round (default: every position)."""
        n, g = self.X.shape
        out: np.ndarray
        if j is None:
            out = np.take_along_axis(A[:, :g], self.X[:, :, None], axis=2)[:, :, 0]
        else:
            out = A[np.arange(n), j, self.X[np.arange(n), j]]
        return out


AFTER_NOTHING, AFTER_REJECTION, AFTER_FULL = 0, 1, 2


#: how the audited implementation treats 0/0 (a draft with q(x) = p(x) = 0): ``u < p/q`` rejects
#: it (nan compares false), ``u >= p/q -> reject`` keeps it. Both are the textbook rule; the
#: convention is read from the evidence of each unit (``_score.score_unit``) and used by every model.
NAN_KEEP = [False]


def ratio(px: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """min(1, p(x) / q(x)); at q(x) = 0 (a draft q could not have drawn) p/0 = inf keeps the draft
    when p(x) > 0, and 0/0 keeps or rejects it by the unit's convention (:data:`NAN_KEEP`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        at_zero = np.where(px > 0, 1.0, float(NAN_KEEP[0]))
        return np.where(qx > 0, np.minimum(1.0, px / np.where(qx > 0, qx, 1.0)), at_zero)


def continuation(law: np.ndarray) -> np.ndarray:
    """[n, g] A_j = P(K > j | K >= j) of a count K with law [n, g + 1]: the form the scorer reads
    acceptances in (P(K = m) = prod_{j<m} A_j (1 - A_m)); 0 where K >= j is impossible."""
    at_least = np.cumsum(law[:, ::-1], -1)[:, ::-1]  # P(K >= j)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(at_least[:, :-1] > 0, at_least[:, 1:] / at_least[:, :-1], 0.0)
    return out


def normalise(w: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows of w divided by their sums; rows without mass take the fallback row."""
    s = w.sum(-1, keepdims=True)
    return np.where(s > 0, w / np.where(s > 0, s, 1.0), fallback)


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return normalise(np.maximum(p - q, 0.0), p)


def interval_law(cdf_lo: np.ndarray, cdf_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Law of the inverse-CDF token when u ~ U(lo, hi): token i owns [cdf_lo_i, cdf_hi_i)."""
    width = np.clip(np.minimum(cdf_hi, hi[:, None]) - np.maximum(cdf_lo, lo[:, None]), 0.0, None)
    return normalise(width, np.full_like(cdf_hi, 1.0 / cdf_hi.shape[-1]))


def cdf_bounds(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) cumulative bounds of every token of normalised rows w [n, V], id order."""
    hi = np.cumsum(w, -1)
    hi[:, -1] = 1.0
    return hi - w, hi


class RoundModel:
    """The reference full rule; bug models override one hook (module docstring)."""

    name = "target"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        return base

    def draft_law(self, c: Chunk) -> np.ndarray:
        return c.Qs

    def accept(self, c: Chunk) -> np.ndarray:
        return ratio(c.at(c.P), c.at(c.Qr))

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Law of the replacement of the rounds ``rows`` (indices into the chunk), stopped at j."""
        return residual(c.P[rows, j], c.Qr[rows, j])

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        out: np.ndarray = c.Pb[rows]
        return out

    def nonstandard(self, ev: RoundEvidence) -> np.ndarray:
        """[R] probability that a round's block is not drafts[:k] + [y]: impossible when correct."""
        return np.full(len(ev.k), EPS)

    def mismatch(self, ev: RoundEvidence) -> np.ndarray:
        """[R] probability that a round's verification pass saw another prefix than the true one."""
        return np.full(len(ev.k), EPS)

    def one_token_tail(self, ev: RoundEvidence) -> np.ndarray:
        """[R] probability that a non-standard block has exactly one token after its first
        departure from the drafts. A class that does not predict the block's shape takes the
        unit's observed share (the same for every such model: the event then ranks nothing)."""
        return _observed_share(ev, None if ev.tail is None else ev.tail == 1)

    def reaches_last(self, ev: RoundEvidence) -> np.ndarray:
        """[R] probability that a non-standard block emits at least g tokens: verification went on to
        the last draft (the observed share unless a class predicts it)."""
        return _observed_share(ev, None if ev.emitted is None else ev.emitted >= ev.gamma)

    def fit(self, ev: RoundEvidence) -> None:
        """Fit the model's free parameter (if any) to a unit's evidence."""


def _observed_share(ev: RoundEvidence, event: np.ndarray | None) -> np.ndarray:
    """[R] the share of the unit's non-standard blocks that show ``event`` (1/2 where none)."""
    odd = (ev.y >= 0) & ~ev.mismatch & ~ev.standard
    share = float(event[odd].mean()) if event is not None and odd.any() else 0.5
    return np.full(len(ev.k), min(max(share, 1e-3), 1 - 1e-3))


# --------------------------------------------------------------------------------------------
# table helpers: the rows an implementation with a settings bug computes
# --------------------------------------------------------------------------------------------
def settings_without(s: SamplingSettings | None, knob: str) -> SamplingSettings:
    """``s`` with ``knob`` back at its default (switched off)."""
    return dataclasses.replace(s or SamplingSettings(), **{knob: getattr(SamplingSettings(), knob)})


def pipeline(logits: np.ndarray, s: SamplingSettings | None, steps: tuple[str, ...]) -> np.ndarray:
    """softmax of the logits after the named steps, in the given order (one knob at a time, each
    step through specverify's own pipeline, so only the order differs from the reference)."""
    s = s or SamplingSettings()
    x = np.asarray(logits, dtype=np.float64)
    for step in steps:
        if step == "temperature":
            x = x / s.temperature
            continue
        value = getattr(s, step)
        if value == SamplingSettings().to_dict()[step]:
            continue
        keep = probs_from_logits(np.where(np.isfinite(x), x, -1e30), SamplingSettings(**{step: value})) > 0
        x = np.where(keep, x, -np.inf)
    x = np.where(np.isfinite(x), x, -np.inf)
    z = np.exp(x - x.max(-1, keepdims=True))
    out: np.ndarray = z / z.sum(-1, keepdims=True)
    return out


ORDER = ("temperature", "top_k", "top_p", "min_p")
