"""Hypothesis strategies for speculative-decoding tests, usable in any project's test suite.

    from hypothesis import given
    from specverify import strategies as svst

    @given(svst.pq_pairs(max_size=6, exact=True))
    def test_my_kernel_is_exact(pq):
        p, q = pq
        ...

Every strategy builds its values from small integers, so failures shrink to minimal
counterexamples (few tokens, small weights, exact zeros). ``exact=True`` yields rows of
``fractions.Fraction`` summing exactly to one (for the exact-law oracle); otherwise float64 numpy
arrays normalised in float64.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from .dists import SamplingSettings

__all__ = [
    "probability_vectors",
    "pq_pairs",
    "logits",
    "sampling_settings",
    "markov_pairs",
    "CallableMarkovPair",
    "uniforms",
    "KINDS",
]

#: a probability vector as the strategies draw it: exact (Fraction entries) or float64
ProbRow = list[Fraction] | npt.NDArray[np.float64]


# Argument checks run when a strategy is built (not when it is drawn from), and say name=value and
# the fix, as Hypothesis's own strategies do.
def _check_int(name: str, value: object, *, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgument(f"{name}={value!r} must be an int; pass a whole number >= {least}")
    if value < least:
        raise InvalidArgument(f"{name}={value!r} is below {least}; pass {name} >= {least}")


def _check_sizes(min_size: int, max_size: int, size: int | None, *, least: int) -> None:
    _check_int("min_size", min_size, least=least)
    _check_int("max_size", max_size, least=least)
    if min_size > max_size:
        raise InvalidArgument(f"min_size={min_size} > max_size={max_size}; pass min_size <= max_size")
    if size is not None:
        _check_int("size", size, least=least)


@overload
def _finish(weights: list[int], exact: Literal[True]) -> list[Fraction]: ...
@overload
def _finish(weights: list[int], exact: Literal[False]) -> npt.NDArray[np.float64]: ...
@overload
def _finish(weights: list[int], exact: bool) -> ProbRow: ...


def _finish(weights: list[int], exact: bool) -> ProbRow:
    total = sum(weights)
    if exact:
        return [Fraction(w, total) for w in weights]
    arr = np.asarray(weights, dtype=np.float64)
    row: npt.NDArray[np.float64] = arr / arr.sum()
    return row


@st.composite
def _weights(draw: st.DrawFn, size: int, kind: str) -> list[int]:
    if kind == "general":  # zeros and ties arise naturally from small integers
        w = draw(st.lists(st.integers(0, 12), min_size=size, max_size=size))
        if sum(w) == 0:
            w[draw(st.integers(0, size - 1))] = 1
        return w
    if kind == "one_hot":
        w = [0] * size
        w[draw(st.integers(0, size - 1))] = 1
        return w
    if kind == "near_uniform":
        return draw(st.lists(st.integers(1000, 1003), min_size=size, max_size=size))
    if kind == "peaked":
        w = draw(st.lists(st.integers(0, 2), min_size=size, max_size=size))
        w[draw(st.integers(0, size - 1))] += 10_000
        return w
    if kind == "ties":
        level = draw(st.integers(1, 5))
        w = [level] * size
        for i in draw(st.sets(st.integers(0, size - 1), max_size=max(0, size - 2))):
            w[i] = draw(st.integers(0, level))
        return w
    raise InvalidArgument(f"kind={kind!r} is not a kind of probability vector; use one of {KINDS}")


#: the kinds of probability vector ``probability_vectors(kinds=...)`` draws from
KINDS = ("general", "one_hot", "near_uniform", "peaked", "ties")


def probability_vectors(
    *,
    min_size: int = 2,
    max_size: int = 8,
    exact: bool = False,
    kinds: Sequence[str] = KINDS,
    size: int | None = None,
) -> st.SearchStrategy[ProbRow]:
    """A probability vector: exact zeros, ties, one-hot, near-uniform, very peaked.

    With ``exact=False`` a further kind, ``'underflow'``, puts masses near float underflow
    (1e-300 and subnormal-adjacent values) beside ordinary ones.
    """
    _check_sizes(min_size, max_size, size, least=1)
    if isinstance(kinds, str) or not list(kinds):
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty sequence of kinds; pass e.g. kinds={KINDS[:2]}")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise InvalidArgument(f"kinds={tuple(kinds)!r} holds {unknown}, not kinds of vector; use some of {KINDS}")
    return _probability_vectors(min_size=min_size, max_size=max_size, exact=exact, kinds=tuple(kinds), size=size)


@st.composite
def _probability_vectors(
    draw: st.DrawFn, *, min_size: int, max_size: int, exact: bool, kinds: tuple[str, ...], size: int | None
) -> ProbRow:
    n = size if size is not None else draw(st.integers(min_size, max_size))
    options = list(kinds) + ([] if exact else ["underflow"])
    kind = draw(st.sampled_from(options))
    if kind == "underflow":
        w = _finish(draw(_weights(n, "general")), exact=False)
        tiny = draw(st.sampled_from([1e-300, 1e-310, 5e-324 * 1e10, 1e-200]))
        i = draw(st.integers(0, n - 1))
        w = w.copy()
        w[i] = tiny
        row: npt.NDArray[np.float64] = w / w.sum()
        return row
    return _finish(draw(_weights(n, kind)), exact)


def _check_overlap(overlap: object) -> None:
    if overlap is None:
        return
    if not isinstance(overlap, tuple | list) or len(overlap) != 2:
        raise InvalidArgument(f"overlap={overlap!r} must be a pair (lo, hi); pass e.g. overlap=(0.5, 1.0)")
    lo, hi = overlap
    if not all(isinstance(x, int | float | Fraction) and math.isfinite(x) for x in (lo, hi)):
        raise InvalidArgument(f"overlap={overlap!r} must hold two finite numbers; pass e.g. overlap=(0.5, 1.0)")
    if not 0 <= lo <= hi <= 1:
        raise InvalidArgument(
            f"overlap={overlap!r} is not an interval of [0, 1]; pass 0 <= lo <= hi <= 1 (sum min(p, q) lies in [0, 1])"
        )
    if math.floor(hi * 16) < math.ceil(lo * 16):
        raise InvalidArgument(
            f"overlap={overlap!r} holds no multiple of 1/16 (the mixture weights drawn); widen it to span one, "
            f"e.g. overlap=({math.floor(lo * 16) / 16}, {math.ceil(hi * 16) / 16})"
        )


def pq_pairs(
    *,
    min_size: int = 2,
    max_size: int = 8,
    exact: bool = False,
    overlap: tuple[float, float] | None = None,
) -> st.SearchStrategy[tuple[ProbRow, ProbRow]]:
    """(p, q) on one vocabulary. ``overlap=(lo, hi)`` asks for sum min(p, q) within [lo, hi].

    Without ``overlap`` the pairs cover p == q, disjoint supports, one-hot on either side and
    everything between; with it, q is built as lam p + (1 - lam) r with lam a multiple of 1/16 in
    [lo, hi], which has overlap >= lam; the pairs whose overlap exceeds hi are filtered out.
    """
    _check_sizes(min_size, max_size, None, least=1)
    _check_overlap(overlap)
    return _pq_pairs(min_size=min_size, max_size=max_size, exact=exact, overlap=overlap)


@st.composite
def _pq_pairs(
    draw: st.DrawFn, *, min_size: int, max_size: int, exact: bool, overlap: tuple[float, float] | None
) -> tuple[ProbRow, ProbRow]:
    n = draw(st.integers(min_size, max_size))
    p = draw(probability_vectors(size=n, exact=exact))
    relation = draw(st.sampled_from(["independent", "equal", "disjoint", "mixture"]))
    if overlap is not None:
        relation = "mixture"
    if relation == "equal":
        q = list(p) if exact else p.copy()
    elif relation == "disjoint" and any(v == 0 for v in p):
        zeros = [i for i, v in enumerate(p) if v == 0]
        w = [0] * n
        for i in draw(st.lists(st.sampled_from(zeros), min_size=1, max_size=len(zeros))):
            w[i] += draw(st.integers(1, 5))
        q = _finish(w, exact)
    elif relation == "mixture":
        lo, hi = overlap if overlap is not None else (0.0, 1.0)
        steps = draw(st.integers(int(np.ceil(lo * 16)), int(np.floor(hi * 16))))
        lam = Fraction(steps, 16)
        r = draw(probability_vectors(size=n, exact=True))
        pf = [Fraction(v) for v in p]
        qf = [lam * a + (1 - lam) * b for a, b in zip(pf, r)]
        if exact:
            q = qf
        else:
            qa = np.asarray([float(v) for v in qf])
            q = qa / qa.sum()
    else:
        q = draw(probability_vectors(size=n, exact=exact))
    if overlap is not None:
        a = sum(min(x, y) for x, y in zip(p, q))
        lo, hi = overlap
        assume(lo - 1e-12 <= float(a) <= hi + 1e-12)
    return p, q


def uniforms(n: int) -> st.SearchStrategy[list[float]]:
    """n uniforms in [0, 1) that include the edges 0 and 1 - 2**-53 and simple fractions."""
    _check_int("n", n, least=0)
    edge = st.sampled_from([0.0, 0.5, 0.25, 1.0 - 2**-53])
    return st.lists(st.one_of(edge, st.floats(0.0, 1.0, exclude_max=True, allow_nan=False)), min_size=n, max_size=n)


def logits(
    *, min_size: int = 2, max_size: int = 16, size: int | None = None, ties: bool = True
) -> st.SearchStrategy[npt.NDArray[np.float64]]:
    """Float64 logits with optional ties and -inf (masked) entries; at least one finite entry."""
    _check_sizes(min_size, max_size, size, least=1)
    return _logits(min_size=min_size, max_size=max_size, size=size, ties=ties)


@st.composite
def _logits(draw: st.DrawFn, *, min_size: int, max_size: int, size: int | None, ties: bool) -> npt.NDArray[np.float64]:
    n = size if size is not None else draw(st.integers(min_size, max_size))
    # Integers and halves give exact ties; a few -inf entries model upstream masking.
    base = st.integers(-8, 8).map(lambda v: v / 2.0)
    vals = draw(st.lists(base if ties else st.floats(-8, 8), min_size=n, max_size=n))
    masked = draw(st.sets(st.integers(0, n - 1), max_size=n // 3))
    arr = np.asarray(vals, dtype=np.float64)
    for i in masked:
        arr[i] = -np.inf
    if np.all(np.isinf(arr)):
        arr[0] = 0.0
    return arr


@st.composite
def sampling_settings(draw: st.DrawFn, *, greedy: bool = False, penalties: bool = True) -> SamplingSettings:
    """SamplingSettings over the ranges engines accept, including the switched-off values."""
    t = 0.0 if greedy else draw(st.sampled_from([0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 2.0]))
    kw: dict[str, Any] = dict(  # SamplingSettings' keyword arguments (floats, and top_k an int)
        temperature=t,
        top_k=draw(st.sampled_from([0, 1, 2, 3, 5, 50])),
        top_p=draw(st.sampled_from([1.0, 0.95, 0.9, 0.5, 0.25])),
        min_p=draw(st.sampled_from([0.0, 0.05, 0.1, 0.3])),
    )
    if penalties:
        kw.update(
            repetition_penalty=draw(st.sampled_from([1.0, 1.1, 1.5, 0.8])),
            presence_penalty=draw(st.sampled_from([0.0, 0.5])),
            frequency_penalty=draw(st.sampled_from([0.0, 0.3])),
        )
    return SamplingSettings(**kw)


@dataclasses.dataclass(frozen=True)
class CallableMarkovPair:
    """A target/draft pair of order-``order`` Markov models over ``vocab_size`` tokens, as two
    callables (not :class:`specverify.lm.MarkovPair`, the table pair the samplers run on).

    ``target(prefix)`` and ``draft(prefix)`` return the next-token row given the last ``order``
    tokens (missing positions read as a start symbol), the callable shape the exact-law oracle
    and the scalar reference take.
    """

    vocab_size: int
    order: int
    target_rows: dict[tuple[int, ...], ProbRow]
    draft_rows: dict[tuple[int, ...], ProbRow]

    def _key(self, prefix: Sequence[int]) -> tuple[int, ...]:
        ctx = tuple(prefix)[-self.order :] if self.order else ()
        return (-1,) * (self.order - len(ctx)) + ctx

    def target(self, prefix: Sequence[int]) -> ProbRow:
        return self.target_rows[self._key(prefix)]

    def draft(self, prefix: Sequence[int]) -> ProbRow:
        return self.draft_rows[self._key(prefix)]


def markov_pairs(
    *, min_vocab: int = 2, max_vocab: int = 3, max_order: int = 1, exact: bool = True
) -> st.SearchStrategy[CallableMarkovPair]:
    """Small prefix-dependent draft/target pairs (order 0 or 1 by default) for the exact-law oracle."""
    _check_int("min_vocab", min_vocab, least=1)
    _check_int("max_vocab", max_vocab, least=1)
    _check_int("max_order", max_order, least=0)
    if min_vocab > max_vocab:
        raise InvalidArgument(f"min_vocab={min_vocab} > max_vocab={max_vocab}; pass min_vocab <= max_vocab")
    return _markov_pairs(min_vocab=min_vocab, max_vocab=max_vocab, max_order=max_order, exact=exact)


@st.composite
def _markov_pairs(
    draw: st.DrawFn, *, min_vocab: int, max_vocab: int, max_order: int, exact: bool
) -> CallableMarkovPair:
    v = draw(st.integers(min_vocab, max_vocab))
    order = draw(st.integers(0, max_order))
    symbols = [-1] + list(range(v))
    keys = [k for k in itertools.product(symbols, repeat=order)]
    target_rows: dict[tuple[int, ...], ProbRow] = {}
    draft_rows: dict[tuple[int, ...], ProbRow] = {}
    for k in keys:
        p, q = draw(pq_pairs(min_size=v, max_size=v, exact=exact))
        target_rows[k], draft_rows[k] = p, q
    return CallableMarkovPair(v, order, target_rows, draft_rows)
