"""The round models of the bug mechanisms (the hooks and shapes are in :mod:`._models`).

Each docstring states the law the bug produces; the class names match the catalogue's hooks. Which
model belongs to which bug class, with what parameters, is stated by the class's record in
:mod:`._classes` (``BugClass.model``); this module only defines the laws.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..dists import SamplingSettings, probs_from_logits, process_logits
from ._models import (
    EPS,
    NAN_KEEP,
    Chunk,
    RoundModel,
    Tables,
    cdf_bounds,
    continuation,
    interval_law,
    normalise,
    pipeline,
    ratio,
    residual,
    settings_without,
)

if TYPE_CHECKING:  # annotations only
    from ..harness import ChainSampler
    from ._evidence import RoundEvidence

#: a replacement law f(p, q) of the stopping position's rows [n, V] (weights; normalised by the model)
RowLaw = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _catalogue_tables(pair: Any, settings: SamplingSettings | None, base: Tables, sampler: ChainSampler) -> Tables:
    """The rows a catalogue sampler's table hooks compute, on every row of the pair."""
    rows = np.arange(base.P.shape[0])
    P = sampler.target_rows(pair, rows, settings, bonus=False)
    Pb = sampler.target_rows(pair, rows, settings, bonus=True)
    Qs = sampler.draft_rows_sampled(pair, rows, settings)
    return Tables(P, Pb, Qs, sampler.draft_rows_reported(pair, rows, settings, Qs))


class _BiasedPair:
    """A pair's logits with the request's logit bias already added (its tables: the settings' laws
    of those logits), for hooks that rebuild their settings from scratch and so drop the bias."""

    def __init__(self, pair: Any, bias: np.ndarray) -> None:
        self.target_logits = np.asarray(pair.target_logits, dtype=np.float64) + bias
        self.draft_logits = np.asarray(pair.draft_logits, dtype=np.float64) + bias

    def target_table(self, settings: SamplingSettings | None = None) -> np.ndarray:
        return probs_from_logits(self.target_logits, settings)

    def draft_table(self, settings: SamplingSettings | None = None) -> np.ndarray:
        return probs_from_logits(self.draft_logits, settings)


class CatalogueTables(RoundModel):
    """A settings/dtype bug of the catalogue: the full rule on the rows its hooks compute.

    ``keeps_bias``: the class's mechanism does not concern the logit bias, but its sampler's hooks
    rebuild their settings from scratch (written before requests had a bias), so they would drop it
    too; the hooks then run on the logits with the bias added (OpenAI / vLLM: the bias goes to the
    raw logits first), else a unit with a bias would see a second bug the class does not have."""

    def __init__(self, sampler_cls: type[ChainSampler], *, keeps_bias: bool = False) -> None:
        self.sampler = sampler_cls()
        self.name = sampler_cls.name
        self.keeps_bias = keeps_bias

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if not hasattr(pair, "target_logits"):
            return base
        bias = settings.bias_vector(base.P.shape[1]) if self.keeps_bias and settings is not None else None
        if bias is not None:
            return _catalogue_tables(
                _BiasedPair(pair, bias), settings_without(settings, "logit_bias"), base, self.sampler
            )
        return _catalogue_tables(pair, settings, base, self.sampler)


class TargetKnobMissing(RoundModel):
    """One sampling knob is not applied to the target (draft fine): the rule is exact for the
    wrong target, so the output follows p computed without that knob."""

    def __init__(self, knob: str) -> None:
        self.knob, self.name = knob, f"target_missing_{knob}"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or getattr(settings, self.knob) == getattr(settings_without(None, self.knob), self.knob):
            return base
        P = pair.target_table(settings_without(settings, self.knob))
        return Tables(P, P, base.Qs, base.Qr)


class TargetKnobsMissing(RoundModel):
    """Two sampling knobs not applied to the target (draft fine): the output follows p computed
    without them. One model per pair of knobs, each scored under its own name and ranked as the
    class ``target_missing_knobs`` with the pair as its parameter (paid log(pairs) nats)."""

    record = "target_missing_knobs"
    KNOBS = ("temperature", "top_k", "top_p", "min_p", "logit_bias")

    def __init__(self, knobs: tuple[str, ...] | None = None) -> None:
        # the record's instance (no knobs) stands for the class; its variants carry one pair each
        self.knobs = knobs or ()
        self.name = self.record if knobs is None else f"{self.record}[{'+'.join(knobs)}]"
        self.param = "knobs = " + " and ".join(self.knobs)

    def variants(self) -> list[TargetKnobsMissing]:
        """One model per pair of knobs (the round scorer scores each, paying log(pairs))."""
        return [TargetKnobsMissing(k) for k in itertools.combinations(self.KNOBS, 2)]

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None:
            return base
        alt = settings
        for knob in self.knobs:
            if getattr(settings, knob) != getattr(settings_without(None, knob), knob):
                alt = settings_without(alt, knob)
        if alt is settings:
            return base
        P = pair.target_table(alt)
        return Tables(P, P, base.Qs, base.Qr)


def _bias_times(c: float) -> Callable[[Any], Any]:
    return lambda b: tuple((i, c * v) for i, v in b) if b else None


def _when_set(value: Any) -> Callable[[Any], Any]:
    """``value`` in units that set the knob to something else (top-p off is 1, min-p off is 0)."""
    return lambda v: value if v not in (0, 1) and v != value else None


#: (knob, the wrong value in words, the wrong value given the request's (None: the unit is not
#: touched)). Grids are coarse on purpose: a value is named with the values that fit as well.
_KNOB_VALUES: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("temperature", "= 1 / T (the logits multiplied by T)", lambda t: 1 / t if t not in (0, 1) else None),
    ("temperature", "= sqrt(T)", lambda t: t**0.5 if t not in (0, 1) else None),
    ("top_k", "= 1 where the request has it off (0 read as a count)", lambda k: 1 if k == 0 else None),
    ("top_k", "= k + 1", lambda k: k + 1 if k else None),
    ("top_k", "= k - 1", lambda k: k - 1 if k > 1 else None),
    ("top_k", "= 2 k", lambda k: 2 * k if k else None),
    *(("top_p", f"= {v:g}", _when_set(v)) for v in (0.5, 0.6, 0.7, 0.9, 0.95)),
    *(("min_p", f"= {v:g}", _when_set(v)) for v in (0.02, 0.05, 0.2, 0.3)),
    ("logit_bias", "added twice", _bias_times(2.0)),
    ("logit_bias", "with its sign flipped", _bias_times(-1.0)),
    ("logit_bias", "at half its size", _bias_times(0.5)),
)


class TargetKnobValue(RoundModel):
    """One knob of the request applied at another value than the request's. By the target alone
    (the draft right): the rule is exact for that wrong target, so the output follows p at the
    wrong value. Or by both sides (the speculative path reads the knob wrong): drafts from q and
    the output from p at the wrong value. One model per (side, knob, value) of ``_KNOB_VALUES``,
    ranked as the class ``target_knob_value`` with the variant as its parameter (paid log(variants)
    nats); a variant leaves a unit whose knob it does not touch at the rule's tables."""

    record = "target_knob_value"

    def __init__(self, side: Literal["target", "both"] = "target", variant: int | None = None) -> None:
        self.side, self.variant = side, variant
        if variant is None:  # the record's instance stands for the class
            self.name, self.param = self.record, ""
            return
        knob, words, _ = _KNOB_VALUES[variant]
        who = "the target uses" if side == "target" else "draft and target use"
        self.name = f"{self.record}[{side}:{knob}:{variant}]"
        self.param = f"{who} {knob} {words}, not the request's"

    def variants(self) -> list[TargetKnobValue]:
        """One model per side and value (the round scorer scores each, paying log(variants))."""
        return [TargetKnobValue(side, i) for side in ("target", "both") for i in range(len(_KNOB_VALUES))]

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or self.variant is None or settings.is_greedy:
            return base
        knob, _, wrong = _KNOB_VALUES[self.variant]
        value = wrong(getattr(settings, knob))
        if value is None:
            return base
        alt = dataclasses.replace(settings, **{knob: value})
        P = pair.target_table(alt)
        if self.side == "target":
            return Tables(P, P, base.Qs, base.Qr)
        Q = pair.draft_table(alt)
        return Tables(P, P, Q, Q)


class ProbabilitiesAsLogits(RoundModel):
    """Draft and target rows that are already probabilities run through the sampling pipeline as if
    they were logits (a softmax of probabilities, the truncations on those): drafts from and the
    output following that flattened law, with no zero anywhere. A round step that applies the
    settings itself, audited without ``--logits``, does this to the probability rows it is handed."""

    name = "probabilities_as_logits"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is not None and (settings.is_greedy or settings.uses_history):
            return base  # greedy is argmax-invariant; penalised units have no tables (_penalty)
        P, Q = probs_from_logits(base.P, settings), probs_from_logits(base.Qs, settings)
        return Tables(P, P, Q, Q)


class KnobIgnored(RoundModel):
    """One knob of the request is dropped on the speculative path, for draft and target alike: the
    full rule on the rows of the settings without it (drafts drawn from that draft law, the output
    follows that target law)."""

    def __init__(self, knob: str, name: str) -> None:
        self.knob, self.name = knob, name

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or getattr(settings, self.knob) == getattr(settings_without(None, self.knob), self.knob):
            return base
        alt = settings_without(settings, self.knob)
        P, Q = pair.target_table(alt), pair.draft_table(alt)
        return Tables(P, P, Q, Q)


class TargetOrder(RoundModel):
    """The target applies the sampling steps in another order (the draft in the right one)."""

    def __init__(self, name: str, order: tuple[str, ...]) -> None:
        self.name, self.order = name, order

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if not hasattr(pair, "target_logits"):
            return base
        bias = settings.bias_vector(base.P.shape[1]) if settings is not None else None
        P = pipeline(pair.target_logits if bias is None else pair.target_logits + bias, settings, self.order)
        return Tables(P, P, base.Qs, base.Qr)


class TargetTemperatureTwice(RoundModel):
    """The target's raw logits divided by the temperature before the whole pipeline (bias,
    temperature again, truncations) runs on them; the draft's pipeline runs once."""

    name = "target_temperature_twice"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or settings.is_greedy or settings.temperature == 1.0 or not hasattr(pair, "target_logits"):
            return base
        P = probs_from_logits(np.asarray(pair.target_logits) / settings.temperature, settings)
        return Tables(P, P, base.Qs, base.Qr)


class TargetTopPTwice(RoundModel):
    """The target runs the request's pipeline, then top-p once more on its renormalised result."""

    name = "top_p_applied_twice"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or settings.is_greedy or settings.top_p >= 1.0 or not hasattr(pair, "target_logits"):
            return base
        once = process_logits(pair.target_logits, settings)
        P = pipeline(once, SamplingSettings(top_p=settings.top_p), ("top_p",))
        return Tables(P, P, base.Qs, base.Qr)


class DraftQFromRawLogits(RoundModel):
    """Drafts drawn from the processed draft law; the q of the ratio and the residual the softmax
    of the draft's raw logits (no temperature, truncation or bias)."""

    name = "q_from_raw_logits"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or not hasattr(pair, "draft_logits"):
            return base
        return Tables(base.P, base.Pb, base.Qs, pair.draft_table(None))


class TemperatureInRatioOnly(RoundModel):
    """Temperature only inside the acceptance ratio: drafts, residual and bonus untempered."""

    name = "temperature_in_ratio_only"

    def tables(self, pair: Any, settings: SamplingSettings | None, base: Tables) -> Tables:
        if settings is None or settings.temperature == 1.0:
            return base
        cold = settings_without(settings, "temperature")
        P, Q = pair.target_table(cold), pair.draft_table(cold)
        return Tables(P, P, Q, Q, {"Phot": base.P, "Qhot": base.Qr})

    def accept(self, c: Chunk) -> np.ndarray:
        if "Phot" not in c.extra:
            return super().accept(c)
        return ratio(c.at(c.extra["Phot"]), c.at(c.extra["Qhot"]))


# -- acceptance -------------------------------------------------------------------------------
class AlwaysAccept(RoundModel):
    name = "always_accept"

    def accept(self, c: Chunk) -> np.ndarray:
        return np.ones(c.X.shape)


class UniformZero(RoundModel):
    """u = 0: every draft with p(x) > 0 is kept."""

    name = "u_const_zero"

    def accept(self, c: Chunk) -> np.ndarray:
        return (c.at(c.P) > 0).astype(float)


class ZeroGuard(RoundModel):
    """A division guard reads p(x) = 0 as ratio 1: drafts the target forbids are kept."""

    name = "zero_guard_accepts"

    def accept(self, c: Chunk) -> np.ndarray:
        px = c.at(c.P)
        return np.where(px > 0, ratio(px, c.at(c.Qr)), 1.0)


class InvertedRatio(RoundModel):
    """Keep with probability min(1, q(x)/p(x)) (0 when p(x) = 0)."""

    name = "inverted_ratio"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        return np.where(px > 0, ratio(qx, px), 0.0)


class OrAccept(RoundModel):
    """Keep if the target's own draw equals x OR u q < p: 1 - (1 - p(x)) (1 - min(1, p/q))."""

    name = "or_accept"

    def accept(self, c: Chunk) -> np.ndarray:
        px = c.at(c.P)
        out: np.ndarray = 1 - (1 - px) * (1 - ratio(px, c.at(c.Qr)))
        return out


class OffByOneTargetRow(RoundModel):
    """The ratio reads the next position's target row: min(1, p_{j+1}(x_j) / q_j(x_j))."""

    name = "off_by_one_target_row"

    def accept(self, c: Chunk) -> np.ndarray:
        n, g = c.X.shape
        nxt = np.take_along_axis(c.P[:, 1:], c.X[:, :, None], axis=2)[:, :, 0]
        return ratio(nxt, c.at(c.Qr))


class SameUniform(RoundModel):
    """One acceptance uniform for every position: kept through j iff u < min_{i<=j} r_i, so
    A_j = min_{i<=j} r_i / min_{i<j} r_i."""

    name = "same_uniform_all_positions"

    def accept(self, c: Chunk) -> np.ndarray:
        r = ratio(c.at(c.P), c.at(c.Qr))
        m = np.minimum.accumulate(r, axis=1)
        prev = np.concatenate([np.ones((len(r), 1)), m[:, :-1]], axis=1)
        return np.where(prev > 0, m / np.where(prev > 0, prev, 1.0), 0.0)


def _draft_interval(c: Chunk) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) [n, g]: the id-order CDF interval of q_s that drew each draft token."""
    lo, hi = cdf_bounds(c.Qs.reshape(-1, c.Qs.shape[-1]))
    x = c.X.reshape(-1)
    i = np.arange(len(x))
    return lo[i, x].reshape(c.X.shape), hi[i, x].reshape(c.X.shape)


class DraftUniformForAcceptance(RoundModel):
    """The uniform that drew x by inverse CDF of q is reused for the acceptance test: given x,
    u ~ U(C(x-), C(x)), so A = |[C(x-), C(x)) cap [0, r)| / q(x)."""

    name = "draft_uniform_reused_for_acceptance"

    def accept(self, c: Chunk) -> np.ndarray:
        lo, hi = _draft_interval(c)
        r = ratio(c.at(c.P), c.at(c.Qr))
        width = np.clip(np.minimum(hi, r) - lo, 0.0, None)
        return np.where(hi > lo, width / np.where(hi > lo, hi - lo, 1.0), 0.0)


class SharedNoise(DraftUniformForAcceptance):
    """One uniform draws the draft, tests it and draws the replacement: given a rejection,
    u ~ U(max(C(x-), r), C(x)) drives the residual's inverse CDF."""

    name = "shared_noise"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        lo, hi = _draft_interval(c)
        r = ratio(c.at(c.P), c.at(c.Qr))
        w = residual(c.P[rows, j], c.Qr[rows, j])
        a, b = cdf_bounds(w)
        return interval_law(a, b, np.maximum(lo[rows, j], r[rows, j]), hi[rows, j])


class ReuseAcceptUniform(RoundModel):
    """The acceptance uniform drives the residual's inverse CDF: given a rejection u ~ U(r, 1)."""

    name = "reuse_u_for_residual"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        r = ratio(c.at(c.P), c.at(c.Qr))[rows, j]
        w = residual(c.P[rows, j], c.Qr[rows, j])
        a, b = cdf_bounds(w)
        return interval_law(a, b, r, np.ones_like(r))


# -- replacement ------------------------------------------------------------------------------
class Replacement(RoundModel):
    """The replacement drawn from another law f(p, q) of the stopping position."""

    def __init__(self, name: str, law: RowLaw) -> None:
        self.name, self.law = name, law

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = c.P[rows, j], c.Qr[rows, j]
        return normalise(self.law(p, q), p)


def _softmax_rows(w: np.ndarray) -> np.ndarray:
    z = np.exp(w - w.max(-1, keepdims=True))
    out: np.ndarray = z / z.sum(-1, keepdims=True)
    return out


def unnormalised_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(p - q)+ searched with u in [0, 1): the missing mass 1 - sum lands on the last id."""
    w: np.ndarray = np.maximum(p - q, 0.0)
    w[:, -1] += np.clip(1.0 - w.sum(-1), 0.0, None)
    return w


class ResidualSwitch(RoundModel):
    """The replacement law switches on the residual mass m = sum (p - q)+: to q when m < t
    ('draft ~ target') or to p when m > t ('draft useless'); t is fitted on a grid."""

    GRID = (0.05, 0.1, 0.3, 0.5)

    def __init__(self, name: str, fallback: Literal["p", "q"], below: bool) -> None:
        self.name, self.fallback, self.below, self.t = name, fallback, below, 0.1

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = c.P[rows, j], c.Qr[rows, j]
        m = np.maximum(p - q, 0.0).sum(-1, keepdims=True)
        hit = m < self.t if self.below else m > self.t
        return np.where(hit, q if self.fallback == "q" else p, residual(p, q))


class DedupGreedyRatio(RoundModel):
    """Argmax drafts, the ratio with the draft's q, and p without x as the replacement."""

    name = "topk_candidate_with_draft_ratio"

    def draft_law(self, c: Chunk) -> np.ndarray:
        return _one_hot_argmax(c.Qs)

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p = c.P[rows, j].copy()
        p[np.arange(len(rows)), c.X[rows, j]] = 0.0
        return normalise(p, c.P[rows, j])


def _one_hot_argmax(rows: np.ndarray) -> np.ndarray:
    out = np.zeros_like(rows)
    np.put_along_axis(out, np.argmax(rows, -1)[..., None], 1.0, axis=-1)
    return out


class ArgmaxDraft(RoundModel):
    name = "argmax_draft_soft_q"

    def draft_law(self, c: Chunk) -> np.ndarray:
        return _one_hot_argmax(c.Qs)


class DraftsUnconditioned(RoundModel):
    """Every draft drawn from the first position's row q(. | prefix); ratios use the right rows."""

    name = "drafts_unconditioned"

    def draft_law(self, c: Chunk) -> np.ndarray:
        return np.repeat(c.Qs[:, :1], c.Qs.shape[1], axis=1)


class RecycledDrafts(RoundModel):
    """Drafts left over after a rejection are proposed again in the next round."""

    name = "recycled_drafts"

    def draft_law(self, c: Chunk) -> np.ndarray:
        law = c.Qs.copy()
        has = c.spare >= 0
        hot = np.zeros_like(law)
        np.put_along_axis(hot, np.maximum(c.spare, 0)[..., None], 1.0, axis=-1)
        out: np.ndarray = np.where(has[..., None], hot, law)
        return out


# -- bonus ------------------------------------------------------------------------------------
class BonusPreviousRow(RoundModel):
    name = "bonus_from_previous_row"

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        out: np.ndarray = c.P[rows, -2]
        return out


class BonusFromQ(RoundModel):
    """The bonus is one more draft sample, from q at the bonus position."""

    name = "bonus_from_q"

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return normalise(c.Qb[rows], c.Pb[rows])


class BonusArgmax(RoundModel):
    name = "bonus_argmax"

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return _one_hot_argmax(c.Pb[rows])


# -- round structure --------------------------------------------------------------------------
class RejectOneLate(RoundModel):
    """The rejected draft is emitted, then its replacement: a round that truly kept m drafts
    shows k = min(m + 1, g). So A'_0 = 1, A'_j = a_{j-1}; a final token at k < g is the
    replacement of position k - 1; at k = g a mix of that and the bonus."""

    name = "reject_one_late"

    def accept(self, c: Chunk) -> np.ndarray:
        a = super().accept(c)
        return np.concatenate([np.ones((len(a), 1)), a[:, :-1]], axis=1)

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        jj = np.maximum(j - 1, 0)
        return super().replaced(c, jj, rows)

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        g = c.X.shape[1]
        a = super().accept(c)[rows, g - 1][:, None]
        out: np.ndarray = a * c.Pb[rows] + (1 - a) * super().replaced(c, np.full(len(rows), g - 1), rows)
        return out


class BonusAfterRejection(RoundModel):
    """The bonus is appended after the loop even when it broke at a rejection: a rejected round
    emits its replacement and one token more (non-standard, one token after its departure from
    the drafts); the standard rounds are the ones that kept every draft. The rate of rejected
    rounds is fitted per unit (the non-standard share)."""

    name = "bonus_after_rejection"

    def __init__(self) -> None:
        self.t = 0.5

    def fit(self, ev: RoundEvidence) -> None:
        seen = (ev.y >= 0) & ~ev.mismatch
        self.t = float(np.clip((~ev.standard[seen]).mean() if seen.any() else 0.5, 1e-3, 1 - 1e-3))

    def accept(self, c: Chunk) -> np.ndarray:
        return np.ones(c.X.shape)

    def nonstandard(self, ev: RoundEvidence) -> np.ndarray:
        return np.full(len(ev.k), self.t)

    def one_token_tail(self, ev: RoundEvidence) -> np.ndarray:
        return np.full(len(ev.k), 1 - 1e-6)


class ReplacementDroppedAfterAccepts(RoundModel):
    """At a rejection after m >= 1 kept drafts the round ends at them, without a replacement
    (only a rejection at the first position is replaced). Such a round reads as m - 1 drafts kept
    and a final token equal to the next draft, x_{m-1}: with a_j = min(1, p/q) and c_m their
    cumulative product, P(k = m) = c_m (1 - a_{m+1}) + [m = 0] (1 - a_0) for m <= g - 2, none at
    g - 1, c_{g-1} at g; the final token at m >= 1 is x_m, at 0 a mix of x_0 and the residual."""

    name = "replacement_dropped_after_accepts"

    def _laws(self, c: Chunk) -> tuple[np.ndarray, np.ndarray]:
        a = ratio(c.at(c.P), c.at(c.Qr))
        n, g = a.shape
        cp = np.cumprod(a, axis=1)
        law = np.zeros((n, g + 1))
        law[:, : g - 1] = cp[:, : g - 1] * (1 - a[:, 1:])
        direct = 1 - a[:, 0]  # a rejection at the first position: replaced as the rule says
        law[:, 0] += direct
        law[:, g] = cp[:, g - 1]
        hazard = continuation(law)
        w0 = np.where(law[:, 0] > 0, direct / np.where(law[:, 0] > 0, law[:, 0], 1.0), 1.0)
        return hazard, w0

    def accept(self, c: Chunk) -> np.ndarray:
        if c.X.shape[1] < 2:
            return super().accept(c)
        return self._laws(c)[0]

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        res = super().replaced(c, j, rows)
        if c.X.shape[1] < 2:
            return res
        w0 = self._laws(c)[1][rows]
        own = np.zeros_like(res)
        own[np.arange(len(rows)), c.X[rows, j]] = 1.0
        w = np.where(j == 0, w0, 0.0)[:, None]
        out: np.ndarray = w * res + (1 - w) * own
        return out


class ContinueAfterRejection(RoundModel):
    """Verification goes on after a rejection: every round emits g + 1 tokens, and a block is
    standard only when each position emitted its draft (kept, or replaced by itself)."""

    name = "continue_after_rejection"

    def accept(self, c: Chunk) -> np.ndarray:
        return np.ones(c.X.shape)

    def nonstandard(self, ev: RoundEvidence) -> np.ndarray:
        # Each round is non-standard unless all g positions emitted their drafts; rounds are
        # long, so most are: 1/2 is a deliberately uninformative rate for the event itself.
        return np.full(len(ev.k), 0.5)

    def reaches_last(self, ev: RoundEvidence) -> np.ndarray:
        return np.full(len(ev.k), 1 - 1e-6)  # every round goes on to the last draft


class StateMismatch(RoundModel):
    """A verification pass on another prefix than the true one: after a rejection (a cache not
    rolled back: right after it, and at a fitted rate t in the later rounds of the sequence, where a
    stale slot may persist), or at a flat rate t (KV block boundary: about 1/16; a cache keyed on
    the position only: most rounds); t fitted in its range."""

    def __init__(
        self, name: str, when: Literal["after_rejection", "flat"], lo: float = EPS, hi: float = 1 - EPS
    ) -> None:
        self.name, self.when, self.lo, self.hi, self.t = name, when, lo, hi, lo

    def mismatch(self, ev: RoundEvidence) -> np.ndarray:
        if self.when == "after_rejection":
            later = _later_rounds(ev)
            return np.where(ev.prev_rejected, 1 - 1e-3, np.where(later, self.t, EPS))
        return np.full(len(ev.k), self.t)

    def fit(self, ev: RoundEvidence) -> None:
        if self.when == "after_rejection":
            later = _later_rounds(ev)
            rate = float(ev.mismatch[later].mean()) if later.any() else 0.0
        else:
            rate = float(ev.mismatch.mean()) if len(ev.mismatch) else 0.0
        self.t = float(np.clip(rate, self.lo, self.hi))


class TargetContextWindow(RoundModel):
    """The target sees only the last W tokens (a rotating or sliding-window cache): every round
    whose prefix is longer than W is verified on another prefix than the true one, and none
    before; W fitted on a grid of powers of two (the likeliest, ties to the largest)."""

    name = "target_context_window"
    GRID_W = tuple(2**i for i in range(4, 14))

    def __init__(self) -> None:
        self.w = self.GRID_W[-1]
        self.param = ""  # the window of the units that show it (the smallest, if they differ)
        self._seen: list[int] = []

    def _rate(self, ev: RoundEvidence, w: int) -> np.ndarray:
        if ev.prefix_len is None:
            return np.full(len(ev.k), EPS)
        return np.where(ev.prefix_len > w, 1 - 1e-3, EPS)

    def fit(self, ev: RoundEvidence) -> None:
        def ll(w: int) -> float:
            p = self._rate(ev, w)
            return float(np.where(ev.mismatch, np.log(p), np.log1p(-p)).sum())

        self.w = max(reversed(self.GRID_W), key=ll)
        if ev.mismatch.any():
            self._seen.append(self.w)
            self.param = f"W = {min(self._seen)}"

    def mismatch(self, ev: RoundEvidence) -> np.ndarray:
        return self._rate(ev, self.w)


class StateNotReset(RoundModel):
    """State kept from the previous sequence: a sequence whose first round was verified on another
    prefix (the old context) stays on it until its state is reset (a cache that fills up starts
    over) and clean from then on; one that started clean stays clean. The share of sequences that
    start on the old context and the per-round rate of that reset are fitted."""

    name = "state_not_reset"

    def __init__(self) -> None:
        self.t, self.reset = 0.5, 1e-6

    def mismatch(self, ev: RoundEvidence) -> np.ndarray:
        if ev.first_round is None:
            return np.full(len(ev.k), self.t)
        first = ev.first_round == np.arange(len(ev.k))
        started_stale = ev.mismatch[ev.first_round]
        stale = np.where(_clean_before(ev), EPS, 1 - self.reset)
        return np.where(first, self.t, np.where(started_stale, stale, EPS))

    def fit(self, ev: RoundEvidence) -> None:
        if ev.first_round is None:
            return
        firsts = np.unique(ev.first_round)
        self.t = float(np.clip(ev.mismatch[firsts].mean(), EPS, 1 - EPS))
        at_risk = ev.mismatch[ev.first_round] & (ev.first_round != np.arange(len(ev.k))) & ~_clean_before(ev)
        rate = float((~ev.mismatch[at_risk]).mean()) if at_risk.any() else 0.0
        self.reset = float(np.clip(rate, 1e-6, 0.1))


def _clean_before(ev: RoundEvidence) -> np.ndarray:
    """[R] an earlier round of the same sequence was verified on the true prefix."""
    assert ev.first_round is not None, "sequence links are known"
    R = len(ev.k)
    key = ev.first_round
    order = np.lexsort((np.arange(R), key))
    clean = (~ev.mismatch[order]).astype(np.int64)
    cum = np.cumsum(clean)
    first = np.r_[True, key[order][1:] != key[order][:-1]]
    base = np.maximum.accumulate(np.where(first, cum - clean, 0))
    out = np.empty(R, dtype=bool)
    out[order] = (cum - clean - base) > 0
    return out


def _float16_grid() -> tuple[np.ndarray, np.ndarray]:
    """Every float16 value a float64 uniform on [0, 1) rounds to, with its probability."""
    g = np.arange(0, 0x3C01, dtype=np.uint16).view(np.float16)  # 0 .. 1.0 inclusive
    edges = np.r_[0.0, (g[1:].astype(np.float64) + g[:-1]) / 2, 1.0]
    return g, np.diff(edges)


class Float16Arithmetic(RoundModel):
    """The kernel casts p and q to float16: the ratio, the acceptance uniform, the residual and its
    cumulative sum are all half precision, and the inverse CDF clamps to the last id. Acceptance is
    P(fp16(u) < fp16(p(x)) / fp16(q(x))); a replacement or bonus is the token whose fp16 cumulative
    interval holds fp16(fp16(u) * total), so ids past the last one with mass can be emitted (when
    fp16(u) rounds to 1) and small masses are lost in the sum. Exact over the float16 grid of u."""

    name = "float16_probabilities"

    def __init__(self) -> None:
        self.grid, self.mass = _float16_grid()
        # P(fp16(u) < r) for each float16 value r in [0, 1]: the mass of the grid below it
        self.below = np.r_[0.0, np.cumsum(self.mass)[:-1]]

    def accept(self, c: Chunk) -> np.ndarray:
        h = np.float16
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = c.at(c.P).astype(h) / c.at(c.Qr).astype(h)
        r = np.nan_to_num(r.astype(np.float64), nan=float(NAN_KEEP[0]) * 2.0, posinf=2.0)
        idx = np.searchsorted(self.grid.astype(np.float64), np.minimum(r, 1.0), side="left")
        return np.where(r > 1.0, 1.0, self.below[np.minimum(idx, len(self.below) - 1)])

    def _inverse_cdf_law(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """[n, V] law of the clamped fp16 inverse-CDF token over the weights fp16(max(p - q, 0)):
        token k < V - 1 is emitted when cum[k - 1] <= t < cum[k], t = fp16(fp16(u) * cum[-1])."""
        h = np.float16
        w = np.maximum(p.astype(h) - q.astype(h), h(0))
        empty = w.sum(axis=1, dtype=h) <= 0
        w[empty] = p[empty].astype(h)
        cum = np.cumsum(w, axis=1, dtype=h)
        n, V = w.shape
        below = np.empty((n, V))
        mass_below = np.r_[0.0, np.cumsum(self.mass)]  # mass of the first i grid values
        # t = fp16(fp16(u) * total) depends on the row through its float16 total only: rows that
        # share a total (a few hundred values) share one sorted search
        totals, group = np.unique(cum[:, -1], return_inverse=True)
        for i, total in enumerate(totals):
            rows = np.nonzero(group == i)[0]
            t = (self.grid * total).astype(np.float64)  # sorted: the grid is, and rounding keeps the order
            below[rows] = mass_below[np.searchsorted(t, cum[rows].astype(np.float64), side="left")]  # P(t < cum[k])
        law = np.diff(below, axis=1, prepend=0.0)
        law[:, -1] = 1.0 - below[:, -2] if V > 1 else 1.0
        return law

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._inverse_cdf_law(c.P[rows, j], c.Qr[rows, j])

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return self._inverse_cdf_law(c.Pb[rows], np.zeros_like(c.Pb[rows]))


def _later_rounds(ev: RoundEvidence) -> np.ndarray:
    """[R] rounds after an earlier (not the previous) rejection in their sequence."""
    earlier = ev.earlier_rejected if ev.earlier_rejected is not None else np.zeros(len(ev.k), dtype=bool)
    out: np.ndarray = earlier & ~ev.prev_rejected
    return out


# -- the replacement laws of the Replacement models (f(p, q) of the stopping position's rows)
def softmaxed_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(p - q)+ renormalised by a softmax (over probabilities), not by its sum."""
    return _softmax_rows(np.maximum(p - q, 0.0))


def target_row(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return p


def draft_row(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return q


def swapped_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """max(0, q - p): the residual's operands swapped."""
    out: np.ndarray = np.maximum(q - p, 0.0)
    return out


def unclipped_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """|p - q|: the residual not clipped at zero."""
    out: np.ndarray = np.abs(p - q)
    return out
