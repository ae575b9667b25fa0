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
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from .dists import SamplingSettings

__all__ = [
    "probability_vectors",
    "pq_pairs",
    "logits",
    "sampling_settings",
    "markov_pairs",
    "MarkovPair",
    "uniforms",
]


def _finish(weights: list[int], exact: bool):
    total = sum(weights)
    if exact:
        return [Fraction(w, total) for w in weights]
    arr = np.asarray(weights, dtype=np.float64)
    return arr / arr.sum()


@st.composite
def _weights(draw, size: int, kind: str) -> list[int]:
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
    raise ValueError(kind)


KINDS = ("general", "one_hot", "near_uniform", "peaked", "ties")


@st.composite
def probability_vectors(
    draw, *, min_size: int = 2, max_size: int = 8, exact: bool = False, kinds=KINDS, size: int | None = None
):
    """A probability vector: exact zeros, ties, one-hot, near-uniform, very peaked.

    With ``exact=False`` a further kind, ``'underflow'``, puts masses near float underflow
    (1e-300 and subnormal-adjacent values) beside ordinary ones.
    """
    n = size if size is not None else draw(st.integers(min_size, max_size))
    options = list(kinds) + ([] if exact else ["underflow"])
    kind = draw(st.sampled_from(options))
    if kind == "underflow":
        w = _finish(draw(_weights(n, "general")), exact=False)
        tiny = draw(st.sampled_from([1e-300, 1e-310, 5e-324 * 1e10, 1e-200]))
        i = draw(st.integers(0, n - 1))
        w = w.copy()
        w[i] = tiny
        return w / w.sum()
    return _finish(draw(_weights(n, kind)), exact)


@st.composite
def pq_pairs(
    draw,
    *,
    min_size: int = 2,
    max_size: int = 8,
    exact: bool = False,
    overlap: tuple[float, float] | None = None,
):
    """(p, q) on one vocabulary. ``overlap=(lo, hi)`` asks for sum min(p, q) within [lo, hi].

    Without ``overlap`` the pairs cover p == q, disjoint supports, one-hot on either side and
    everything between; with it, q is built as lam p + (1 - lam) r, which has overlap >= lam.
    """
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
        q = qf if exact else np.asarray([float(v) for v in qf])
        if not exact:
            q = q / q.sum()
    else:
        q = draw(probability_vectors(size=n, exact=exact))
    if overlap is not None:
        a = sum(min(x, y) for x, y in zip(p, q))
        lo, hi = overlap
        from hypothesis import assume

        assume(lo - 1e-12 <= float(a) <= hi + 1e-12)
    return p, q


def uniforms(n: int):
    """n uniforms in [0, 1) that include the edges 0 and 1 - 2**-53 and simple fractions."""
    edge = st.sampled_from([0.0, 0.5, 0.25, 1.0 - 2**-53])
    return st.lists(st.one_of(edge, st.floats(0.0, 1.0, exclude_max=True, allow_nan=False)), min_size=n, max_size=n)


@st.composite
def logits(draw, *, min_size: int = 2, max_size: int = 16, size: int | None = None, ties: bool = True):
    """Float64 logits with optional ties and -inf (masked) entries; at least one finite entry."""
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
def sampling_settings(draw, *, greedy: bool = False, penalties: bool = True) -> SamplingSettings:
    """SamplingSettings over the ranges engines accept, including the switched-off values."""
    t = 0.0 if greedy else draw(st.sampled_from([0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 2.0]))
    kw = dict(
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
class MarkovPair:
    """A target/draft pair of order-``order`` Markov models over ``vocab_size`` tokens.

    ``target(prefix)`` and ``draft(prefix)`` return the next-token row given the last ``order``
    tokens (missing positions read as a start symbol), the callable shape the exact-law oracle
    and the scalar reference take.
    """

    vocab_size: int
    order: int
    target_rows: dict
    draft_rows: dict

    def _key(self, prefix):
        ctx = tuple(prefix)[-self.order :] if self.order else ()
        return (-1,) * (self.order - len(ctx)) + ctx

    def target(self, prefix):
        return self.target_rows[self._key(prefix)]

    def draft(self, prefix):
        return self.draft_rows[self._key(prefix)]


@st.composite
def markov_pairs(draw, *, min_vocab: int = 2, max_vocab: int = 3, max_order: int = 1, exact: bool = True):
    """Small prefix-dependent draft/target pairs (order 0 or 1 by default) for the exact-law oracle."""
    v = draw(st.integers(min_vocab, max_vocab))
    order = draw(st.integers(0, max_order))
    symbols = [-1] + list(range(v))
    import itertools

    keys = [k for k in itertools.product(symbols, repeat=order)]
    target_rows, draft_rows = {}, {}
    for k in keys:
        p, q = draw(pq_pairs(min_size=v, max_size=v, exact=exact))
        target_rows[k], draft_rows[k] = p, q
    return MarkovPair(v, order, target_rows, draft_rows)
