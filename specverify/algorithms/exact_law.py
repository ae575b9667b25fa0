"""The exact law of speculative decoding: the oracle the rest of specverify stands on.

Everything here enumerates; nothing samples. Numbers are generic: pass ``fractions.Fraction`` rows
for exact rational arithmetic, or floats for float64 (the same code, used for larger cases).

A *position rule* says what happens at one drafted position, given the target row p, the reported
draft row q and the draft token x:

    propose(q)            -> {x: probability}   how the drafter picks x (q itself, or argmax q)
    accept(p, q, x)       -> probability of keeping x
    replacement(p, q, x)  -> {y: probability}   law of the emitted token when x is not kept

A round drafts gamma tokens (each from the draft model given the prefix so far), keeps them while
accepted, emits one replacement at the first rejection or a bonus token from p_{gamma+1}.

    round_law(target, draft, prefix, gamma)        law of the emitted block (a tuple of tokens)
    first_tokens_law(target, draft, prefix, gamma, L)
        law of the first L generated tokens over as many rounds as needed:
        Law_L(c) = sum_b P(b | c) [ |b| >= L ] delta(b[:L]) + [ |b| < L ] b (x) Law_{L-|b|}(c + b)
    target_law(target, prefix, L)                   prod_t p(x_t | x_<t)
    kernel_output_law(p_rows, q_rows, draft)        law of (accepted count k, final token y) for
                                                    fixed drafts: what one kernel call emits

Exactness theorem (checked in ``properties/``): for the full, one-hot and sample-and-match rules,
first_tokens_law == target_law for every prefix-dependent pair, gamma and L.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

__all__ = [
    "PositionRule",
    "FULL",
    "ONE_HOT",
    "SAMPLE_AND_MATCH",
    "GREEDY_RULE",
    "RULES",
    "round_law",
    "first_tokens_law",
    "target_law",
    "greedy_target_tokens",
    "kernel_output_law",
    "first_token_law",
    "total_variation",
    "to_fractions",
]

#: a probability or weight: a Fraction (exact arithmetic) or a float, whichever the rows hold
Weight = Any
#: a probability row over token ids
Row = Sequence[Weight]
#: a block or context of token ids
Tokens = tuple[int, ...]
Model = Callable[[Tokens], Row]
#: a law over tokens: token id -> probability (zeros left out)
TokenLaw = dict[int, Weight]
_K = TypeVar("_K")


def _normalise(w: Mapping[int, Weight]) -> TokenLaw:
    total = sum(w.values())
    return {k: v / total for k, v in w.items() if v != 0}


def _argmax(row: Row) -> int:
    best = 0
    for i in range(1, len(row)):
        if row[i] > row[best]:
            best = i
    return best


@dataclasses.dataclass(frozen=True)
class PositionRule:
    """One verification rule at one drafted position (see the module docstring)."""

    name: str
    propose: Callable[[Row], TokenLaw]
    accept: Callable[[Row, Row | None, int], Weight]  # q is None for rules that ignore it
    replacement: Callable[[Row, Row | None, int], TokenLaw]
    bonus: Callable[[Row], TokenLaw] = dataclasses.field(default=lambda p: {y: v for y, v in enumerate(p) if v != 0})
    exact: bool = True


def _propose_q(q: Row) -> TokenLaw:
    return {x: v for x, v in enumerate(q) if v != 0}


def _require_q(q: Row | None) -> Row:
    if q is None:  # the TypeError subscripting None would give, with the reason
        raise TypeError("the full rule reads the draft row q; pass q_rows")
    return q


def _full_accept(p: Row, q: Row | None, x: int) -> Weight:
    q = _require_q(q)
    if p[x] >= q[x]:  # also avoids p / q overflowing when q(x) is near underflow
        return q[x] * 0 + 1
    return p[x] / q[x]


def _full_replacement(p: Row, q: Row | None, x: int) -> TokenLaw:
    q = _require_q(q)
    res = {y: pv - qv for y, (pv, qv) in enumerate(zip(p, q)) if pv > qv}
    if not res:  # only reachable through rounding in float rows
        return _normalise({y: v for y, v in enumerate(p)})
    return _normalise(res)


def _one_hot_replacement(p: Row, q: Row | None, x: int) -> TokenLaw:
    return _normalise({y: v for y, v in enumerate(p) if y != x})


def _sam_accept(p: Row, q: Row | None, x: int) -> Weight:
    # The target draws y ~ p; x is kept iff y == x.
    return p[x]


def _sam_replacement(p: Row, q: Row | None, x: int) -> TokenLaw:
    # Emitted y is the target's own draw, conditioned on y != x.
    mass = {y: p[y] for y in range(len(p)) if y != x}
    return _normalise(mass)


FULL = PositionRule("full", _propose_q, _full_accept, _full_replacement)
ONE_HOT = PositionRule("one_hot", _propose_q, lambda p, q, x: p[x], _one_hot_replacement)
SAMPLE_AND_MATCH = PositionRule("sample_and_match", _propose_q, _sam_accept, _sam_replacement)
GREEDY_RULE = PositionRule(
    "greedy",
    lambda q: {_argmax(q): q[0] * 0 + 1},
    lambda p, q, x: (p[0] * 0 + 1) if x == _argmax(p) else p[0] * 0,
    lambda p, q, x: {_argmax(p): p[0] * 0 + 1},
    bonus=lambda p: {_argmax(p): p[0] * 0 + 1},
)
RULES = {r.name: r for r in (FULL, ONE_HOT, SAMPLE_AND_MATCH, GREEDY_RULE)}


def _add(law: dict[_K, Weight], key: _K, w: Weight) -> None:
    if w != 0:
        law[key] = law.get(key, 0) + w


def round_law(
    target: Model, draft: Model, prefix: Sequence[int], gamma: int, rule: PositionRule = FULL
) -> dict[Tokens, Weight]:
    """Law of the block emitted by one round from ``prefix`` (tuples of 1..gamma+1 tokens)."""
    prefix = tuple(prefix)
    law: dict[Tokens, Weight] = {}

    def walk(emitted: Tokens, weight: Weight, i: int) -> None:
        ctx = prefix + emitted
        p = target(ctx)
        if i == gamma:
            for y, v in rule.bonus(p).items():
                _add(law, emitted + (y,), weight * v)
            return
        q = draft(ctx)
        for x, qx in rule.propose(q).items():
            a = rule.accept(p, q, x)
            if a != 0:
                walk(emitted + (x,), weight * qx * a, i + 1)
            if a != 1:
                for y, v in rule.replacement(p, q, x).items():
                    _add(law, emitted + (y,), weight * qx * (1 - a) * v)

    walk((), 1, 0)
    return law


def first_tokens_law(
    target: Model,
    draft: Model,
    prefix: Sequence[int],
    gamma: int,
    length: int,
    rule: PositionRule = FULL,
) -> dict[Tokens, Weight]:
    """Law of the first ``length`` tokens generated by repeated rounds from ``prefix``."""
    prefix = tuple(prefix)
    memo: dict[tuple[Tokens, int], dict[Tokens, Weight]] = {}

    def law_from(ctx: Tokens, need: int) -> dict[Tokens, Weight]:
        key = (ctx, need)
        if key in memo:
            return memo[key]
        out: dict[Tokens, Weight] = {}
        for block, w in round_law(target, draft, ctx, gamma, rule).items():
            if len(block) >= need:
                _add(out, block[:need], w)
            else:
                for rest, w2 in law_from(ctx + block, need - len(block)).items():
                    _add(out, block + rest, w * w2)
        memo[key] = out
        return out

    return law_from(prefix, length)


def target_law(target: Model, prefix: Sequence[int], length: int) -> dict[Tokens, Weight]:
    """prod_t p(x_t | prefix, x_<t) over all sequences of ``length`` tokens with positive mass."""
    out: dict[Tokens, Weight] = {(): 1}
    prefix = tuple(prefix)
    for _ in range(length):
        nxt: dict[Tokens, Weight] = {}
        for seq, w in out.items():
            for y, v in enumerate(target(prefix + seq)):
                _add(nxt, seq + (y,), w * v)
        out = nxt
    return out


def greedy_target_tokens(target: Model, prefix: Sequence[int], length: int) -> Tokens:
    """Target-only greedy decoding (lowest-id argmax) for ``length`` tokens."""
    seq: Tokens = ()
    prefix = tuple(prefix)
    for _ in range(length):
        seq += (_argmax(target(prefix + seq)),)
    return seq


def first_token_law(p: Row, q: Row, gamma: int = 1, rule: PositionRule = FULL) -> dict[int, Weight]:
    """Law of the first emitted token for position-independent rows p, q."""
    law = round_law(lambda c: p, lambda c: q, (), gamma, rule)
    out: dict[int, Weight] = {}
    for block, w in law.items():
        _add(out, block[0], w)
    return out


def kernel_output_law(
    p_rows: Sequence[Row], q_rows: Sequence[Row] | None, draft: Sequence[int], rule: PositionRule = FULL
) -> dict[tuple[int, int], Weight]:
    """Law of (k, y): k drafts accepted, then final token y, for fixed draft tokens.

    This is what one call of a verification kernel emits; the draft tokens are inputs, so the
    law is over the verifier's randomness only. ``q_rows`` may be None for rules that ignore q.
    """
    gamma = len(draft)
    law: dict[tuple[int, int], Weight] = {}
    weight = p_rows[0][0] * 0 + 1
    for i, x in enumerate(draft):
        p = p_rows[i]
        q = q_rows[i] if q_rows is not None else None
        a = rule.accept(p, q, x)
        if a != 1:
            for y, v in rule.replacement(p, q, x).items():
                _add(law, (i, y), weight * (1 - a) * v)
        weight = weight * a
        if weight == 0:
            return law
    for y, v in rule.bonus(p_rows[gamma]).items():
        _add(law, (gamma, y), weight * v)
    return law


def total_variation(a: Mapping[Any, Weight], b: Mapping[Any, Weight]) -> Weight:
    """0.5 * sum |a - b| over the union of supports."""
    keys = set(a) | set(b)
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in keys) / 2


def to_fractions(row: Sequence[Fraction | float | int | str], *, limit: int | None = None) -> list[Fraction]:
    """Exact Fractions of a row of floats (or ints/strings), normalised to sum exactly to one."""
    fr = [Fraction(v) for v in row]  # exact for floats, ints and strings like "3/7"
    if limit is not None:
        fr = [f.limit_denominator(limit) for f in fr]
    total = sum(fr)
    return [f / total for f in fr]
