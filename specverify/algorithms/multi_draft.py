"""Multi-draft and tree verification: node rules, their samplers, and their exact laws.

At a tree node the verifier knows the target row p (given the path) and k candidate children; it
must emit one token whose law is exactly p. If the token is a candidate, the walk descends into
it; otherwise the round ends. Node-wise exactness plus the chain rule gives sequence exactness,
provided the candidates' randomness is independent of the verifier's.

Candidate mechanisms (how the k children are drawn from the draft row q):

* ``iid``: k independent draws from q (SpecInfer); duplicates are possible;
* ``without_replacement``: sequential draws from q with earlier picks removed (RSD, EAGLE-1);
* ``top_k``: the k most probable draft tokens, deterministic (EAGLE-2 static/dynamic trees,
  lookahead n-gram pools, Medusa's candidates).

Node rules (``NodeRule``):

* ``rrs`` (recursive rejection sampling, SpecInfer): for i = 1..k accept x_i with probability
  min(1, p_i(x_i) / q(x_i)); on rejection p_{i+1} = norm((p_i - q)+); all rejected: draw from
  p_{k+1}. Exact for ``iid`` with duplicates kept as separate trials.
* ``rrs_without_replacement``: as ``rrs`` with q_i = q without the earlier candidates, renormalised,
  in both the ratio and the residual. Exact for ``without_replacement``.
* ``one_hot``: accept c_i with probability p_i(c_i); on rejection p_{i+1} = p_i with c_i removed,
  renormalised. Exact for any candidates that do not depend on the verifier's coins (EAGLE-2,
  lookahead); acceptance sum over tried children.
* ``target_only`` (SGLang's tree kernel): one coin u per level, siblings tried in order: accept c_i
  when u <= (sum_{j <= i} p(c_j)) / threshold_acc or p(c_i) >= threshold_single; if none, draw from
  p without the tried siblings. Exact with both thresholds at 1 and distinct siblings; lossy when a
  threshold is below 1 or siblings repeat.
* ``typical`` (Medusa's typical acceptance): accept the first candidate with
  p(c) > min(epsilon, delta exp(-H(p))); if none, draw from p. Lossy by design: its deviation from
  the target law is computed exactly (``tree_round_law`` against ``target_law``) and reported.
* ``rrs_dedup``: ``rrs`` after removing duplicate candidates (inexact; a negative control).

``PAIRINGS`` lists the (mechanism, rule) pairs engines use, with whether each is exact: for
example ``rrs`` is exact on ``iid`` candidates but not on without-replacement ones (the unadjusted
q) nor on deterministic top-k ones (the draft's ratio on a one-hot proposal, SafeAILab/EAGLE#221).

``tree_round_law`` enumerates candidate sets and verifier coins exactly (Fractions or floats), for
a tree given by its branching factors per depth.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from .exact_law import Model, Tokens

__all__ = [
    "NodeRule",
    "RecursiveRejection",
    "OneHotRule",
    "TargetOnlyRule",
    "TypicalRule",
    "NODE_RULES",
    "Pairing",
    "PAIRINGS",
    "verify_node_procedural",
    "candidate_law",
    "node_outcome_law",
    "tree_round_law",
    "tree_first_tokens_law",
    "draw_candidates",
    "typical_threshold",
]


#: a probability or weight: a Fraction (exact arithmetic) or a float, whichever the rows hold
Weight = Any
#: a probability row: a list of Fractions or floats, or a float array
NodeRow = Sequence[Weight] | np.ndarray
#: a node's outcome: ('accept', i) (descend into candidate i) or ('emit', y) (stop on token y)
Outcome = tuple[str, int]


def _norm(w: Mapping[int, Weight]) -> dict[int, Weight]:
    tot = sum(w.values())
    return {k: v / tot for k, v in w.items() if v != 0} if tot != 0 else {}


def _row(d: Mapping[int, Weight], v: int, zero: Weight) -> list[Weight]:
    return [d.get(i, zero) for i in range(v)]


# --------------------------------------------------------------------------------------------
# candidate mechanisms: exact laws (for enumeration) and samplers
# --------------------------------------------------------------------------------------------
def candidate_law(q: NodeRow, k: int, mechanism: str) -> dict[Tokens, Weight]:
    """Law of the ordered candidate tuple drawn from row q."""
    v = len(q)
    one = q[0] * 0 + 1
    if mechanism == "iid":
        support = [i for i in range(v) if q[i] != 0]
        out: dict[Tokens, Weight] = {}
        for c in itertools.product(support, repeat=k):
            w = one
            for x in c:
                w = w * q[x]
            out[c] = w
        return out
    if mechanism == "without_replacement":
        out = {}

        def rec(prefix: Tokens, w: Weight, left: int) -> None:
            if len(prefix) == k or left == 0:
                out[prefix] = out.get(prefix, 0) + w
                return
            rest = sum(q[i] for i in range(v) if i not in prefix)
            for i in range(v):
                if i not in prefix and q[i] != 0:
                    rec(prefix + (i,), w * q[i] / rest, left - 1)

        rec((), one, sum(1 for x in q if x != 0))
        return out
    if mechanism == "top_k":
        order = sorted(range(v), key=lambda i: (-q[i], i))
        return {tuple(i for i in order[:k] if q[i] != 0): one}
    raise ValueError(f"unknown mechanism {mechanism!r}; use 'iid', 'without_replacement' or 'top_k'")


def draw_candidates(q: np.ndarray, k: int, mechanism: str, rng: np.random.Generator) -> list[int]:
    q = np.asarray(q, dtype=np.float64)
    if mechanism == "iid":
        return cast(list[int], rng.choice(len(q), size=k, p=q / q.sum()).tolist())
    if mechanism == "without_replacement":
        k = min(k, int((q > 0).sum()))
        return cast(list[int], rng.choice(len(q), size=k, replace=False, p=q / q.sum()).tolist())
    if mechanism == "top_k":
        order = np.argsort(-q, kind="stable")
        return [int(i) for i in order[:k] if q[i] > 0]
    raise ValueError(mechanism)


# --------------------------------------------------------------------------------------------
# node rules
# --------------------------------------------------------------------------------------------
def typical_threshold(p: Iterable[Weight], epsilon: float = 0.09, delta: float = 0.3) -> float:
    """Medusa's threshold min(epsilon, delta exp(-H(p))) (defaults from Medusa's code)."""
    h = -sum(float(x) * math.log(float(x)) for x in p if x > 0)
    return min(epsilon, delta * math.exp(-h))


class _Law:
    """An outcome law being accumulated: ``add`` skips zero weights."""

    def __init__(self, zero: Weight) -> None:
        self.zero = zero
        self.out: dict[Outcome, Weight] = {}

    def add(self, key: Outcome, w: Weight) -> None:
        if w != 0:
            self.out[key] = self.out.get(key, self.zero) + w

    def emit_all(self, law: Mapping[int, Weight], reach: Weight) -> dict[Outcome, Weight]:
        """The walk stops here with probability ``reach`` and draws y from ``law``."""
        for y, w in law.items():
            self.add(("emit", y), reach * w)
        return self.out


@dataclasses.dataclass(frozen=True)
class NodeRule:
    """How a tree node verifies its candidates (see the module docstring). Each rule is an object with
    two forms of itself, as the chain rules are ``PositionRule`` objects: :meth:`outcome_law` (the exact
    law of the node's outcome) and :meth:`verify` (the rule as an engine runs it, with coins)."""

    name: str
    exact_for: tuple[str, ...]  # mechanisms for which the rule is exact ((): never, lossy by design)
    lossy_by_design: bool = False
    threshold_single: float = 1.0
    threshold_acc: float = 1.0
    epsilon: float = 0.09
    delta: float = 0.3

    def outcome_law(self, p: NodeRow, q: NodeRow | None, cands: Sequence[int]) -> dict[Outcome, Weight]:
        """Law of the node's outcome: ('accept', i) (descend into candidate i) or ('emit', y) (stop)."""
        raise NotImplementedError

    def verify(self, p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rng: np.random.Generator) -> Outcome:
        """One outcome drawn with ``rng``'s coins: coins, residual updates, fallback draws."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class RecursiveRejection(NodeRule):
    """``rrs``: accept x_i with probability min(1, p_i(x_i) / q(x_i)), else p_{i+1} = norm((p_i - q)+).
    ``adjust_q``: q without the earlier candidates, renormalised (``rrs_without_replacement``);
    ``dedup``: duplicate candidates removed first (``rrs_dedup``, a negative control)."""

    adjust_q: bool = False
    dedup: bool = False

    def _candidates(self, cands: Sequence[int]) -> list[int]:
        return list(dict.fromkeys(cands)) if self.dedup else list(cands)

    def outcome_law(self, p: NodeRow, q: NodeRow | None, cands: Sequence[int]) -> dict[Outcome, Weight]:
        v, zero = len(p), p[0] * 0
        one, law = zero + 1, _Law(zero)
        if q is None:  # the TypeError subscripting None gave, with the reason
            raise TypeError(f"{self.name} reads the draft row q; pass it")
        cs = self._candidates(cands)
        pi = {i: p[i] for i in range(v) if p[i] != 0}
        qi = {i: q[i] for i in range(v) if q[i] != 0}
        reach = one
        removed: list[int] = []
        for idx, x in enumerate(cs):
            if self.adjust_q:
                qi = _norm({i: q[i] for i in range(v) if q[i] != 0 and i not in removed})
            qx = qi.get(x, zero)
            px = pi.get(x, zero)
            a = one if (qx == 0 or px >= qx) else px / qx
            if qx == 0:
                a = one if px > 0 else zero
            law.add(("accept", list(cands).index(x) if self.dedup else idx), reach * a)
            reach = reach * (1 - a)
            if reach == 0:
                return law.out
            res = _norm({i: pi.get(i, zero) - qi.get(i, zero) for i in range(v) if pi.get(i, zero) > qi.get(i, zero)})
            pi = res if res else pi
            removed.append(x)
        return law.emit_all(pi, reach)

    def verify(self, p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rng: np.random.Generator) -> Outcome:
        p = np.asarray(p, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        cs = self._candidates(cands)
        pi, qi = p.copy(), q.copy()
        for i, x in enumerate(cs):
            if self.adjust_q:
                qi = q.copy()
                qi[cs[:i]] = 0.0
                qi = qi / qi.sum()
            if qi[x] <= 0 or rng.random() < pi[x] / qi[x]:
                return ("accept", list(cands).index(x))
            r = np.maximum(pi - qi, 0.0)
            if r.sum() > 0:
                pi = r / r.sum()
        return ("emit", _inv(pi, rng.random()))


@dataclasses.dataclass(frozen=True)
class OneHotRule(NodeRule):
    """``one_hot``: accept c_i with probability p_i(c_i), else p_{i+1} = p_i without c_i, renormalised."""

    def outcome_law(self, p: NodeRow, q: NodeRow | None, cands: Sequence[int]) -> dict[Outcome, Weight]:
        v, zero = len(p), p[0] * 0
        one, law = zero + 1, _Law(zero)
        pi = {i: p[i] for i in range(v) if p[i] != 0}
        reach = one
        for idx, x in enumerate(cands):
            a = pi.get(x, zero)
            law.add(("accept", idx), reach * a)
            reach = reach * (1 - a)
            if reach == 0:
                return law.out
            pi = _norm({i: w for i, w in pi.items() if i != x})
        return law.emit_all(pi, reach)

    def verify(self, p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rng: np.random.Generator) -> Outcome:
        pi = np.asarray(p, dtype=np.float64).copy()
        for i, x in enumerate(cands):
            if rng.random() < pi[x]:
                return ("accept", i)
            pi[x] = 0.0
            pi = pi / pi.sum()
        return ("emit", _inv(pi, rng.random()))


@dataclasses.dataclass(frozen=True)
class TargetOnlyRule(NodeRule):
    """``target_only`` (SGLang's tree kernel): one coin per level, siblings tried in order against the
    running sum of p over ``threshold_acc``, or p(c_i) >= ``threshold_single``; else p without them."""

    def outcome_law(self, p: NodeRow, q: NodeRow | None, cands: Sequence[int]) -> dict[Outcome, Weight]:
        v, zero = len(p), p[0] * 0
        one, law = zero + 1, _Law(zero)
        exact_numbers = isinstance(p[0], Fraction)
        t_acc = Fraction(str(self.threshold_acc)) if exact_numbers else self.threshold_acc
        t_single = Fraction(str(self.threshold_single)) if exact_numbers else self.threshold_single
        # One coin u ~ U[0, 1) per level. c_i is accepted for u in
        # [F_{i-1}/t_acc, F_i/t_acc) (first i with u <= F_i / t_acc), unless p(c_i) >= t_single
        # accepts it outright when it is reached.
        F = zero
        lo = zero
        tried = []
        for idx, x in enumerate(cands):
            tried.append(x)
            if p[x] >= t_single:
                law.add(("accept", idx), 1 - lo)
                return law.out
            F = F + p[x]
            hi = min(one, F / t_acc)
            if hi > lo:
                law.add(("accept", idx), hi - lo)
                lo = hi
            if lo >= 1:
                return law.out
        rest = _norm({i: p[i] for i in range(v) if p[i] != 0 and i not in tried})
        if not rest:
            rest = _norm({i: p[i] for i in range(v) if p[i] != 0})
        return law.emit_all(rest, 1 - lo)

    def verify(self, p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rng: np.random.Generator) -> Outcome:
        p = np.asarray(p, dtype=np.float64)
        u = rng.random()
        acc = 0.0
        for i, x in enumerate(cands):
            acc += p[x]
            if u <= acc / self.threshold_acc or p[x] >= self.threshold_single:
                return ("accept", i)
        rest = p.copy()
        rest[list(cands)] = 0.0
        if rest.sum() <= 0:
            rest = p
        return ("emit", _inv(rest, rng.random()))


@dataclasses.dataclass(frozen=True)
class TypicalRule(NodeRule):
    """``typical`` (Medusa): accept the first candidate with p(c) > min(epsilon, delta exp(-H(p))),
    else draw from p. Lossy by design."""

    def outcome_law(self, p: NodeRow, q: NodeRow | None, cands: Sequence[int]) -> dict[Outcome, Weight]:
        law = _Law(p[0] * 0)
        thr = typical_threshold(p, self.epsilon, self.delta)
        for idx, x in enumerate(cands):
            if float(p[x]) > thr:
                law.add(("accept", idx), law.zero + 1)
                return law.out
        return law.emit_all(dict(enumerate(p)), 1)

    def verify(self, p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rng: np.random.Generator) -> Outcome:
        p = np.asarray(p, dtype=np.float64)
        thr = typical_threshold(p, self.epsilon, self.delta)
        for i, x in enumerate(cands):
            if p[x] > thr:
                return ("accept", i)
        return ("emit", _inv(p, rng.random()))


def node_outcome_law(p: NodeRow, q: NodeRow | None, cands: Sequence[int], rule: NodeRule) -> dict[Outcome, Weight]:
    """Law of the node's outcome under ``rule``: ``rule.outcome_law(p, q, cands)``."""
    return rule.outcome_law(p, q, cands)


NODE_RULES: dict[str, NodeRule] = {
    "rrs": RecursiveRejection("rrs", ("iid",)),
    "rrs_without_replacement": RecursiveRejection("rrs_without_replacement", ("without_replacement",), adjust_q=True),
    "one_hot": OneHotRule("one_hot", ("iid", "without_replacement", "top_k")),
    "target_only": TargetOnlyRule("target_only", ("without_replacement", "top_k")),
    "typical": TypicalRule("typical", (), lossy_by_design=True),
    "rrs_dedup": RecursiveRejection("rrs_dedup", (), dedup=True),
    "target_only_thresholds": TargetOnlyRule("target_only", (), threshold_single=0.6, threshold_acc=0.8),
}


@dataclasses.dataclass(frozen=True)
class Pairing:
    """A candidate mechanism with a node rule, as an engine uses them."""

    name: str
    mechanism: str
    rule: NodeRule
    exact: bool
    lossy_by_design: bool = False
    source: str = ""


PAIRINGS = [
    Pairing("specinfer_iid_rrs", "iid", NODE_RULES["rrs"], True, source="SpecInfer (Miao et al.)"),
    Pairing(
        "rsd_without_replacement",
        "without_replacement",
        NODE_RULES["rrs_without_replacement"],
        True,
        source="RSD (Jeon et al.), EAGLE-1",
    ),
    Pairing("eagle2_top_k_one_hot", "top_k", NODE_RULES["one_hot"], True, source="EAGLE-2, lookahead decoding"),
    Pairing(
        "sglang_target_only",
        "top_k",
        NODE_RULES["target_only"],
        True,
        source="sgl-kernel speculative_sampling (thresholds 1)",
    ),
    Pairing("iid_rrs_dedup", "iid", NODE_RULES["rrs_dedup"], False, source="statistics.md 7b"),
    Pairing(
        "without_replacement_unadjusted_q",
        "without_replacement",
        NODE_RULES["rrs"],
        False,
        source="SafeAILab/EAGLE#74",
    ),
    Pairing("top_k_with_draft_ratio", "top_k", NODE_RULES["rrs"], False, source="SafeAILab/EAGLE#110, #221"),
    Pairing(
        "sglang_thresholds_below_one",
        "top_k",
        NODE_RULES["target_only_thresholds"],
        False,
        source="sglang --speculative-accept-threshold-*",
    ),
    Pairing(
        "sglang_repeated_siblings",
        "iid",
        NODE_RULES["target_only"],
        False,
        source="sgl-kernel with duplicate siblings",
    ),
    Pairing(
        "medusa_typical",
        "top_k",
        NODE_RULES["typical"],
        False,
        lossy_by_design=True,
        source="Medusa (Cai et al.) typical acceptance",
    ),
]


def tree_round_law(
    target: Model, draft: Model, prefix: Sequence[int], branching: Sequence[int], mechanism: str, rule: NodeRule
) -> dict[Tokens, Weight]:
    """Exact law of the block emitted by one tree round: at depth d every node has up to
    branching[d] candidates drawn by ``mechanism`` from the draft row at its path; the walk
    follows accepted candidates; a leaf that is accepted gets a bonus token from the target."""
    prefix = tuple(prefix)
    law: dict[Tokens, Weight] = {}

    def add(k: Tokens, w: Weight) -> None:
        if w != 0:
            law[k] = law.get(k, 0) + w

    def walk(path: Tokens, w: Weight, depth: int) -> None:
        ctx = prefix + path
        p = target(ctx)
        if depth == len(branching):
            for y, pv in enumerate(p):
                add(path + (y,), w * pv)
            return
        q = draft(ctx)
        for cands, cw in candidate_law(q, branching[depth], mechanism).items():
            for (kind, val), ow in node_outcome_law(p, q, cands, rule).items():
                if kind == "accept":
                    walk(path + (cands[val],), w * cw * ow, depth + 1)
                else:
                    add(path + (val,), w * cw * ow)

    walk((), 1, 0)
    return law


def tree_first_tokens_law(
    target: Model,
    draft: Model,
    prefix: Sequence[int],
    branching: Sequence[int],
    mechanism: str,
    rule: NodeRule,
    length: int,
) -> dict[Tokens, Weight]:
    """Law of the first ``length`` tokens over repeated tree rounds."""
    memo: dict[tuple[Tokens, int], dict[Tokens, Weight]] = {}

    def law_from(ctx: Tokens, need: int) -> dict[Tokens, Weight]:
        key = (ctx, need)
        if key in memo:
            return memo[key]
        out: dict[Tokens, Weight] = {}
        for block, w in tree_round_law(target, draft, ctx, branching, mechanism, rule).items():
            if len(block) >= need:
                out[block[:need]] = out.get(block[:need], 0) + w
            else:
                for rest, w2 in law_from(ctx + block, need - len(block)).items():
                    out[block + rest] = out.get(block + rest, 0) + w * w2
        memo[key] = out
        return out

    return law_from(tuple(prefix), length)


def _inv(w: np.ndarray, u: float) -> int:
    from ..dists import inverse_cdf_sample_scalar

    return inverse_cdf_sample_scalar(w, u)


def verify_node_procedural(
    p: ArrayLike, q: ArrayLike | None, cands: Sequence[int], rule: NodeRule, rng: np.random.Generator
) -> Outcome:
    """The node rules as an engine runs them: ``rule.verify(p, q, cands, rng)``."""
    return rule.verify(p, q, cands, rng)
