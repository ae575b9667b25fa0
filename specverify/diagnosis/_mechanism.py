"""Mechanism families: a FAIL explained by one fitted choice per part of the round, not by a name.

A named class changes one part of the rule the way one bug did. Bugs users write vary the same
parts in other ways (the previous row instead of the next, the draft's row instead of the
target's, a comparison instead of a coin), so a list of names lags them. The round's events factor
by part (``_score``): each draft depends on the draft law only, each acceptance on the acceptance
test, each replacement on the replacement law, each bonus on the bonus law. A *mechanism* is one
option per part, and its log-likelihood is the sum of each option's log-likelihood on its own
events, so the best mechanism is fitted part by part instead of over the product of the families.
Every part whose option is not the rule's pays log(options + 1) nats, the price of the choice (as a
grid parameter pays log(grid)); the mechanism is then held to the same rule as a class: it beats
the target law by ``min_llr`` nats and explains ``min_explained`` of the deviation on the cells.

Families (options besides the rule, which each part keeps when no option pays for itself):

    draft        argmax q; q of the first position's row; left-over drafts proposed again (classes);
                 q truncated to its top k ids or top-p set while the ratio uses the whole q
    acceptance   the target row of the next / previous position (before position 0: the row of the
                 token before the round); the draft row of the next / previous (clamped or wrapped
                 as qs[i - 1] wraps) / first / last position (one reused buffer), q(x) = 0 keeping
                 or rejecting, 0 / 0 keeping or not; the draft row's
                 maximum for q(x); a guard rejecting q(x) = 0; min(1, q/p); keep iff p >= q; keep
                 with probability p(x); the first draft untested; u < log p - log q; the target's
                 argmax kept without a coin; the first or every draft kept untested after a round that
                 kept every draft or after one that ended at a rejection (state between rounds);
                 target rows on a context that holds the drafts twice (also in the residual and the
                 bonus, each its own part);
                 (p + c)/(q + c) (c = 1: log1p) and p / max(q, c), c on grids; the ratio of the rows
                 sorted in descending order, read at x; typical
                 acceptance (Medusa's threshold min(eps, delta exp(-H(p))), eps and delta on a grid);
                 the kept count as the number of passed tests, to the second rejection, argmin of
                 the tests, sum(cumsum(tests) == arange(gamma)), argmax of the tests (the first
                 kept), one past the last kept, argmin guarded by any() for all(), or one draft short (every test
                 drawn, the count law enumerated); Barker's
                 p / (p + q); keep iff p/q >= t and min(1, p/t) (t on grids); a confident draft
                 (q(x) >= t) kept untested; the ratio read at the draft row's or the target row's top
                 token or at the previous draft; the block's product of ratios for every draft;
                 relaxed top-k acceptance (k, delta on a grid); the ratio read at the token id j
                 (the loop index); always keep; u = 0; ... (classes)
    replacement  p; q; (q - p)+; |p - q|; softmax((p - q)+); (p - q)+ unnormalised; p or q when the
                 residual mass is small / large (classes); the residual of the next / previous
                 position's target row or of the next / first / last / wrapped previous draft row; the
                 residual's argmax; p without the rejected draft; p / q renormalised; max(p - q, c);
                 p of the next row at the last position; the rank of the residual draw read as an id
    bonus        p of the previous row; q; argmax p (classes); the residual (p - q)+ at the bonus row,
                 or (p - 1/V)+ (a uniform placeholder row);
                 softmax(p); the rank of the draw read as an id

Shapes with a fitted parameter (a scale, a floor or a power on the ratio, mixtures and tempered
laws) are in ``_fitted``; each pays log(grid size) nats besides the part's price. A replacement's
or a bonus's weights as a product of powers and masks of the rows' own quantities, coefficients
fitted by maximum likelihood, are in ``_loglinear``; each freed coefficient pays (1/2) log(n). The
acceptance test as min(1, C p(x)^a / q(x)^b), (a, b, C) fitted together on a grid, is in
``_ratio_law``. Class models that change one part only (no tables, no structure) are options of
that part; the others (shared noise, float16 arithmetic, state, settings) stay whole classes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from ._bug_models import _softmax_rows
from ._evidence import CONTEXTS
from ._models import AFTER_FULL, AFTER_REJECTION, Chunk, RoundModel, continuation, normalise, ratio, residual

__all__ = ["SelfFitted", "Option", "Mechanism", "family_models", "options_by_part", "fit_mechanism", "PARTS", "HOOKS"]

#: the parts of a round a mechanism chooses for, with the hook that computes each part's law
HOOKS = {"draft": "draft_law", "acceptance": "accept", "replacement": "replaced", "bonus": "bonus"}
PARTS = tuple(HOOKS)
_WHOLE = (
    "tables",
    "nonstandard",
    "mismatch",
    "one_token_tail",
    "reaches_last",
    "fit",
)  # hooks that make a model a whole class


class _Family(RoundModel):
    """A family member: scored beside the classes, never named as a class."""

    family_only = True
    words = ""
    check = ""


class SelfFitted(_Family):
    """A member that fits its own numbers to its part's events (``_loglinear``, ``_ratio_law``):
    ``_score.fit_on_grid`` hands it every chunk (``collect``), then asks for the fit (``solve``)."""

    def collect(self, c: Chunk, y: np.ndarray) -> None:
        raise NotImplementedError

    def solve(self) -> None:
        raise NotImplementedError


def _rows_at(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """A[i, j, X[i, j]] for rows A [n, g, V] and drafts X [n, g]."""
    out: np.ndarray = np.take_along_axis(A, X[:, :, None], axis=2)[:, :, 0]
    return out


def _draft_rows_shifted(c: Chunk, shift: int | str | None, *, wrap: bool = False) -> np.ndarray:
    """[n, g, V] the draft rows of position j + shift (clamped at the first row, or with ``wrap``
    taken modulo gamma as Python's ``qs[i - 1]`` does; the bonus position's draft row after the
    last); ``shift=None``: the first position's row everywhere; ``'last'``: the last draft's row
    everywhere (every row appended as one reused buffer)."""
    full = np.concatenate([c.Qr, c.Qb[:, None]], axis=1)
    g = c.X.shape[1]
    if isinstance(shift, str):  # 'last'
        idx = np.full(g, g - 1, dtype=np.int64)
    elif shift is None:
        idx = np.zeros(g, dtype=np.int64)
    else:
        idx = (np.arange(g) + shift) % g if wrap else np.clip(np.arange(g) + shift, 0, g)
    out: np.ndarray = full[:, idx]
    return out


_WHICH: dict[int | str | None, str] = {1: "next", -1: "previous", None: "first", "last": "last"}


def _target_rows_previous(c: Chunk) -> np.ndarray:
    """[n, g, V] the target row of position j - 1; at position 0 the row of the token before the
    round (the prefix minus its last token), or row 0 where the evidence does not show it."""
    before = c.P[:, :1] if c.Pm1 is None else c.Pm1[:, None]
    out: np.ndarray = np.concatenate([before, c.P[:, : c.X.shape[1] - 1]], axis=1)
    return out


class DraftTruncated(_Family):
    """Drafts drawn from q truncated to its top k ids (or its top-p set), renormalised, while the
    ratio and the residual use the whole q: the drafter reports the row before its own truncation
    (huggingface/transformers#47932: top-k / top-p drafters returning raw logits as q)."""

    VALUES = (("top_k", 2), ("top_k", 3), ("top_k", 5), ("top_k", 10), ("top_k", 20), ("top_p", 0.8), ("top_p", 0.9))

    def __init__(self, kind: str, value: float) -> None:
        self.kind, self.value = kind, value
        self.name = f"draft_sampled_{kind}({value:g})_reports_full_q"
        where = f"its top {value:g} ids" if kind == "top_k" else f"its top-p {value:g} set"
        self.words = (
            f"drafts are drawn from q restricted to {where} and renormalised, but the ratio and the residual "
            "use the whole q"
        )
        self.check = (
            "the q the drafter returns: the law it sampled from (after its own top-k / top-p), not the row before"
        )

    def draft_law(self, c: Chunk) -> np.ndarray:
        return c.mapped("Qs", self._truncated)

    def _truncated(self, q: np.ndarray) -> np.ndarray:
        if self.kind == "top_k":
            k = min(int(self.value), q.shape[-1])  # a vocabulary of k ids or fewer: the whole row
            keep = q >= -np.partition(-q, k - 1, axis=-1)[..., k - 1 : k]  # ties at the k-th kept
        else:
            order = np.argsort(-q, axis=-1, kind="stable")
            sq = np.take_along_axis(q, order, axis=-1)
            keep = np.empty_like(q, dtype=bool)
            np.put_along_axis(keep, order, np.cumsum(sq, axis=-1) - sq < self.value, axis=-1)  # mass before < p
        w = np.where(keep & (q > 0), q, 0.0)
        out: np.ndarray = w / w.sum(-1, keepdims=True)
        return out


class TargetRowPrevious(_Family):
    name = "target_row_previous"
    words = "the acceptance test reads the previous position's target row: min(1, p_{j-1}(x_j) / q_j(x_j))"
    check = "the index of the target row the ratio reads for draft j (row j, the row after the first j drafts)"

    def accept(self, c: Chunk) -> np.ndarray:
        return ratio(_rows_at(_target_rows_previous(c), c.X), c.at(c.Qr))


class DraftRowShift(_Family):
    """The ratio reads another position's draft row: a draft that row could not have drawn (q = 0)
    is kept (p / 0 = inf) or rejected (a guard ``q > 0 and ...``), as the code happens to treat it;
    with ``nan_keeps`` a draft the target forbids too (0 / 0) is kept, as Python's min(1.0, nan) does
    (the unit's own convention cannot tell: its right rows never give 0 / 0)."""

    def __init__(
        self, shift: int | str | None, *, zero_keeps: bool, wrap: bool = False, nan_keeps: bool = False
    ) -> None:
        self.shift, self.zero_keeps, self.wrap, self.nan_keeps = shift, zero_keeps, wrap, nan_keeps
        which = _WHICH[shift]
        self.name = f"draft_row_{which}" + ("_wrapped" if wrap else "") + ("" if zero_keeps else "_guarded")
        self.name += "_nan_kept" if nan_keeps else ""
        row = {None: "q_0", "last": "q_{gamma-1}"}.get(shift) if not isinstance(shift, int) else f"q_{{j{shift:+d}}}"
        self.words = f"the acceptance test reads the {which} position's draft row: min(1, p_j(x_j) / {row}(x_j))"
        if wrap:
            self.words += ", the first position reading the last row (a negative index)"
        if nan_keeps:
            self.words += "; where both are 0 the draft is kept (min(1, 0 / 0) reads as 1)"
        self.check = "the index of the draft row the ratio reads for draft j (the row that drew it)"

    def accept(self, c: Chunk) -> np.ndarray:
        qx = _rows_at(_draft_rows_shifted(c, self.shift, wrap=self.wrap), c.X)
        px = c.at(c.P)
        r = ratio(px, qx)
        if self.nan_keeps:
            r = np.where((qx <= 0) & (px <= 0), 1.0, r)
        return r if self.zero_keeps else np.where(qx > 0, r, 0.0)


class DraftMaxRatio(_Family):
    name = "ratio_over_draft_max"
    words = "the acceptance test divides by the draft row's maximum instead of q(x): min(1, p(x) / max q)"
    check = "the draft probability gathered for the ratio: q at the drafted id, not the row's max"

    def accept(self, c: Chunk) -> np.ndarray:
        return ratio(c.at(c.P), np.broadcast_to(c.Qr.max(-1), c.X.shape))


class DeterministicAccept(_Family):
    name = "accept_iff_p_ge_q"
    words = "acceptance is deterministic: a draft is kept iff p(x) >= q(x) (no uniform)"
    check = "the acceptance test: compare a uniform with p(x) / q(x), not p(x) with q(x)"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = (c.at(c.P) >= c.at(c.Qr)).astype(np.float64)
        return out


class AcceptWithP(_Family):
    name = "accept_with_prob_p"
    words = "a draft is kept with probability p(x), not min(1, p(x) / q(x))"
    check = "the acceptance probability: the ratio p(x) / q(x), not p(x) alone"

    def accept(self, c: Chunk) -> np.ndarray:
        return c.at(c.P)


class TypicalAcceptance(_Family):
    """Medusa's typical acceptance: keep iff p(x) > min(eps, delta exp(-H(p))) (not exact)."""

    VALUES = tuple((e, d) for e in (0.01, 0.03, 0.09, 0.3) for d in (0.1, 0.3, 0.5))

    def __init__(self, eps: float, delta: float) -> None:
        self.eps, self.delta = eps, delta
        self.name = f"typical_acceptance(eps={eps:g},delta={delta:g})"
        self.words = (
            f"a draft is kept iff p(x) > min({eps:g}, {delta:g} exp(-H(p))): typical acceptance (Medusa), "
            "which is not lossless"
        )
        self.check = "the acceptance test: the speculative-sampling coin u < p(x) / q(x), not an entropy threshold"

    def accept(self, c: Chunk) -> np.ndarray:
        P = c.P[:, : c.X.shape[1]]
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.sum(np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0), -1)
        out: np.ndarray = (c.at(c.P) > np.minimum(self.eps, self.delta * np.exp(-h))).astype(np.float64)
        return out


class FirstDraftUnverified(_Family):
    name = "first_draft_unverified"
    words = "the first draft is kept without a test (taken as the last committed token); the later ones are tested"
    check = "where the verification pass starts: the last committed token, then every draft, each tested"

    def accept(self, c: Chunk) -> np.ndarray:
        a = ratio(c.at(c.P), c.at(c.Qr))
        a[:, 0] = 1.0
        return a


class TriggeredUntested(_Family):
    """State carried from one round to the next: after a round that kept every draft (a "hot streak")
    or after one that ended at a rejection, the next round keeps its first draft, or every draft,
    without the test; other rounds take min(1, p/q). (Adaptive heuristics and flags not cleared.)"""

    TRIGGERS = {
        AFTER_FULL: ("full_acceptance", "a round that kept every draft"),
        AFTER_REJECTION: ("rejection", "a round that ended at a rejection"),
    }

    def __init__(self, trigger: int, scope: str) -> None:
        self.trigger, self.scope = trigger, scope
        key, what = self.TRIGGERS[trigger]
        drafts = "its first draft" if scope == "first" else "every draft"
        self.name = f"{scope}_draft_untested_after_{key}"
        self.words = f"after {what}, the next round keeps {drafts} without the test; other rounds are tested"
        self.check = (
            "state carried from one round to the next: every draft is tested in every round, whatever the last "
            "round did"
        )

    def accept(self, c: Chunk) -> np.ndarray:
        a = ratio(c.at(c.P), c.at(c.Qr))
        if c.after is not None:
            hit = c.after == self.trigger
            a[hit, : 1 if self.scope == "first" else None] = 1.0
        return a


class TargetContext(_Family):
    """Target rows computed on a wrong context (``_evidence.CONTEXTS``: the drafts appended to the
    prefix twice), read by one part: the ratio, the residual or the bonus. Context pairs only (rows by
    context); elsewhere the rule's law."""

    def __init__(self, context: str, part: str) -> None:
        self.context, self.part = context, part
        self.name = f"{part}_target_rows_on_{context}"
        reads = {
            "acceptance": "the ratio reads",
            "replacement": "the residual reads",
            "bonus": "the bonus is drawn from",
        }
        self.words = f"{reads[part]} target rows computed on {CONTEXTS[context]}"
        self.check = (
            "the context handed to the verification pass: the committed prefix, then the drafts before each row"
        )

    def _rows(self, c: Chunk) -> np.ndarray | None:
        if c.ctx is None or c.source is None:
            return None
        return c.source[0].P[c.ctx[self.context]]  # [n, g + 1, V]

    def _accept(self, c: Chunk) -> np.ndarray:
        P = self._rows(c)
        return ratio(c.at(c.P if P is None else P), c.at(c.Qr))

    def _replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        P = self._rows(c)
        return residual((c.P if P is None else P)[rows, j], c.Qr[rows, j])

    def _bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        P = self._rows(c)
        return c.Pb[rows] if P is None else P[rows, c.X.shape[1]]

    @classmethod
    def on(cls, context: str, part: str) -> TargetContext:
        """The member that changes ``part`` only (``part_of`` reads the hooks a class overrides)."""
        hook = HOOKS[part]
        sub = type(f"{cls.__name__}_{part}", (cls,), {hook: getattr(cls, "_" + hook)})
        return sub(context, part)


class GuardedRatio(_Family):
    name = "ratio_guarded_at_q_zero"
    words = "a draft its draft row gives no mass is rejected (a guard q(x) > 0 before the ratio)"
    check = "the q the ratio reads: the row each draft was drawn from (under it, q(x) > 0 for every draft)"

    def accept(self, c: Chunk) -> np.ndarray:
        qx = c.at(c.Qr)
        return np.where(qx > 0, ratio(c.at(c.P), qx), 0.0)


class InvertedRatio(_Family):
    """min(1, q(x) / p(x)); a draft the target forbids (p = 0) is kept (q / 0 = inf) or, behind a
    guard, rejected."""

    def __init__(self, *, zero_keeps: bool) -> None:
        self.zero_keeps = zero_keeps
        self.name = "inverted_ratio_family" + ("" if zero_keeps else "_guarded")
        self.words = "the acceptance ratio is upside down: min(1, q(x) / p(x))"
        self.check = "the acceptance ratio: p(x) / q(x), target over draft"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.minimum(1.0, qx / np.where(px > 0, px, 1.0))
        return np.where(px > 0, r, float(self.zero_keeps))


class LogRatioNoExp(_Family):
    name = "log_ratio_against_uniform"
    words = "the uniform is compared with the log-ratio: keep iff u < log p(x) - log q(x) (log u intended)"
    check = "the acceptance test in log space: log(u) < log p(x) - log q(x), or u < exp(log-ratio)"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.log(np.where(px > 0, px, 1.0)) - np.log(np.where(qx > 0, qx, 1.0))
        out: np.ndarray = np.where(px > 0, np.clip(lr, 0.0, 1.0), 0.0)
        return np.where((qx <= 0) & (px > 0), 1.0, out)


class ArgmaxOrRatio(_Family):
    name = "argmax_or_ratio"
    words = "a draft equal to the target's argmax is kept without its coin; the others take min(1, p/q)"
    check = "an exact-match fast path (x == argmax p) OR-ed with the acceptance test: the coin must decide alone"

    def accept(self, c: Chunk) -> np.ndarray:
        g = c.X.shape[1]
        top = np.argmax(c.P[:, :g], -1) == c.X
        return np.where(top, 1.0, ratio(c.at(c.P), c.at(c.Qr)))


class SmoothedRatio(_Family):
    """min(1, (p + c) / (q + c)): additive smoothing of the ratio (c on a grid)."""

    VALUES = (1e-4, 1e-3, 1e-2, 1.0)  # c = 1: log1p(p) - log1p(q) taken for log p - log q

    def __init__(self, c: float) -> None:
        self.c = c
        self.name = f"smoothed_ratio(c={c:g})"
        self.words = (
            f"the ratio is smoothed: min(1, (p(x) + {c:g}) / (q(x) + {c:g})), so forbidden drafts are kept at times"
        )
        if c == 1.0:
            self.words += " (log1p(p) - log1p(q) taken for log p - log q)"
        self.check = "the acceptance ratio: p(x) / q(x) exactly, no additive constant"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.minimum(1.0, (c.at(c.P) + self.c) / (c.at(c.Qr) + self.c))
        return out


class ClampedDenominator(_Family):
    """min(1, p / max(q, c)): the ratio's denominator clamped from below (c on a grid)."""

    VALUES = (1e-3, 1e-2, 1e-1)

    def __init__(self, c: float) -> None:
        self.c = c
        self.name = f"ratio_denominator_clamped(c={c:g})"
        self.words = f"the ratio divides by max(q(x), {c:g}): drafts the draft gave little mass are kept too rarely"
        self.check = "the ratio's denominator: q(x) itself (a draft drawn from q has q(x) > 0), no clamp"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.minimum(1.0, c.at(c.P) / np.maximum(c.at(c.Qr), self.c))
        return out


class BarkerAcceptance(_Family):
    name = "barker_acceptance"
    words = "a draft is kept with probability p(x) / (p(x) + q(x)) (Barker's MCMC rule), not min(1, p(x) / q(x))"
    check = "the acceptance probability: min(1, p(x) / q(x)) (Metropolis), not p / (p + q)"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        s = px + qx
        out: np.ndarray = np.where(s > 0, px / np.where(s > 0, s, 1.0), 0.0)
        return out


class ConstantThreshold(_Family):
    """Keep iff p(x) / q(x) >= t: a constant where the uniform belongs (t on a grid; t = 1 is the
    family ``accept_iff_p_ge_q``)."""

    VALUES = (0.1, 0.25, 0.5, 0.75, 0.9)

    def __init__(self, t: float) -> None:
        self.t = t
        self.name = f"constant_threshold(t={t:g})"
        self.words = f"acceptance is deterministic: a draft is kept iff p(x) / q(x) >= {t:g} (no uniform)"
        self.check = "the acceptance threshold: a fresh uniform per draft, not a constant"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = (ratio(c.at(c.P), c.at(c.Qr)) >= self.t).astype(np.float64)
        return out


class AcceptOverThreshold(_Family):
    """min(1, p(x) / t): the target-only rule with an acceptance threshold t < 1 (t on a grid)."""

    VALUES = (0.25, 0.5, 0.75)

    def __init__(self, t: float) -> None:
        self.t = t
        self.name = f"accept_p_over_threshold(t={t:g})"
        self.words = f"a draft is kept with probability min(1, p(x) / {t:g}) (the one-hot rule, its threshold below 1)"
        self.check = "the acceptance threshold of the one-hot rule (exact only at 1) or the ratio p(x) / q(x)"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.minimum(1.0, c.at(c.P) / self.t)
        return out


class CoinLaw(_Family):
    """The coin compared with min(1, p/q) is not one uniform: a product of two or their mean. Kept
    with probability F(r), F the coin's distribution function at r = p(x)/q(x). (The minimum of two
    is the catalogued ``or_accept``: a draft kept when either of two coins passes.)"""

    LAWS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
        "product": ("u1 * u2, a product of two uniforms", lambda r: r * (1 - np.log(np.where(r > 0, r, 1.0)))),
        "mean": (
            "(u1 + u2) / 2, the mean of two uniforms",
            lambda r: np.where(r <= 0.5, 2 * r * r, 1 - 2 * (1 - r) ** 2),
        ),
    }

    def __init__(self, law: str) -> None:
        self.law = law
        what, self._cdf = self.LAWS[law]
        self.name = f"coin_{law}_of_two_uniforms"
        self.words = f"the coin is {what}, not one uniform: a draft is kept with probability F(min(1, p/q)), F its law"
        self.check = "the coin of each acceptance test: one fresh uniform on [0, 1), compared with p(x) / q(x)"

    def accept(self, c: Chunk) -> np.ndarray:
        r = ratio(c.at(c.P), c.at(c.Qr))
        out: np.ndarray = np.clip(self._cdf(r), 0.0, 1.0)
        return out


class ThresholdOverride(_Family):
    """The ratio test overridden at a threshold on one side's probability of the draft: kept untested
    where q(x) >= t (a confident drafter) or p(x) >= t (SGLang's ``threshold_single`` below 1), or
    rejected untested where q(x) < t or p(x) < t (llama.cpp's draft cut ``p_min`` applied by the
    verifier); t on a grid."""

    VALUES = {
        ("keep", "q"): (0.3, 0.4, 0.5, 0.7, 0.9),
        ("keep", "p"): (0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
        ("reject", "q"): (0.01, 0.02, 0.05, 0.1, 0.2),
        ("reject", "p"): (0.01, 0.02, 0.05, 0.1, 0.2),
    }

    def __init__(self, action: str, side: str, t: float) -> None:
        self.action, self.side, self.t = action, side, t
        if action == "keep":
            who = "the draft model gives q(x)" if side == "q" else "the target gives p(x)"
            self.name = f"confident_draft_kept(t={t:g})" if side == "q" else f"keep_untested_at_p(t={t:g})"
            self.words = f"a draft {who} >= {t:g} is kept untested; the others take min(1, p/q)"
            self.check = "a confidence shortcut before the acceptance test: every draft takes the coin"
        else:
            self.name = f"reject_untested_at_{side}(t={t:g})"
            self.words = f"a draft with {side}(x) < {t:g} is rejected without its test; the others take min(1, p/q)"
            self.check = "a probability cut in the verifier: it may shape what is drafted, never what is accepted"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        r = ratio(px, qx)
        v = px if self.side == "p" else qx
        return np.where(v >= self.t, 1.0, r) if self.action == "keep" else np.where(v < self.t, 0.0, r)


class AdditiveTolerance(_Family):
    """min(1, p/q + d): a tolerance added to the ratio (d on a grid)."""

    VALUES = (0.01, 0.03, 0.1, 0.3)

    def __init__(self, d: float) -> None:
        self.d = d
        self.name = f"ratio_plus_tolerance(d={d:g})"
        self.words = f"a draft is kept with probability min(1, p(x) / q(x) + {d:g}): a tolerance added to the ratio"
        self.check = "the acceptance test: u < p(x) / q(x) exactly; a tolerance for rounding makes it lossy"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.minimum(1.0, ratio(c.at(c.P), c.at(c.Qr)) + self.d)
        return out


class RatioAtOtherToken(_Family):
    """min(1, p_j(t) / q_j(t)) at another token t than the draft x_j: the draft row's top token,
    the target row's top token, or the previous draft (the verify pass's input ids, one behind)."""

    TOKENS = {
        "draft_top": "the draft row's most likely token",
        "target_top": "the target row's most likely token",
        "previous_draft": "the previous draft (the first position its own)",
        "position": "the token id equal to the position index j (the loop index used as the token)",
    }

    def __init__(self, token: str) -> None:
        self.token = token
        self.name = f"ratio_at_{token}_token"
        self.words = f"the acceptance ratio is read at {self.TOKENS[token]}, not at the drafted token"
        self.check = "the token id the ratio gathers p and q at: the draft x_j itself"

    def _tokens(self, c: Chunk) -> np.ndarray:
        g = c.X.shape[1]
        if self.token == "draft_top":
            out: np.ndarray = np.argmax(c.Qr, -1)
        elif self.token == "target_top":
            out = np.argmax(c.P[:, :g], -1)
        elif self.token == "position":
            out = np.broadcast_to(np.minimum(np.arange(g), c.Qr.shape[-1] - 1), c.X.shape)
        else:
            out = np.concatenate([c.X[:, :1], c.X[:, :-1]], axis=1)
        return out

    def accept(self, c: Chunk) -> np.ndarray:
        t = self._tokens(c)
        return ratio(_rows_at(c.P[:, : c.X.shape[1]], t), _rows_at(c.Qr, t))


class RatioOfSortedRows(_Family):
    """min(1, p_sorted(x) / q_sorted(x)): p and q sorted in descending order, then gathered at the
    draft's id (the (x + 1)-th largest of each, not p(x) and q(x))."""

    name = "ratio_of_sorted_rows"
    words = (
        "the ratio is gathered at index x of the rows sorted in descending order: the (x + 1)-th largest p over "
        "the (x + 1)-th largest q, not p(x) / q(x)"
    )
    check = "the rows the ratio gathers at x: the rows in id order, not after a sort (top-p / top-k's sorted copy)"

    def accept(self, c: Chunk) -> np.ndarray:
        g = c.X.shape[1]
        ps, qs = -np.sort(-c.P[:, :g], axis=-1), -np.sort(-c.Qr, axis=-1)
        return ratio(_rows_at(ps, c.X), _rows_at(qs, c.X))


class BlockRatioEveryDraft(_Family):
    name = "block_ratio_every_draft"
    words = "every draft is tested against min(1, prod_j p_j(x_j) / q_j(x_j)), the whole block's ratio"
    check = "the ratio each draft's coin compares with: its own p_j(x_j) / q_j(x_j), not the block's product"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        with np.errstate(divide="ignore", invalid="ignore"):  # inf * 0 (a forbidden and an impossible draft): 0
            r = np.where(qx > 0, px / np.where(qx > 0, qx, 1.0), np.where(px > 0, np.inf, 0.0))
            block = np.minimum(1.0, np.prod(r, -1, keepdims=True))
        return np.broadcast_to(np.nan_to_num(block, nan=0.0), px.shape).copy()


class RelaxedTopK(_Family):
    """Keep deterministically iff x is among p's k most likely tokens and log p(x) >= log max p -
    delta (TensorRT-LLM's relaxed acceptance, k and delta on a grid); a lossy rule."""

    VALUES = tuple((k, d) for k in (1, 3, 10) for d in (0.3, 0.6, 1.0, 2.0))

    def __init__(self, k: int, delta: float) -> None:
        self.k, self.delta = k, delta
        self.name = f"relaxed_topk(k={k},delta={delta:g})"
        self.words = (
            f"a draft is kept without a coin iff it is among the target's {k} most likely tokens and "
            f"log p(x) >= log max p - {delta:g} (relaxed acceptance), which is not lossless"
        )
        self.check = "the acceptance test: the coin u < p(x) / q(x), not a top-k closeness rule"

    def accept(self, c: Chunk) -> np.ndarray:
        P = c.P[:, : c.X.shape[1]]
        px = c.at(c.P)
        rank = (px[..., None] < P).sum(-1)  # tokens strictly more likely than x
        with np.errstate(divide="ignore"):
            close = np.log(px) >= np.log(P.max(-1)) - self.delta
        out: np.ndarray = ((rank < self.k) & close & (px > 0)).astype(np.float64)
        return out


class HoistedRatio(_Family):
    name = "ratio_of_first_position_for_every_draft"
    words = "every draft is tested against the first position's ratio min(1, p_0(x_0) / q_0(x_0)), computed once"
    check = "where the ratio is computed: inside the loop over drafts, from draft j's own p_j(x_j) and q_j(x_j)"

    def accept(self, c: Chunk) -> np.ndarray:
        first = ratio(c.at(c.P), c.at(c.Qr))[:, :1]
        return np.repeat(first, c.X.shape[1], axis=1)


class AcceptMinPQ(_Family):
    name = "accept_with_prob_min_p_q"
    words = "a draft is kept with probability min(p(x), q(x)), not min(1, p(x) / q(x))"
    check = "the acceptance probability: the ratio p(x) / q(x) capped at 1, not the smaller of the two"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.minimum(c.at(c.P), c.at(c.Qr))
        return out


class AcceptRowRate(_Family):
    name = "accept_with_row_acceptance_rate"
    words = "every draft is kept with its position's acceptance rate sum_v min(p, q)(v), whatever the drafted token"
    check = "the acceptance probability of draft j: min(1, p_j(x_j) / q_j(x_j)) at the drafted token, not a row average"

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = np.minimum(c.P[:, : c.X.shape[1]], c.Qr).sum(-1)
        return out


class ExponentialThresholdFlipped(_Family):
    name = "exponential_test_flipped"
    words = (
        "the log-space test is written E < log(p(x) / q(x)) with E ~ Exp(1): a draft is kept with probability "
        "1 - q(x) / p(x) where p > q, never otherwise (the exact form is E > log(q(x) / p(x)))"
    )
    check = "the log-space acceptance test: keep iff E > log(q(x) / p(x)), E ~ Exp(1) (or log u < log p - log q)"

    def accept(self, c: Chunk) -> np.ndarray:
        px, qx = c.at(c.P), c.at(c.Qr)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: np.ndarray = np.where(px > 0, np.clip(1.0 - qx / np.where(px > 0, px, 1.0), 0.0, 1.0), 0.0)
        return out


class LastDraftUnverified(_Family):
    name = "last_draft_unverified"
    words = (
        "the last draft is kept without its test (its rejection takes the all-accepted branch: the draft, then a bonus)"
    )
    check = "the all-accepted branch's condition: every one of the gamma drafts passed (n == gamma, not n >= gamma - 1)"

    def accept(self, c: Chunk) -> np.ndarray:
        a = ratio(c.at(c.P), c.at(c.Qr))
        a[:, -1] = 1.0
        return a


def _rows_law(c: Chunk, j: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) rows [m, V] of the stopping position of the rounds ``rows``."""
    return c.P[rows, j], c.Qr[rows, j]


class ReplacementFromPWhenForbidden(_Family):
    name = "replacement_from_p_after_a_forbidden_draft"
    words = "a draft the target forbids (p(x) = 0) ends the block as if never drafted: its token is drawn from p"
    check = "a draft with p(x) = 0: rejected by the test like any other, its replacement drawn from (p - q)+"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = _rows_law(c, j, rows)
        forbidden = p[np.arange(len(rows)), c.X[rows, j]] <= 0
        out: np.ndarray = np.where(forbidden[:, None], p, residual(p, q))
        return out


class ReplacementOtherWeights(_Family):
    """The replacement drawn from another weight of p and q than (p - q)+, normalised."""

    LAWS: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
        "min_p_q": ("min(p, q) normalised (the overlap, not what p has beyond it)", np.minimum),
        "p_times_one_minus_q": (
            "p (1 - q) normalised, not (p - q)+ (tokens with p < q keep mass)",
            lambda p, q: p * (1 - q),
        ),
    }

    def __init__(self, law: str) -> None:
        self.law = law
        self.name = f"replacement_from_{law}"
        words, self._weights = self.LAWS[law]
        self.words = f"the replacement is drawn from {words}"
        self.check = "the residual's weights: max(p - q, 0), normalised by their sum"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = _rows_law(c, j, rows)
        return normalise(self._weights(p, q), p)


class ResidualSoftmaxOnSupport(_Family):
    name = "replacement_softmax_on_residual_support"
    words = (
        "the replacement is softmax((p - q)+) on the residual's support: what argmax(w + Gumbel) gives, the noise "
        "added to the weights, not to their logs"
    )
    check = "the Gumbel-max draw: argmax(log w + G), the noise added to log-weights; or a plain draw from (p - q)+"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = _rows_law(c, j, rows)
        w = np.maximum(p - q, 0.0)
        return normalise(np.where(w > 0, np.exp(w), 0.0), p)


def _count_laws(a: np.ndarray, count: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """[n, g] the continuation probabilities A_j = P(K > j | K >= j) of a count K = count(tests),
    the tests independent with pass probabilities a [n, g] (every test drawn, as batched kernels
    do): the law of K, P(K = m) = prod_{j<m} A_j (1 - A_m), in the form the scorer reads."""
    n, g = a.shape
    tests = ((np.arange(2**g)[:, None] >> np.arange(g)) & 1).astype(bool)  # [2^g, g] every pattern
    onehot = np.eye(g + 1)[count(tests)]  # [2^g, g + 1]
    pattern = np.prod(np.where(tests[None], a[:, None, :], 1.0 - a[:, None, :]), -1)  # [n, 2^g]
    return continuation(pattern @ onehot)  # the law [n, g + 1] of K in the scorer's form


def _one_short(t: np.ndarray) -> np.ndarray:
    head = t[:, :-1]
    out: np.ndarray = np.where(head.all(-1), head.shape[1], np.argmin(head, -1))
    return out


class CountRule(_Family):
    """Every draft tested with its coin, the number kept computed another way than the length of
    the accepted prefix."""

    RULES: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
        "sum": (
            "the number of kept drafts is the number of passed tests (accepted.sum()), not the accepted prefix",
            lambda t: t.sum(-1),
        ),
        "to_second_rejection": (
            "the count runs to the second rejection ((~accepted).cumsum() <= 1): the first rejected draft is kept",
            lambda t: ((~t).cumsum(-1) <= 1).sum(-1),
        ),
        "argmin": (
            "the first rejection is found with argmin(accepted), which is 0 when every draft passed",
            lambda t: np.argmin(t, -1),
        ),
        "one_short": ("the verify loop stops one draft short: the last draft is never tested nor emitted", _one_short),
        "argmax_of_accepts": (
            "the kept count is argmax(accepted), the first accepted draft, not the first rejected one",
            lambda t: np.where(t.all(-1), t.shape[-1], np.argmax(t, -1)),
        ),
        "past_last_accept": (
            "the kept count is one past the last accepted draft (trailing rejections trimmed), not the accepted "
            "prefix: rejected drafts before an accepted one are kept",
            lambda t: np.where(t.any(-1), t.shape[-1] - np.argmax(t[..., ::-1], -1), 0),
        ),
        "guard_any": (
            "the first rejection is argmin(accepted) guarded by accepted.any() where not accepted.all() belongs: "
            "a block of rejections is kept whole, a block of acceptances gives 0",
            lambda t: np.where(t.any(-1), np.argmin(t, -1), t.shape[-1]),
        ),
        "prod": (
            "the kept count is gamma * prod(accepted) (np.prod written for np.cumprod(...).sum()): every draft when "
            "all tests pass, none otherwise",
            lambda t: t.shape[-1] * t.all(-1),
        ),
        "cumsum_from_zero": (
            "the kept count is sum(cumsum(accepted) == arange(gamma)), off by one (arange from 1 is the prefix): 0 "
            "after a full acceptance",
            lambda t: (np.cumsum(t, -1) == np.arange(t.shape[-1])).sum(-1),
        ),
    }

    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.name = f"accepted_count_{rule}"
        self.words, self._count = self.RULES[rule]
        self.check = "the accepted count: the length of the accepted prefix, (~accepted).cumsum() < 1 summed"

    def accept(self, c: Chunk) -> np.ndarray:
        if c.X.shape[1] > 10:  # 2^g patterns: beyond this the family is not scored (never chosen)
            return np.zeros(c.X.shape)
        return _count_laws(ratio(c.at(c.P), c.at(c.Qr)), self._count)


class ReplacementWithoutDraft(_Family):
    name = "replacement_p_without_draft"
    words = "the replacement is drawn from p with the rejected draft zeroed (the one-hot rule's residual), not (p - q)+"
    check = "the replacement law after a min(1, p/q) test: (p - q)+ normalised, the draft probabilities' residual"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        w = c.P[rows, j].copy()
        w[np.arange(len(rows)), c.X[rows, j]] = 0.0
        return normalise(w, c.P[rows, j])


class ReplacementRatio(_Family):
    name = "replacement_p_over_q"
    words = "the replacement is drawn from p / q renormalised (softmax(log p - log q): a log-space 'subtraction')"
    check = "the residual in probability space: max(p - q, 0), not log p - log q"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p, q = c.P[rows, j], c.Qr[rows, j]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where((q > 0) & (p > 0), p / np.where(q > 0, q, 1.0), 0.0)
        return normalise(w, p)


class ResidualFloor(_Family):
    """max(p - q, c) normalised: every token keeps replacement mass (c on a grid)."""

    VALUES = (1e-4, 1e-3, 1e-2)

    def __init__(self, c: float) -> None:
        self.c = c
        self.name = f"residual_floor(c={c:g})"
        self.words = f"the residual is clamped at {c:g} instead of 0, so every token (forbidden ones too) can replace"
        self.check = "the residual's clamp: max(p - q, 0)"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return normalise(np.maximum(c.P[rows, j] - c.Qr[rows, j], self.c), c.P[rows, j])


class ReplacementNextRowAtLast(_Family):
    name = "last_position_from_next_row"
    words = "at the last draft's position the final token is drawn from p of the row after it (the bonus row)"
    check = "the verify loop's bound: every draft is tested before the bonus row is used"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        last = j == c.X.shape[1] - 1
        out: np.ndarray = np.where(
            last[:, None], c.P[rows, np.minimum(j + 1, c.X.shape[1])], residual(c.P[rows, j], c.Qr[rows, j])
        )
        return out


class ResidualShift(_Family):
    """The replacement's residual built from another position's target or draft row."""

    def __init__(self, side: str, shift: int | str | None = 1, *, wrap: bool = False) -> None:
        self.side, self.shift, self.wrap = side, shift, wrap
        which = _WHICH[shift]
        self.name = f"residual_{side}_row_{which}" + ("_wrapped" if wrap else "")
        self.words = f"the replacement is drawn from (p - q)+ with the {side} row of the {which} position"
        if wrap:
            self.words += " (the last row at the first position)"
        self.check = "the row index of the residual at the first rejection (the rejected draft's own position)"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if self.side == "target" and self.shift == -1:
            return residual(_target_rows_previous(c)[rows, j], c.Qr[rows, j])
        if self.side == "target":
            return residual(c.P[rows, j + 1], c.Qr[rows, j])
        q = _draft_rows_shifted(c, self.shift, wrap=self.wrap)[rows, j]
        return residual(c.P[rows, j], q)


class ResidualArgmax(_Family):
    name = "replacement_residual_argmax"
    words = "the replacement is the argmax of (p - q)+, not a sample from it"
    check = "the replacement draw: sample from the normalised residual, not its argmax"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        w = residual(c.P[rows, j], c.Qr[rows, j])
        one = np.zeros_like(w)
        one[np.arange(len(rows)), np.argmax(w, -1)] = 1.0
        return one


def _rank_law(p: np.ndarray) -> np.ndarray:
    """[n, V] the law of the *rank* of a token drawn from p (rank 0: the most likely), read as an
    id: what a sort-then-sample draw returns when the sorted positions are not mapped back."""
    out: np.ndarray = -np.sort(-p, axis=-1)
    return out


class ReplacementRankAsId(_Family):
    name = "replacement_rank_as_id"
    words = "the replacement is the position of the residual draw in the sorted row, not its token id"
    check = "after a sort-then-sample draw: map the sorted position back to the token id"

    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return _rank_law(residual(c.P[rows, j], c.Qr[rows, j]))


class BonusRankAsId(_Family):
    name = "bonus_rank_as_id"
    words = "the bonus token is the position of the draw in the sorted row of p, not its token id"
    check = "after a sort-then-sample draw: map the sorted position back to the token id"

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return _rank_law(c.Pb[rows])


class BonusSoftmaxOfProbs(_Family):
    name = "bonus_softmax_of_probabilities"
    words = "the bonus token is drawn from softmax(p): probabilities passed where logits belong"
    check = "the bonus row handed to the sampler: probabilities sampled directly, or logits softmaxed once"

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return _softmax_rows(c.Pb[rows])


class BonusResidual(_Family):
    """The bonus drawn from a residual (p - q)+ at the bonus position, q the draft's row there or a
    uniform placeholder (a path without draft probabilities fills the undrafted position)."""

    check = "the bonus draw after every draft was kept: from p of the last row, not a residual"

    def __init__(self, against: str = "draft") -> None:
        self.against = against
        self.name = "bonus_from_residual" if against == "draft" else "bonus_from_residual_against_uniform"
        self.words = (
            "the bonus token is drawn from (p - q)+ at the bonus position, as if its draft had been rejected"
            if against == "draft"
            else "the bonus token is drawn from (p - 1/V)+: a residual against a uniform placeholder row for the "
            "undrafted bonus position"
        )

    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        p = c.Pb[rows]
        q = c.Qb[rows] if self.against == "draft" else 1.0 / p.shape[-1]
        out: np.ndarray = normalise(np.maximum(p - q, 0.0), p)
        return out


# long: the list of every family member, one line each
def family_models() -> list[RoundModel]:
    """Fresh family members (scored with the classes, named only through a mechanism); the fitted
    ones (``_fitted``) before their fit."""
    from ._fitted import fitted_family_models  # it builds on this module's helpers
    from ._loglinear import loglinear_family_models
    from ._ratio_law import GeneralisedRatio

    return [
        TargetRowPrevious(),
        *(DraftTruncated(kind, v) for kind, v in DraftTruncated.VALUES),
        FirstDraftUnverified(),
        *(TriggeredUntested(t, s) for t in TriggeredUntested.TRIGGERS for s in ("first", "every")),
        *(TargetContext.on(ctx, part) for ctx in CONTEXTS for part in ("acceptance", "replacement", "bonus")),
        GuardedRatio(),
        *(DraftRowShift(s, zero_keeps=z) for s in (1, -1, None, "last") for z in (True, False)),
        *(DraftRowShift(s, zero_keeps=True, nan_keeps=True) for s in (1, -1, None, "last")),
        *(DraftRowShift(-1, zero_keeps=z, wrap=True) for z in (True, False)),
        DraftMaxRatio(),
        DeterministicAccept(),
        AcceptWithP(),
        *(TypicalAcceptance(e, d) for e, d in TypicalAcceptance.VALUES),
        *(InvertedRatio(zero_keeps=z) for z in (True, False)),
        LogRatioNoExp(),
        ArgmaxOrRatio(),
        *(SmoothedRatio(v) for v in SmoothedRatio.VALUES),
        *(ClampedDenominator(v) for v in ClampedDenominator.VALUES),
        BarkerAcceptance(),
        *(ConstantThreshold(t) for t in ConstantThreshold.VALUES),
        *(AcceptOverThreshold(t) for t in AcceptOverThreshold.VALUES),
        *(ThresholdOverride(a, side, t) for (a, side), ts in ThresholdOverride.VALUES.items() for t in ts),
        *(AdditiveTolerance(d) for d in AdditiveTolerance.VALUES),
        *(CoinLaw(law) for law in CoinLaw.LAWS),
        *(RatioAtOtherToken(t) for t in RatioAtOtherToken.TOKENS),
        RatioOfSortedRows(),
        BlockRatioEveryDraft(),
        *(RelaxedTopK(k, d) for k, d in RelaxedTopK.VALUES),
        HoistedRatio(),
        AcceptMinPQ(),
        AcceptRowRate(),
        ExponentialThresholdFlipped(),
        LastDraftUnverified(),
        *(CountRule(r) for r in CountRule.RULES),
        ResidualShift("target"),
        ResidualShift("target", -1),
        ResidualShift("draft"),
        ResidualShift("draft", None),
        ResidualShift("draft", "last"),
        ResidualShift("draft", -1, wrap=True),
        ReplacementWithoutDraft(),
        ReplacementRatio(),
        *(ResidualFloor(v) for v in ResidualFloor.VALUES),
        ReplacementNextRowAtLast(),
        ResidualArgmax(),
        ReplacementFromPWhenForbidden(),
        *(ReplacementOtherWeights(w) for w in ReplacementOtherWeights.LAWS),
        ResidualSoftmaxOnSupport(),
        ReplacementRankAsId(),
        BonusRankAsId(),
        BonusSoftmaxOfProbs(),
        BonusResidual(),
        BonusResidual("uniform"),
        *fitted_family_models(),
        *loglinear_family_models(),
        GeneralisedRatio(),
    ]


@dataclasses.dataclass(frozen=True)
class Option:
    """One way a part of the round is computed: the model whose hook gives its law, in words."""

    part: str
    model: RoundModel
    words: str
    check: str


def _hooks_overridden(m: RoundModel) -> set[str]:
    return {h for h in (*HOOKS.values(), *_WHOLE) if getattr(type(m), h) is not getattr(RoundModel, h)}


def part_of(m: RoundModel) -> str | None:
    """The one part a model changes, or None when it changes several or a whole-class hook."""
    hooks = _hooks_overridden(m)
    parts = [p for p, h in HOOKS.items() if h in hooks]
    return parts[0] if len(parts) == 1 and not hooks & set(_WHOLE) else None


def options_by_part(models: Sequence[RoundModel]) -> dict[str, list[Option]]:
    """{part: options}: every model (class or family) that changes exactly one part; a class model
    is described by its record (the mechanism's first sentence, what to check), a family member by
    its own words."""
    from ._classes import CLASSES

    out: dict[str, list[Option]] = {p: [] for p in PARTS}
    for m in models:
        part = part_of(m)
        if part is None:
            continue
        if isinstance(m, _Family):
            out[part].append(Option(part, m, m.words, m.check))
            continue
        rec = CLASSES[m.name]
        first = rec.mechanism.split(". ")[0].rstrip(".")
        first = first[:1].lower() + first[1:] if first[1:2].islower() else first  # inside a sentence
        out[part].append(Option(part, m, f"{first} (class {m.name})", rec.check))
    return out


#: options of a part whose log-likelihoods lie within this many nats of the best are reported beside
#: it (a likelihood ratio under e^3 = 20: the evidence does not tell them apart), at most MAX_TIES
TIE_NATS, MAX_TIES = 3.0, 3


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """The fitted option of every part that left the rule: gain in nats net of its price."""

    chosen: tuple[tuple[Option, float], ...]  # (option, net gain in nats), in part order
    #: per chosen part, the other options within TIE_NATS of it: the evidence does not tell them apart
    ties: tuple[tuple[Option, ...], ...]
    basis: str = "fitted part by part; no catalogued class fits"

    @property
    def name(self) -> str:
        return "mechanism(" + ", ".join(f"{o.part}={o.model.name}" for o, _ in self.chosen) + ")"

    @property
    def llr(self) -> float:
        return float(sum(g for _, g in self.chosen))

    def alternatives(self) -> dict[str, list[str]]:
        """{part: names of the options as likely as the chosen one on this evidence}."""
        return {o.part: [t.model.name for t in tied] for (o, _), tied in zip(self.chosen, self.ties) if tied}

    def words(self) -> str:
        out = []
        for (o, _), tied in zip(self.chosen, self.ties):
            alt = f" (or, as likely on this evidence: {'; or '.join(t.words for t in tied)})" if tied else ""
            out.append(o.words + alt)
        return "; ".join(out)

    def check(self) -> str:
        tied = [t for ts in self.ties for t in ts]
        return "; ".join(dict.fromkeys(o.check for o in [*(o for o, _ in self.chosen), *tied] if o.check))


def fit_mechanism(options: dict[str, list[Option]], kind_ll: dict[int, np.ndarray], ref: np.ndarray) -> Mechanism:
    """The best option of each part by its own events' log-likelihood (``kind_ll``: model id ->
    [len(KINDS)] summed over units; ``ref``: the rule's), kept when it pays log(options + 1)."""
    from ._score import KINDS

    chosen, ties = [], []
    for part in PARTS:
        opts = options[part]
        if not opts:
            continue
        k = KINDS.index(part)
        # a fitted member's log-likelihood is net of its grid's price (``_fitted``)
        ll = {id(o.model): float(kind_ll[id(o.model)][k]) - getattr(o.model, "price", 0.0) for o in opts}
        best = max(opts, key=lambda o: ll[id(o.model)])
        gain = ll[id(best.model)] - float(ref[k]) - math.log(len(opts) + 1)
        if gain > 0:
            chosen.append((best, gain))
            near = [o for o in opts if o is not best and ll[id(o.model)] >= ll[id(best.model)] - TIE_NATS]
            ties.append(tuple(sorted(near, key=lambda o: -ll[id(o.model)])[:MAX_TIES]))
    return Mechanism(tuple(chosen), tuple(ties))
