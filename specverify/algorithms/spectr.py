"""SpecTr's k-sequential selection (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh,
"SpecTr: Fast Speculative Decoding via Optimal Transport", NeurIPS 2023): a multi-draft node rule
that is exact on k i.i.d. drafts, with a tunable rho.

The rule. Drafts x_1..x_k are i.i.d. from the draft row q; the target row is p. With rho >= 1 write

    m(y) = min(q(y), p(y) / rho),      beta = sum_y m(y),      S = sum_{0 <= j < k} (1 - beta)^j.

For i = 1..k accept x_i with probability a(x_i) = m(x_i) / q(x_i) = min(1, p(x_i) / (rho q(x_i)))
(the first accepted draft is emitted); if none is accepted, draw y from the residual

    R(y) = p(y) - m(y) S,      sum_y R(y) = 1 - beta S = (1 - beta)^k.

Why the law is p. Each trial accepts token y with probability q(y) a(y) = m(y) and accepts nothing
with probability 1 - beta, independently across trials, so P(the output is y by acceptance) =
sum_{j < k} (1 - beta)^j m(y) = m(y) S, and P(no acceptance) = (1 - beta)^k. The residual draw adds
(1 - beta)^k R(y) / (1 - beta)^k = p(y) - m(y) S: the total is p(y). That needs R >= 0, the role of
rho. Since m(y) <= p(y) / rho, R >= 0 whenever S <= rho. S increases with rho (beta decreases), up
to S <= k, and rho beta = sum_y min(rho q(y), p(y)) increases; so the valid rho form an interval
[rho*, k], where rho* = 1 when S(1) <= 1 (k = 1, or p = q) and otherwise solves S(rho) = rho, i.e.
1 - (1 - beta(rho))^k = rho beta(rho) (the paper's choice). Below rho* the residual has a negative
entry (on any y with rho q(y) >= p(y) > 0; such a y exists in all but degenerate cases) and the rule
is not exact for any residual: the acceptances alone already put more than p(y) on y.

Acceptance. P(some draft accepted) = 1 - (1 - beta(rho))^k, largest at rho*, where it equals
rho* beta(rho*) = sum_y min(rho* q(y), p(y)) >= sum_y min(q(y), p(y)), the single-draft chain
rule's acceptance. At rho = k it can be below the chain rule's (p = q: 1 - (1 - 1/k)^k against 1).
k = 1 gives rho* = 1 and the chain rule itself. A residual draw may also coincide with a draft (R
can be positive on a drafted y), which the sequence form below counts as a match.

rho* is found by bisection in float64 (60 halvings of [1, k]; the valid end is kept), so every
form uses a valid rho; the exact forms take that float's exact value (a Fraction), checked exactly
and moved up towards k if rounding left it invalid. ``SpecTrRule(rho=...)`` takes ``"optimal"``
(rho*, per node), ``"k"`` (rho = k, always valid) or a number (valid only where >= rho*).

Forms, under the uniform contract u_accept[i] (compared with a(x_{i+1})) and u_final (the residual's
inverse-CDF draw): :func:`verify_spectr` (scalar, the executable specification, float64),
:func:`verify_spectr_batch` (numpy, vectorised over trials: the same outcome for the same uniforms,
every sum in index order), :class:`SpecTrRule` (a :class:`~.multi_draft.NodeRule`: its exact
``outcome_law`` given the drafts, Fractions or floats, so ``tree_round_law`` runs it on any tree of
i.i.d. candidates), :func:`spectr_token_law` (the output law averaged over the drafts: p for an
exact rule), :func:`spectr_acceptance` (closed form) and :func:`spectr_round_law` /
:func:`spectr_first_tokens_law` (SpecTr's sequence form: k i.i.d. draft sequences of length gamma;
at each depth the rule selects a token among the drafts still matching the output, which continue).

:data:`SPECTR_VARIANTS` holds the exact rule (rho* and rho = k) and wrong ones (negative controls):
the single-draft rule's residual norm((p - q)+) after the k-sequential acceptances, and rho = 1 with
k >= 2 (below rho*: the residual is clipped at 0 and renormalised, as an engine would).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ..dists import inverse_cdf_sample, inverse_cdf_sample_scalar
from ..errors import InvalidDraftError
from .exact_law import Model, Tokens
from .multi_draft import NodeRow, NodeRule, Outcome, Pairing, _Law, _norm, candidate_law

__all__ = [
    "SpecTrRule",
    "SPECTR",
    "SPECTR_RHO_K",
    "SPECTR_VARIANTS",
    "SPECTR_PAIRINGS",
    "BISECTION_STEPS",
    "spectr_beta",
    "spectr_geometric",
    "optimal_rho",
    "spectr_residual",
    "verify_spectr",
    "verify_spectr_batch",
    "SpecTrBatch",
    "spectr_token_law",
    "spectr_acceptance",
    "spectr_match_probability",
    "spectr_round_law",
    "spectr_first_tokens_law",
]

#: a probability or weight: a Fraction (exact arithmetic) or a float, whichever the rows hold
Weight = Any
Row = Sequence[Weight]

BISECTION_STEPS = 60


def _one(like: Weight) -> Weight:
    return like * 0 + 1


def _seq_sum(vals: Sequence[Weight]) -> Weight:
    """Sum in index order (numpy's cumsum takes the same order: the batch form agrees)."""
    total = vals[0] * 0
    for v in vals:
        total += v
    return total


def _capped(p: Row, q: Row, rho: Weight) -> list[Weight]:
    """m(y) = min(q(y), p(y) / rho)."""
    return [min(qv, pv / rho) for pv, qv in zip(p, q)]


def spectr_beta(p: Row, q: Row, rho: Weight) -> Weight:
    """beta(rho) = sum_y min(q(y), p(y) / rho): one trial's acceptance probability."""
    return _seq_sum(_capped(p, q, rho))


def spectr_geometric(beta: Weight, k: int) -> Weight:
    """S = sum_{j < k} (1 - beta)^j (k when beta = 0), by the loop the batch form runs too."""
    s, t = beta * 0, _one(beta)
    for _ in range(k):
        s = s + t
        t = t * (1 - beta)
    return s


def _valid(p: Row, q: Row, k: int, rho: Weight) -> bool:
    return bool(spectr_geometric(spectr_beta(p, q, rho), k) <= rho)


@functools.lru_cache(maxsize=4096)  # samplers and enumerations ask again and again for the same rows
def _optimal_float(p: tuple[float, ...], q: tuple[float, ...], k: int) -> float:
    if k <= 1 or _valid(p, q, k, 1.0):
        return 1.0
    lo, hi = 1.0, float(k)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if _valid(p, q, k, mid):
            hi = mid
        else:
            lo = mid
    return hi


def optimal_rho(p: Row, q: Row, k: int) -> Weight:
    """rho*: the smallest rho in [1, k] with S(rho) <= rho, to bisection precision (a valid end).
    Float rows: a float; Fraction rows: a Fraction, valid in exact arithmetic."""
    r = _optimal_float(tuple(float(v) for v in p), tuple(float(v) for v in q), k)
    if not isinstance(p[0], Fraction):
        return r
    rho, step = Fraction(r), Fraction(1, 1 << 40)
    while rho < k and not _valid(p, q, k, rho):  # rounding left it a hair below rho*
        rho, step = min(Fraction(k), rho + step), step * 2
    return rho


@dataclasses.dataclass(frozen=True)
class SpecTrRule(NodeRule):
    """SpecTr's k-sequential selection as a node rule (module docstring). ``rho``: ``"optimal"``,
    ``"k"`` or a number; ``single_draft_residual``: the residual norm((p - q)+) (wrong)."""

    rho: float | str = "optimal"
    single_draft_residual: bool = False

    def rho_for(self, p: Row, q: Row, k: int) -> Weight:
        exact = isinstance(p[0], Fraction)
        if self.rho == "optimal":
            return optimal_rho(p, q, k)
        if self.rho == "k":
            return Fraction(k) if exact else float(k)
        if isinstance(self.rho, str):
            raise ValueError(f"rho must be 'optimal', 'k' or a number >= 1, not {self.rho!r}")
        return Fraction(self.rho) if exact else float(self.rho)

    def outcome_law(self, p: NodeRow, q: NodeRow | None, cands: Sequence[int]) -> dict[Outcome, Weight]:
        if q is None:
            raise TypeError(f"{self.name} reads the draft row q; pass it")
        return self._outcome_law(list(p), list(q), cands)

    def _outcome_law(self, p: Row, q: Row, cands: Sequence[int]) -> dict[Outcome, Weight]:
        zero = p[0] * 0
        law, reach = _Law(zero), zero + 1
        rho = self.rho_for(p, q, len(cands))
        for idx, x in enumerate(cands):
            a = _accept(p[x], q[x], rho, x)
            law.add(("accept", idx), reach * a)
            reach = reach * (1 - a)
            if reach == 0:
                return law.out
        res = spectr_residual(p, q, len(cands), rho, single_draft=self.single_draft_residual)
        return law.emit_all(_norm(dict(enumerate(res))), reach)

    def verify(self, p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rng: np.random.Generator) -> Outcome:
        u = rng.random(len(cands))
        return verify_spectr(p, q, cands, [float(v) for v in u], float(rng.random()), self)


def _accept(px: Weight, qx: Weight, rho: Weight, x: int) -> Weight:
    """a(x) = min(1, p(x) / (rho q(x)))."""
    if qx <= 0:
        raise InvalidDraftError(f"draft token {x} has draft probability q = {qx}; it cannot have been drawn from q")
    den = rho * qx
    return _one(px) if px >= den else px / den


def spectr_residual(p: Row, q: Row, k: int, rho: Weight, *, single_draft: bool = False) -> list[Weight]:
    """Unnormalised residual max(p - m S, 0) (mass (1 - beta)^k when rho is valid; a negative entry,
    rho below rho*, is clipped); ``single_draft``: max(p - q, 0). All zero (rounding): p."""
    zero = p[0] * 0
    if single_draft:
        res = [max(pv - qv, zero) for pv, qv in zip(p, q)]
    else:
        s = spectr_geometric(spectr_beta(p, q, rho), k)
        res = [max(pv - mv * s, zero) for pv, mv in zip(p, _capped(p, q, rho))]
    return res if any(v > 0 for v in res) else list(p)


SPECTR = SpecTrRule("spectr", ("iid",))
SPECTR_RHO_K = SpecTrRule("spectr_rho_k", ("iid",), rho="k")
SPECTR_VARIANTS: dict[str, SpecTrRule] = {
    "spectr": SPECTR,
    "spectr_rho_k": SPECTR_RHO_K,
    "spectr_single_draft_residual": SpecTrRule("spectr_single_draft_residual", (), single_draft_residual=True),
    "spectr_rho_one": SpecTrRule("spectr_rho_one", (), rho=1.0),
}

_SOURCE = "SpecTr (Sun et al., NeurIPS 2023) k-sequential selection"
SPECTR_PAIRINGS = [
    Pairing("spectr_iid_k_seq", "iid", SPECTR, True, source=_SOURCE + ", rho*"),
    Pairing("spectr_iid_k_seq_rho_k", "iid", SPECTR_RHO_K, True, source=_SOURCE + ", rho = k"),
    Pairing(
        "spectr_single_draft_residual",
        "iid",
        SPECTR_VARIANTS["spectr_single_draft_residual"],
        False,
        source="k-sequential acceptances with the chain rule's residual (p - q)+",
    ),
    Pairing("spectr_rho_one", "iid", SPECTR_VARIANTS["spectr_rho_one"], False, source="rho = 1 < rho* for k >= 2"),
    Pairing(
        "spectr_without_replacement",
        "without_replacement",
        SPECTR,
        False,
        source="the i.i.d. rule on drafts drawn without replacement",
    ),
]


# --------------------------------------------------------------------------------------------
# the rule as an engine runs it: scalar and batch, the same outcome for the same uniforms
# --------------------------------------------------------------------------------------------
def verify_spectr(
    p: ArrayLike,
    q: ArrayLike | None,
    drafts: Sequence[int],
    u_accept: Sequence[float],
    u_final: float,
    rule: SpecTrRule = SPECTR,
) -> Outcome:
    """One node: ('accept', i) (draft i, 0-based, the first whose u_accept[i] < a(x_i)) or ('emit', y)
    (y = the residual's inverse-CDF draw at u_final). float64 arithmetic, as the batch form."""
    if q is None:
        raise TypeError(f"{rule.name} reads the draft row q; pass it")
    pf = [float(v) for v in np.asarray(p, dtype=np.float64)]
    qf = [float(v) for v in np.asarray(q, dtype=np.float64)]
    rho = rule.rho_for(pf, qf, len(drafts))
    for i, x in enumerate(drafts):
        if u_accept[i] < _accept(pf[x], qf[x], rho, int(x)):
            return ("accept", i)
    res = spectr_residual(pf, qf, len(drafts), rho, single_draft=rule.single_draft_residual)
    return ("emit", inverse_cdf_sample_scalar(res, u_final))


class SpecTrBatch(NamedTuple):
    """B nodes: ``draft_index`` [B] (the accepted draft, -1 when the residual was drawn), ``token`` [B] (the
    emitted token), ``rho`` [B] (the rho used)."""

    draft_index: np.ndarray
    token: np.ndarray
    rho: np.ndarray


def _beta_batch(p: np.ndarray, q: np.ndarray, rho: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.cumsum(np.minimum(q, p / rho[:, None]), axis=-1)[:, -1]
    return out


def _geometric_batch(beta: np.ndarray, k: int) -> np.ndarray:
    s, t = np.zeros_like(beta), np.ones_like(beta)
    for _ in range(k):
        s = s + t
        t = t * (1 - beta)
    return s


def _optimal_batch(p: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """rho* per row: the scalar's bisection, elementwise (the same floats)."""
    ones = np.ones(p.shape[0])
    if k <= 1:
        return ones
    ok1 = _geometric_batch(_beta_batch(p, q, ones), k) <= ones
    lo, hi = ones.copy(), np.full(p.shape[0], float(k))
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        good = _geometric_batch(_beta_batch(p, q, mid), k) <= mid
        hi, lo = np.where(good, mid, hi), np.where(good, lo, mid)
    out: np.ndarray = np.where(ok1, 1.0, hi)
    return out


def _rho_batch(p: np.ndarray, q: np.ndarray, k: int, rule: SpecTrRule) -> np.ndarray:
    if rule.rho == "optimal":
        return _optimal_batch(p, q, k)
    return np.full(p.shape[0], float(rule.rho_for([0.0], [0.0], k)))


def _residual_batch(p: np.ndarray, q: np.ndarray, k: int, rho: np.ndarray, rule: SpecTrRule) -> np.ndarray:
    res: np.ndarray
    if rule.single_draft_residual:
        res = np.maximum(p - q, 0.0)
    else:
        s = _geometric_batch(_beta_batch(p, q, rho), k)
        res = np.maximum(p - np.minimum(q, p / rho[:, None]) * s[:, None], 0.0).astype(np.float64)
    empty = ~(res > 0).any(axis=1)  # rounding only: fall back to p, as the scalar does
    res[empty] = p[empty]
    return res


def verify_spectr_batch(
    p: ArrayLike,
    q: ArrayLike,
    drafts: ArrayLike,
    u_accept: ArrayLike,
    u_final: ArrayLike,
    rule: SpecTrRule = SPECTR,
) -> SpecTrBatch:
    """B independent nodes: p, q [B, V] (a leading 1 broadcasts), drafts [B, k] int, u_accept [B, k],
    u_final [B]. O(B V (k + 60 k)) work with rho*: the bisection runs on every row at once."""
    x = np.asarray(drafts, dtype=np.int64)
    b, k = x.shape
    pf = np.broadcast_to(np.asarray(p, dtype=np.float64), (b, np.shape(p)[-1])).copy()
    qf = np.broadcast_to(np.asarray(q, dtype=np.float64), pf.shape).copy()
    rows = np.arange(b)[:, None]
    px, qx = pf[rows, x], qf[rows, x]
    if (qx <= 0).any():
        i, j = np.argwhere(qx <= 0)[0]
        raise InvalidDraftError(
            f"draft token {x[i, j]} (node {i}, draft {j}) has q = 0; it cannot have been drawn from q"
        )
    rho = _rho_batch(pf, qf, k, rule)
    den = rho[:, None] * qx
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(px >= den, 1.0, px / den)
    passed = np.asarray(u_accept, dtype=np.float64).reshape(b, k) < a
    first = np.argmax(passed, axis=1)
    hit = passed.any(axis=1)
    res_tok = inverse_cdf_sample(_residual_batch(pf, qf, k, rho, rule), np.asarray(u_final, dtype=np.float64))
    token = np.where(hit, x[np.arange(b), first], res_tok)
    return SpecTrBatch(np.where(hit, first, -1).astype(np.int64), token.astype(np.int64), rho)


# --------------------------------------------------------------------------------------------
# exact laws
# --------------------------------------------------------------------------------------------
def spectr_token_law(p: Row, q: Row, k: int, rule: SpecTrRule = SPECTR, mechanism: str = "iid") -> dict[int, Weight]:
    """Law of the emitted token, the k drafts drawn by ``mechanism`` from q (p exactly for an exact rule)."""
    out: dict[int, Weight] = {}
    for cands, cw in candidate_law(q, k, mechanism).items():
        for (kind, val), w in rule.outcome_law(p, q, cands).items():
            y = cands[val] if kind == "accept" else val
            out[y] = out.get(y, 0) + cw * w
    return {y: w for y, w in out.items() if w != 0}


def spectr_acceptance(p: Row, q: Row, k: int, rho: Weight) -> Weight:
    """P(some draft passes its test) = 1 - (1 - beta(rho))^k (closed form)."""
    return 1 - (1 - spectr_beta(p, q, rho)) ** k


def spectr_match_probability(p: Row, q: Row, k: int, rule: SpecTrRule = SPECTR) -> Weight:
    """P(the emitted token is one of the drafts), by enumeration: acceptances plus residual draws that
    coincide with a draft (what the sequence form continues on)."""
    total = p[0] * 0
    for cands, cw in candidate_law(q, k, "iid").items():
        for (kind, val), w in rule.outcome_law(p, q, cands).items():
            if kind == "accept" or val in cands:
                total += cw * w
    return total


def spectr_round_law(
    target: Model, draft: Model, prefix: Sequence[int], k: int, gamma: int, rule: SpecTrRule = SPECTR
) -> dict[Tokens, Weight]:
    """Exact law of the block one SpecTr round emits: k i.i.d. draft sequences of length gamma from
    ``draft``; at each depth the node rule selects a token among the next tokens of the drafts that
    still match the output (their continuations are i.i.d. given it); the drafts matching the emitted
    token go on; none left, the round ends; past depth gamma a bonus token comes from the target."""
    prefix = tuple(prefix)
    law: dict[Tokens, Weight] = {}

    def walk(path: Tokens, w: Weight, depth: int, alive: int) -> None:
        ctx = prefix + path
        p = target(ctx)
        if depth == gamma:
            for y, pv in enumerate(p):
                if pv != 0:
                    law[path + (y,)] = law.get(path + (y,), 0) + w * pv
            return
        q = draft(ctx)
        for cands, cw in candidate_law(q, alive, "iid").items():
            for (kind, val), ow in rule.outcome_law(p, q, cands).items():
                y = cands[val] if kind == "accept" else val
                left = sum(1 for c in cands if c == y)
                if left:
                    walk(path + (y,), w * cw * ow, depth + 1, left)
                else:
                    law[path + (y,)] = law.get(path + (y,), 0) + w * cw * ow

    walk((), _one(target(prefix)[0]), 0, k)
    return {b: v for b, v in law.items() if v != 0}


def spectr_first_tokens_law(
    target: Model, draft: Model, prefix: Sequence[int], k: int, gamma: int, length: int, rule: SpecTrRule = SPECTR
) -> dict[Tokens, Weight]:
    """Law of the first ``length`` tokens over repeated SpecTr rounds."""
    memo: dict[tuple[Tokens, int], dict[Tokens, Weight]] = {}

    def law_from(ctx: Tokens, need: int) -> dict[Tokens, Weight]:
        if (ctx, need) in memo:
            return memo[(ctx, need)]
        out: dict[Tokens, Weight] = {}
        for block, w in spectr_round_law(target, draft, ctx, k, gamma, rule).items():
            if len(block) >= need:
                out[block[:need]] = out.get(block[:need], 0) + w
            else:
                for rest, w2 in law_from(ctx + block, need - len(block)).items():
                    out[block + rest] = out.get(block + rest, 0) + w * w2
        memo[(ctx, need)] = out
        return out

    return law_from(tuple(prefix), length)
