"""Mechanism families with a fitted parameter: shapes of a part's law, not single bugs.

The members of ``_mechanism`` are fixed laws (the next row, an inverted ratio, the residual's
argmax). Bugs vary the same part continuously: the ratio scaled by an envelope constant, a floor on
the acceptance, a draft law sharpened before sampling, a bonus mixed with a uniform row. A member
here is one such shape with one parameter:

    acceptance   min(1, a p/q) (a scale on the ratio); max(t, min(1, p/q)) (a floor, on every draft or
                 on drafts the target allows); min(1, p/q)^b (a power); 1 - b (q - p)+ (a linearised
                 ratio, b = 1: 1 + p - q); one-off shapes without a parameter: the branch p >= q ->
                 keep, else keep with p (the division forgotten), the textbook envelope
                 (p/q) / max_v p(v)/q(v), a coin drawn from N(0, 1) (Phi(min(1, p/q))), exp(p - q), the
                 first draft's q read from the target (kept iff p(x) > 0), min(1, (p - q)+ / q) (the
                 residual written over p before the test), the target row over its maximum
    replacement  (p - c q)+ (c a constant, or the rejected draft's acceptance probability); (p - q)+
                 cut to its top k; (p - q)+ tempered, w^tau; mixed with p, q or the uniform row at
                 weight w; the best of n draws (by w, or by the target's p); weights normalised by
                 their L2 norm or maximum and drawn by inverse CDF; the block's mean draft row in the
                 residual; p, 1 or p + q on the residual's support {p > q}; (p - q) - min(p - q);
                 (p / max p - q)+
    bonus        p tempered; p q^b (a product with the draft row); mixed with q or the uniform row;
                 the best of n draws
    draft        drafts drawn from q^tau / Z while the ratio and residual use q; the reverse, drafts
                 from q while the ratio or the residual reads q^tau / Z (two parts, each fitted)

(Tried and left out: a draft kept untested above a target entropy t. On the test pair's five target
rows it named a bug that keeps odd ids untested, explaining 99% of its deviation: a gate on rows
mimics any rule that skips the test on some of them.)

A parameter is fitted on a grid (``FIT_GRID``) to the pooled events of its own part over the units
(``_score.fit_on_grid``, the first ``FIT_ROUNDS`` = 1,000 usable rounds of each), and the choice
pays log(len(grid)) nats, as a class's grid parameter does. Fitting on the events it is then
scored on is what the price pays for; a mechanism must still beat the target law by ``min_llr``
nats and explain 99% of the deviation on the cells.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from scipy import stats

from ._mechanism import _draft_rows_shifted, _Family, _rows_at
from ._models import Chunk, interval_law, normalise, ratio, residual

__all__ = ["Fitted", "fitted_family_models"]


#: half the 95% quantile of chi-square(1): grid values this close to the best are as likely
LIKELY_NATS = 1.92


class Fitted(_Family):
    """A family member whose parameter is chosen on ``FIT_GRID`` (``set_value`` names it)."""

    FIT_GRID: tuple[float, ...] = ()
    value = float("nan")

    @property
    def price(self) -> float:
        """Nats the grid choice costs (the member's log-likelihood is maximised over the grid)."""
        return math.log(len(self.FIT_GRID))

    #: the grid values whose pooled log-likelihood is within LIKELY_NATS of the best's (set by ``settle``)
    likely: tuple[float, ...] = ()

    def set_value(self, v: float) -> None:
        self.value = float(v)
        self.name = self._name()
        self.words = self._words()

    def settle(self, ll: np.ndarray) -> None:
        """Take the likeliest grid value (``ll`` [grid]: the pooled log-likelihoods) and say which
        others fit about as well: a profile-likelihood interval, within 1.92 nats (95% for one
        parameter), so that the lead never states a value more precisely than the evidence does."""
        best = int(np.argmax(ll))
        self.likely = tuple(v for v, x in zip(self.FIT_GRID, ll) if x >= ll[best] - LIKELY_NATS)
        self.set_value(self.FIT_GRID[best])
        if len(self.likely) > 1:
            self.words += f" ({min(self.likely):g} to {max(self.likely):g} fit as well)"

    def _name(self) -> str:
        raise NotImplementedError

    def _words(self) -> str:
        raise NotImplementedError


def _geom(lo: float, hi: float, n: int, *, skip: float | None = 1.0) -> tuple[float, ...]:
    """n values from lo to hi, evenly spaced in log, rounded to 3 significant digits (the rule's skipped)."""
    vals = {float(f"{v:.3g}") for v in np.geomspace(lo, hi, n)}
    return tuple(sorted(v for v in vals if skip is None or abs(v - skip) > 1e-9))


def _lin(lo: float, hi: float, step: float) -> tuple[float, ...]:
    return tuple(round(float(v), 4) for v in np.arange(lo, hi + step / 2, step))


# ------------------------------------------------------------------------------------------------
# acceptance
# ------------------------------------------------------------------------------------------------
class ScaledRatio(Fitted):
    """min(1, a p/q): a constant on one side of the ratio (an envelope constant, a temperature
    applied to one side's probabilities, a renormalisation missed on one row)."""

    FIT_GRID = _geom(0.05, 20.0, 41)
    check = "the ratio's two operands: p(x) and q(x) as probabilities of the same settings, nothing scaling one of them"

    def _name(self) -> str:
        return f"ratio_scaled(a={self.value:g})"

    def _words(self) -> str:
        a = f"{self.value:g}"
        return f"a draft is kept with probability min(1, a p(x)/q(x)) with a = {a} fitted, a constant on the ratio"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        return ratio(self.value * px, qx)


class FlooredRatio(Fitted):
    """max(t, min(1, p/q)): an acceptance floor (a minimum acceptance rate, a clamp meant for
    numerical safety applied to the probability); ``supported``: only where p(x) > 0."""

    FIT_GRID = _lin(0.05, 0.95, 0.05)
    check = "a clamp or a floor on the acceptance probability: min(1, p/q) must reach 0 for a draft the target dislikes"

    def __init__(self, *, supported: bool) -> None:
        self.supported = supported

    def _name(self) -> str:
        return f"acceptance_floor(t={self.value:g}{', p>0' if self.supported else ''})"

    def _words(self) -> str:
        where = " for a draft the target allows (p(x) > 0; one it forbids is rejected)" if self.supported else ""
        return (
            f"a draft is kept with probability max({self.value:g}, min(1, p(x)/q(x))){where}: a floor on the acceptance"
        )

    def accept(self, c: Chunk) -> np.ndarray:
        px = c.at(c.P)
        a = np.maximum(self.value, ratio(px, c.at(c.Qr)))
        return np.where(px > 0, a, 0.0) if self.supported else a


class PoweredRatio(Fitted):
    """min(1, p/q)^b: the ratio raised to a power (a temperature applied to the log-ratio, a square
    or square root left in)."""

    FIT_GRID = _geom(0.125, 8.0, 25)
    check = "the acceptance probability: min(1, p(x)/q(x)) itself, not a power of it (a log-ratio scaled before exp)"

    def _name(self) -> str:
        return f"ratio_powered(b={self.value:g})"

    def _words(self) -> str:
        return f"a draft is kept with probability min(1, p(x)/q(x))^b with b = {self.value:g} fitted"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = ratio(c.at(c.P), c.at(c.Qr)) ** self.value
        return out


class LinearisedRatio(Fitted):
    """1 - b (q(x) - p(x))+: the ratio replaced by a difference (b = 1: min(1, 1 + p - q))."""

    FIT_GRID = _geom(0.25, 16.0, 25, skip=None)
    check = "the acceptance test: the ratio p(x)/q(x), not a difference of the probabilities"

    def _name(self) -> str:
        return f"acceptance_linearised(b={self.value:g})"

    def _words(self) -> str:
        b = "" if self.value == 1 else f"{self.value:g} "
        return (
            f"a draft is kept with probability 1 - {b}(q(x) - p(x))+ (min(1, 1 + p - q) at b = 1; "
            f"b = {self.value:g} fitted): a difference of the probabilities where their ratio belongs"
        )

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.clip(1.0 - self.value * np.maximum(c.at(c.Qr) - c.at(c.P), 0.0), 0.0, 1.0)
        return out


class _Fixed(_Family):
    """An acceptance shape without a parameter: ``law(c, p(x), q(x))`` [n, g]."""

    def __init__(self, name: str, words: str, check: str, law: Callable[[Chunk, np.ndarray, np.ndarray], np.ndarray]):
        self.name, self.words, self.check, self.law = name, words, check, law

    def accept(self, c: Chunk) -> np.ndarray:
        return self.law(c, c.at(c.P), c.at(c.Qr))


def _envelope(c: Chunk, px: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """(p/q) / max_v p(v)/q(v) over the draft row's support: textbook rejection sampling."""
    g = c.X.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        env = np.where(c.Qr[:, :g] > 0, c.P[:, :g] / c.Qr[:, :g], 0.0)
    return np.minimum(1.0, ratio(px, qx) / np.maximum(env.max(-1), 1e-300))


def _first_q_from_target(c: Chunk, px: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """q_0 read from the target's row 0 (a ratio p/p): kept iff p(x) > 0 there; the rule after."""
    a = ratio(px, qx)
    a[:, 0] = (px[:, 0] > 0).astype(float)
    return a


FIXED_ACCEPTANCE = (
    (
        "acceptance_target_over_its_max",
        "a draft is kept with probability min(1, (p(x) / max p) / q(x)): the target row divided by its largest "
        "entry, not by its sum",
        "the target row the ratio reads: probabilities normalised by their sum, not by their maximum",
        lambda c, px, qx: ratio(px / c.P[:, : c.X.shape[1]].max(-1), qx),
    ),
    (
        "ratio_branch_without_division",
        "a draft is kept surely when p(x) >= q(x), else with probability p(x): the branch of min(1, p/q) that "
        "divides by q(x) lost its division",
        "the branch p(x) < q(x) of the acceptance: keep with probability p(x)/q(x)",
        lambda c, px, qx: np.where(px >= qx, 1.0, px),
    ),
    (
        "acceptance_coin_normal",
        "the acceptance coin is a standard normal, not a uniform: kept with probability Phi(min(1, p(x)/q(x))), "
        "never below 0.5",
        "the coin of the acceptance test: a uniform on [0, 1) (rand, not randn)",
        lambda c, px, qx: stats.norm.cdf(ratio(px, qx)),
    ),
    (
        "acceptance_exp_of_difference",
        "a draft is kept with probability min(1, exp(p(x) - q(x))): probabilities fed to a log-space ratio",
        "the ratio's inputs: exp(log p - log q) needs log-probabilities, or p/q on probabilities",
        lambda c, px, qx: np.minimum(1.0, np.exp(px - qx)),
    ),
    (
        "acceptance_envelope_constant",
        "a draft is kept with probability (p(x)/q(x)) / M with M = max_v p(v)/q(v) of its rows: textbook "
        "rejection sampling's envelope, where speculative decoding's min(1, p/q) belongs",
        "the acceptance probability: min(1, p(x)/q(x)), no envelope constant M",
        _envelope,
    ),
    (
        "acceptance_residual_over_q",
        "a draft is kept with probability min(1, (p(x) - q(x))+ / q(x)) = min(1, p/q - 1), never where p(x) <= q(x): "
        "the target row overwritten by the residual before the test, or a log-space coin taken as log1p(u)",
        "the test's two sides: p itself, not a buffer the residual was written into; in a log-space test, "
        "log(u) < log p(x) - log q(x), not log1p(u) (which is >= 0)",
        lambda c, px, qx: ratio(np.maximum(px - qx, 0.0), qx),
    ),
    (
        "first_draft_q_from_target",
        "the first draft's q is read from the target's row (a ratio p/p): it is kept whenever p(x) > 0",
        "the q row handed to the verifier for the first draft: the draft model's row, not the target pass's",
        _first_q_from_target,
    ),
)


# ------------------------------------------------------------------------------------------------
# replacement, bonus and draft laws
# ------------------------------------------------------------------------------------------------
def _tempered(w: np.ndarray, tau: float, fallback: np.ndarray) -> np.ndarray:
    return normalise(np.where(w > 0, np.power(np.maximum(w, 1e-300), tau), 0.0), fallback)


def _best_of(w: np.ndarray, n: int, key: np.ndarray | None = None) -> np.ndarray:
    """[m, V] the law of the best of n draws from w, ranked by ``key`` (default w; ties to the first
    draw): F_le^n - F_lt^n per distinct value, F the mass of w at or above each rank."""
    order = np.argsort(-(w if key is None else key), axis=-1, kind="stable")
    sw = np.take_along_axis(w, order, -1)
    below = 1.0 - np.cumsum(sw, -1)  # mass strictly after this rank (ties split in id order: an approximation)
    law = np.power(below + sw, n) - np.power(np.maximum(below, 0.0), n)
    out = np.empty_like(w)
    np.put_along_axis(out, order, law, -1)
    return normalise(np.maximum(out, 0.0), w)


class ResidualWeighted(Fitted):
    """(p - c q)+: the draft row weighted by c in the residual (c = 0: p)."""

    FIT_GRID = (*_lin(0.0, 0.9, 0.1), *_lin(1.2, 3.0, 0.2))
    check = "the residual: max(p - q, 0) with q unscaled, the rejected draft's own row"

    def _name(self) -> str:
        return f"residual_weighted(c={self.value:g})"

    def _words(self) -> str:
        return f"the replacement is drawn from (p - c q)+ with c = {self.value:g} fitted (the rule: c = 1)"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return residual(c.P[rows, j], self.value * c.Qr[rows, j])


class ResidualTopK(Fitted):
    """(p - q)+ cut to its k largest entries and renormalised."""

    FIT_GRID = (2.0, 3.0, 4.0, 5.0, 8.0, 10.0, 16.0, 20.0)
    check = "the residual draw: from every token with p > q, no top-k cut on the residual"

    def _name(self) -> str:
        return f"residual_top_k(k={self.value:g})"

    def _words(self) -> str:
        return f"the replacement is drawn from (p - q)+ cut to its {self.value:g} largest entries and renormalised"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        w = np.maximum(c.P[rows, j] - c.Qr[rows, j], 0.0)
        k = min(int(self.value), w.shape[-1])
        keep = w >= -np.partition(-w, k - 1, axis=-1)[:, k - 1 : k]
        return normalise(np.where(keep, w, 0.0), c.P[rows, j])


class Tempered(Fitted):
    """A part's law raised to the power tau and renormalised (tau > 1 sharper, < 1 flatter)."""

    FIT_GRID = _geom(0.25, 4.0, 25)

    def __init__(self, part: str) -> None:
        self.part = part
        self.check = {
            "replacement": "the residual draw: (p - q)+ itself, no temperature or power applied to it",
            "bonus": "the bonus draw: from p of the last row as processed once, no second temperature",
            "draft": "the q the drafter returns: the law it sampled from, after its own temperature or sharpening",
        }[part]

    def _name(self) -> str:
        return f"{self.part}_tempered(tau={self.value:g})"

    def _words(self) -> str:
        law = {"replacement": "(p - q)+", "bonus": "p", "draft": "q"}[self.part]
        how = "sharpened" if self.value > 1 else "flattened"
        if self.part == "draft":
            return (
                f"drafts are drawn from q^tau / Z with tau = {self.value:g} fitted ({how}), but the ratio and the "
                "residual use q itself"
            )
        return f"the {self.part} is drawn from {law}^tau / Z with tau = {self.value:g} fitted ({how} against the rule)"

    def _replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p = c.P[rows, j]
        return _tempered(residual(p, c.Qr[rows, j]), self.value, p)

    def _bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return c.mapped("Pb", lambda w: _tempered(w, self.value, w))[rows]

    def _draft_law(self, c: Chunk) -> np.ndarray:
        return c.mapped("Qs", lambda w: _tempered(w, self.value, w))


class ReportedTempered(Fitted):
    """The draft row the verifier reads is q^tau / Z while the drafts are drawn from q (a temperature
    or sharpening applied to the reported row only): in the ratio, or in the residual."""

    FIT_GRID = _geom(0.25, 4.0, 25)
    check = "the q the drafter reports: the very law it sampled from, no temperature applied to it afterwards"

    def __init__(self, part: str) -> None:
        self.part = part

    def _name(self) -> str:
        return f"{self.part}_reads_q_tempered(tau={self.value:g})"

    def _words(self) -> str:
        how = "sharpened" if self.value > 1 else "flattened"
        where = "the ratio reads" if self.part == "acceptance" else "the residual is (p - q')+ with"
        return f"{where} q' = q^tau / Z, tau = {self.value:g} fitted ({how}), while drafts are drawn from q"

    def _accept(self, c: Chunk) -> np.ndarray:
        return ratio(c.at(c.P), c.at(_tempered(c.Qr, self.value, c.Qr)))

    def _replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p = c.P[rows, j]
        q = c.Qr[rows, j]
        return residual(p, _tempered(q, self.value, q))


class MixedWith(Fitted):
    """(1 - w) law + w other: the rule's law mixed with p, q or the uniform row."""

    FIT_GRID = _lin(0.05, 0.95, 0.05)

    def __init__(self, part: str, other: str) -> None:
        self.part, self.other = part, other
        self.check = f"the {part} row handed to the sampler: no smoothing or ensembling with another row"

    def _name(self) -> str:
        return f"{self.part}_mixed_with_{self.other}(w={self.value:g})"

    def _words(self) -> str:
        law = "(p - q)+" if self.part == "replacement" else "p"
        other = {"uniform": "the uniform row 1/V", "p": "p", "q": "the draft row q"}[self.other]
        return f"the {self.part} is drawn from {1 - self.value:g} {law} + {self.value:g} {other} (w fitted): a mixture"

    def _mix(self, law: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        other = {"uniform": np.full_like(law, 1.0 / law.shape[-1]), "p": p, "q": q}[self.other]
        out: np.ndarray = (1 - self.value) * law + self.value * other
        return out

    def _replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = c.P[rows, j], c.Qr[rows, j]
        return self._mix(residual(p, q), p, q)

    def _bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return self._mix(c.Pb[rows], c.Pb[rows], c.Qb[rows])


class BonusTimesDraft(Fitted):
    """p q^b normalised: the bonus row multiplied by the draft row (b = 1: the product, an ensemble)."""

    FIT_GRID = _geom(0.25, 4.0, 13, skip=None)
    check = "the bonus draw: from p of the last row alone, not combined with the draft model's row"

    def _name(self) -> str:
        return f"bonus_times_draft(b={self.value:g})"

    def _words(self) -> str:
        b = f"{self.value:g}"
        return f"the bonus is drawn from p q^b / Z with b = {b} fitted: the target row multiplied by the draft's"

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        p, q = c.Pb[rows], c.Qb[rows]
        return normalise(p * np.power(q, self.value), p)


class BestOf(Fitted):
    """The likelier of n draws (n fitted): a sharpened law of a particular shape. ``by_target``: the
    replacement's n draws from (p - q)+ ranked by the target's p (a "quality" pick among correction
    candidates), not by their own weight."""

    FIT_GRID = (2.0, 3.0, 4.0)

    def __init__(self, part: str, *, by_target: bool = False) -> None:
        self.part, self.by_target = part, by_target
        self.check = f"the {part} draw: one sample, not the likelier of several"
        if by_target:
            self.check = "the replacement draw: one sample from (p - q)+, not the most likely under p of several"

    def _name(self) -> str:
        if self.by_target:
            return f"replacement_best_by_target_of(n={self.value:g})"
        return f"{self.part}_best_of(n={self.value:g})"

    def _words(self) -> str:
        if self.by_target:
            return f"the replacement is the draw with the largest p(x) of {self.value:g} draws from (p - q)+ (n fitted)"
        law = "(p - q)+" if self.part == "replacement" else "p"
        return f"the {self.part} is the likelier of {self.value:g} draws from {law} (n fitted), not one draw"

    def _replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p = c.P[rows, j]
        return _best_of(residual(p, c.Qr[rows, j]), int(self.value), key=p if self.by_target else None)

    def _bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return _best_of(c.Pb[rows], int(self.value))


class ResidualSpecial(_Family):
    """A residual shape without a parameter: ``law(c, j, rows, p, q)`` [m, V] from the stopping rows."""

    def __init__(self, name: str, words: str, check: str, law: Callable[..., np.ndarray]) -> None:
        self.name, self.words, self.check, self.law = name, words, check, law

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self.law(c, j, rows, c.P[rows, j], c.Qr[rows, j])


def _block_mean(c: Chunk, j: np.ndarray, rows: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return residual(p, _draft_rows_shifted(c, 0)[rows, : c.X.shape[1]].mean(1))


def _weighted_by_acceptance(c: Chunk, j: np.ndarray, rows: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    a = ratio(_rows_at(c.P[:, : c.X.shape[1]], c.X), _rows_at(c.Qr, c.X))[rows, j]
    return residual(p, a[:, None] * q)


def _other_norm(l2: bool) -> Callable[..., np.ndarray]:
    """Inverse CDF on (p - q)+ divided by its L2 norm or its maximum instead of its sum: both are at
    most the sum, so the cumulative weights reach 1 and u in [0, 1) never falls past the last id."""

    def law(c: Chunk, j: np.ndarray, rows: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        w = np.maximum(p - q, 0.0)
        norm = np.sqrt((w**2).sum(-1)) if l2 else w.max(-1)
        w = w / np.where(norm > 0, norm, 1.0)[:, None]
        hi = np.cumsum(w, -1)
        return interval_law(hi - w, hi, np.zeros(len(rows)), np.ones(len(rows)))

    return law


def _on_support(weights: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    """Replacement weights other than p - q on the residual's support {p > q}."""
    return lambda c, j, rows, p, q: normalise(np.where(p > q, weights(p, q), 0.0), p)


def _shifted(c: Chunk, j: np.ndarray, rows: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    d = p - q
    return normalise(d - d.min(-1, keepdims=True), p)


SPECIAL_RESIDUALS = (
    (
        "residual_target_over_its_max",
        "the replacement is drawn from (p / max p - q)+: the target row divided by its largest entry, not by its sum",
        "the target row the residual reads: probabilities normalised by their sum, not by their maximum",
        lambda c, j, rows, p, q: residual(p / p.max(-1, keepdims=True), q),
    ),
    (
        "replacement_p_on_residual_support",
        "the replacement is drawn from p restricted to {p > q} (where(p > q, p, 0)), not from p - q there",
        "the residual's weights: p - q on {p > q}, not p",
        _on_support(lambda p, q: p),
    ),
    (
        "replacement_uniform_on_residual_support",
        "the replacement is uniform over the residual's support {p > q}: its weights cancel in the draw (an "
        "exponential race or Gumbel noise scaled by the weights)",
        "the draw from (p - q)+: E ~ Exp(1) in argmax(w / E), the weights not in the noise's scale",
        _on_support(lambda p, q: np.ones_like(p)),
    ),
    (
        "replacement_p_plus_q_on_residual_support",
        "the replacement is drawn from p + q on {p > q}: logaddexp where a log-space subtraction belongs",
        "log(p - q) in log space: log p + log1p(-exp(log q - log p)), not logaddexp",
        _on_support(lambda p, q: p + q),
    ),
    (
        "residual_shifted_by_minimum",
        "the replacement is drawn from (p - q) - min(p - q), a shift to non-negative values where max(p - q, 0) "
        "belongs: every token gets mass",
        "the residual's clamp: max(p - q, 0), not a shift by its minimum",
        _shifted,
    ),
    (
        "residual_block_mean_draft_row",
        "the replacement is drawn from (p - qbar)+ with qbar the mean of the block's draft rows, not the rejected "
        "position's row",
        "the draft row of the residual: the rejected draft's own q row, not an average over the block",
        _block_mean,
    ),
    (
        "residual_weighted_by_acceptance",
        "the replacement is drawn from (p - a q)+ with a = min(1, p(x)/q(x)) of the rejected draft, not (p - q)+",
        "the residual: max(p - q, 0), q not multiplied by the acceptance probability",
        _weighted_by_acceptance,
    ),
    (
        "residual_l2_normalised",
        "the replacement's weights (p - q)+ are divided by their L2 norm, not their sum, before an inverse-CDF draw: "
        "the cumulative weights pass 1 early and low ids take the mass",
        "the normalisation of the residual before the draw: divide by the sum of its weights",
        _other_norm(l2=True),
    ),
    (
        "residual_max_normalised",
        "the replacement's weights (p - q)+ are divided by their maximum, not their sum, before an inverse-CDF draw",
        "the normalisation of the residual before the draw: divide by the sum of its weights",
        _other_norm(l2=False),
    ),
)


_F = TypeVar("_F", bound=Fitted)
_HOOK = {"acceptance": "accept", "replacement": "replaced", "bonus": "bonus", "draft": "draft_law"}


def _on_part(cls: type[_F], part: str) -> type[_F]:
    """The subclass of a multi-part family that computes one part (a member changes one part only:
    ``_mechanism.part_of`` reads which hooks a class overrides)."""
    hook = _HOOK[part]
    return type(f"{cls.__name__}_{part}", (cls,), {hook: getattr(cls, "_" + hook)})


def fitted_family_models() -> list[Fitted | _Family]:
    """Fresh members (fitted ones before their fit: ``_score.fit_on_grid`` sets their value)."""
    out: list[Fitted | _Family] = [
        ScaledRatio(),
        FlooredRatio(supported=True),
        FlooredRatio(supported=False),
        PoweredRatio(),
        LinearisedRatio(),
        *(_Fixed(*args) for args in FIXED_ACCEPTANCE),
        ResidualWeighted(),
        ResidualTopK(),
        *(ResidualSpecial(*args) for args in SPECIAL_RESIDUALS),
        *(_on_part(Tempered, part)(part) for part in ("replacement", "bonus", "draft")),
        *(_on_part(MixedWith, "replacement")("replacement", o) for o in ("uniform", "p", "q")),
        *(_on_part(MixedWith, "bonus")("bonus", o) for o in ("uniform", "q")),
        BonusTimesDraft(),
        *(_on_part(BestOf, part)(part) for part in ("replacement", "bonus")),
        _on_part(BestOf, "replacement")("replacement", by_target=True),
        *(_on_part(ReportedTempered, part)(part) for part in ("acceptance", "replacement")),
    ]
    for m in out:
        if isinstance(m, Fitted):
            m.set_value(m.FIT_GRID[len(m.FIT_GRID) // 2])
    return out
