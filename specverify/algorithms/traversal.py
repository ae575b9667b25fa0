"""Traversal verification (Weng et al., "Traversal Verification for Speculative Tree Decoding",
NeurIPS 2025, arXiv 2505.12398): sequence-level acceptance over a token tree, from leaf to root.

The tree. Nodes 0..N-1 are drafted tokens; ``parents[n]`` is -1 (a child of the root, the context)
or an earlier node (parents[n] < n); ``draft[n]`` is node n's token. Slot 0 stands for the root and
slot n + 1 for node n: p_rows[s] and q_rows[s] are the target and draft rows after the path to slot
s (N + 1 rows each; the q row of a leaf is never read). The children of a slot are drawn from its
q row, in index order, without replacement (``without_replacement=False``: independently, repeats
allowed).

State per slot s: a weight w_s, a target row P_s and a draft row Q_s (initially p_rows[s] and
q_rows[s]); w_root = 1. The traversal visits the tree depth first in index order:

    enter n (pre-order):  w_n = min(1, w_par P_par(x_n) / Q_par(x_n))   (par = n's parent slot)
    test n (post-order):  accept iff u_n < w_n; then emit the path root..n and y ~ P_n, stop
    reject n:             R = max(w_par P_par - Q_par, 0), r = sum R
                          w_par <- r / (1 - w_par + r),  P_par <- R / r,
                          Q_par <- Q_par with x_n removed, renormalised (without replacement)

If every child of the root is rejected, y ~ P_root (by then the residual of p_rows[0]). The root
is never tested: its weight stays 1. The tests come in post-order whatever happened before, and
each node is tested at most once, so u_accept[n] belongs to node n and u_final draws y.

Why it is exact (our derivation; the update of the parent is the one that makes this hold). Claim,
by induction over subtrees: processing the subtree of a slot with state (w, P, Q), children drawn
from Q, ends with "output goes through the slot and its next token is y" with probability w P(y)
(and, given that, a continuation that is again of this form). A leaf is accepted with probability
w and then draws y ~ P. For a first child c ~ Q: through c with probability w_c = min(1, w P(c) /
Q(c)) (induction), else the slot continues with (w', P', Q') and its other children, which are a
draw from Q' given c. So P(next = y) = Q(y) w_y + sum_c Q(c)(1 - w_c) w' P'(y), and since
Q(y) w_y = min(Q(y), w P(y)) and sum_c Q(c)(1 - w_c) = 1 - w + r, the choice P' = R / r,
w' = r / (1 - w + r) gives Q(y) w_y + [w P(y) - Q(y)]_+ = w P(y). At the root (w = 1) this is the
target law of the next token, and depth by depth of the whole sequence.

On a chain (parents = -1, 0, 1, ...) the updates are block verification's thresholds
(:mod:`.block_verification`): w' after rejecting the leaf is h_{gamma-1}, and so on up; given the
same uniforms the two emit the same tokens. Forms: :func:`verify_traversal` (scalar),
:func:`verify_traversal_batch` (numpy, vectorised over rounds that share the tree's shape),
:func:`traversal_kernel_law` (exact law of one call for fixed drafts), :func:`traversal_round_law`
and :func:`traversal_first_tokens_law` (tokens drawn from a prefix-dependent draft model), and
:func:`traversal_first_token_law_batch` (numpy: the law of a round's first token given each of B
fixed trees; its mean over trees drawn from the draft is the first token's law).

``REMAINING_MASS`` is a negative control: the parent's new weight taken as min(1, r / (1 - Q(x_n))),
the residual's mass over the draft mass left, instead of r / (1 - w + r). It is not lossless.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..dists import inverse_cdf_sample, inverse_cdf_sample_scalar
from ..errors import InvalidDraftError, ShapeError
from .block_verification import _add, _one, capped_ratio, residual, rounds_first_tokens_law, row_sum
from .chain_numpy import _floats
from .exact_law import Model, Tokens

__all__ = [
    "TraversalVariant",
    "TRAVERSAL",
    "REMAINING_MASS",
    "TraversalResult",
    "chain_parents",
    "branching_parents",
    "tree_events",
    "verify_traversal",
    "verify_traversal_chain",
    "verify_traversal_batch",
    "traversal_kernel_law",
    "tree_draws",
    "traversal_round_law",
    "traversal_first_tokens_law",
    "traversal_first_token_law_batch",
]

Weight = Any
Row = Sequence[Weight]


@dataclasses.dataclass(frozen=True)
class TraversalVariant:
    """The parent's weight update after a child is rejected: the exact one or the negative control."""

    name: str
    remaining_mass: bool = False  # True: w_par <- min(1, r / (1 - Q_par(x_n)))

    @property
    def exact(self) -> bool:
        return not self.remaining_mass


TRAVERSAL = TraversalVariant("traversal")
REMAINING_MASS = TraversalVariant("remaining_mass_weight", remaining_mass=True)


def chain_parents(n: int) -> list[int]:
    """The parent array of a chain of n drafted tokens."""
    return list(range(-1, n - 1))


def branching_parents(branching: Sequence[int]) -> list[int]:
    """Parent array of the full tree with branching[d] children under every node at depth d (index
    order: breadth first, so siblings are consecutive)."""
    parents: list[int] = []
    level = [-1]
    for k in branching:
        nxt = []
        for par in level:
            for _ in range(k):
                parents.append(par)
                nxt.append(len(parents) - 1)
        level = nxt
    return parents


def _check_parents(parents: Sequence[int]) -> None:
    for n, par in enumerate(parents):
        if not -1 <= par < n:
            raise ShapeError(f"parents[{n}] = {par}: a node's parent must be -1 (the root) or an earlier node")


def tree_events(parents: Sequence[int]) -> list[tuple[bool, int]]:
    """(is_test, node) in traversal order: (False, n) enters n (pre-order), (True, n) tests it (post-order)."""
    _check_parents(parents)
    children: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for n, par in enumerate(parents):
        children[par + 1].append(n)
    events: list[tuple[bool, int]] = []
    stack: list[tuple[bool, int]] = [(False, n) for n in reversed(children[0])]
    while stack:
        is_test, n = stack.pop()
        events.append((is_test, n))
        if not is_test:
            stack.append((True, n))
            stack.extend((False, c) for c in reversed(children[n + 1]))
    return events


def _path(parents: Sequence[int], n: int) -> list[int]:
    """Nodes from the root's child down to n (empty for the root, n = -1)."""
    out = []
    while n >= 0:
        out.append(n)
        n = parents[n]
    return out[::-1]


def _check_draft(
    q_rows: Sequence[Row], draft: Sequence[int], parents: Sequence[int], without_replacement: bool
) -> None:
    seen: set[tuple[int, int]] = set()
    for n, (x, par) in enumerate(zip(draft, parents)):
        if q_rows[par + 1][x] <= 0:
            raise InvalidDraftError(
                f"node {n} has token {x} with draft probability q = {q_rows[par + 1][x]} under its parent; "
                "it cannot have been drawn from q. Report the rows the tree was actually drawn from"
            )
        if without_replacement and (par, x) in seen:
            raise InvalidDraftError(
                f"node {n} repeats token {x} among its siblings; without replacement siblings are distinct "
                "(pass without_replacement=False for independently drawn children)"
            )
        seen.add((par, x))


class _State:
    """Weights and current rows of every slot (generic in the number type: floats or Fractions).

    Rows are kept unnormalised with their mass (1 for the given rows), so that a chain's residuals
    are block verification's, operation for operation.
    """

    def __init__(self, p_rows: Sequence[Row], q_rows: Sequence[Row], draft: Sequence[int], parents: Sequence[int]):
        one = _one(p_rows[0][0])
        self.parents, self.draft = parents, draft
        self.p = [list(r) for r in p_rows]
        self.q = [list(r) for r in q_rows]
        self.pm = [one] * len(p_rows)
        self.qm = [one] * len(q_rows)
        self.w = [one] * len(p_rows)

    def enter(self, n: int) -> None:
        s, x = self.parents[n] + 1, self.draft[n]
        self.w[n + 1] = capped_ratio(self.w[s], self.p[s][x] / self.pm[s], self.q[s][x] / self.qm[s])

    def reject(self, n: int, without_replacement: bool, variant: TraversalVariant) -> None:
        s, x = self.parents[n] + 1, self.draft[n]
        w = self.w[s]
        res = residual(w, [v / self.pm[s] for v in self.p[s]], [v / self.qm[s] for v in self.q[s]])
        r = row_sum(res)
        if variant.remaining_mass:
            left = 1 - self.q[s][x] / self.qm[s]
            self.w[s] = capped_ratio(_one(r), r, left) if left > 0 else _one(r)
        else:
            den = (1 - w) + r
            self.w[s] = r / den if den > 0 else _one(r)  # den = 0 is unreachable but through rounding
        if r > 0:  # r = 0 leaves a weight of 0 (or rounding): the row is never drawn from then
            self.p[s], self.pm[s] = res, r
        if without_replacement:
            self.qm[s] = self.qm[s] - self.q[s][x]
            self.q[s][x] = self.q[s][x] * 0


def _float_rows(rows: Sequence[Row]) -> list[list[float]]:
    return [[float(v) for v in row] for row in rows]


def verify_traversal(
    p_rows: Sequence[Row],
    q_rows: Sequence[Row],
    draft: Sequence[int],
    parents: Sequence[int],
    u_accept: Sequence[float],
    u_final: float,
    *,
    without_replacement: bool = True,
    variant: TraversalVariant = TRAVERSAL,
) -> list[int]:
    """One round of traversal verification. p_rows, q_rows: N + 1 rows (slot 0 the root, slot n + 1
    after node n); draft, parents, u_accept: N each. Returns the kept path's tokens, then y."""
    p_rows, q_rows = _float_rows(p_rows), _float_rows(q_rows)
    _check_draft(q_rows, draft, parents, without_replacement)
    st = _State(p_rows, q_rows, draft, parents)
    node = -1
    for is_test, n in tree_events(parents):
        if not is_test:
            st.enter(n)
        elif u_accept[n] < st.w[n + 1]:
            node = n
            break
        else:
            st.reject(n, without_replacement, variant)
    y = inverse_cdf_sample_scalar(st.p[node + 1], u_final)
    return [draft[m] for m in _path(parents, node)] + [y]


def verify_traversal_chain(
    p_rows: Sequence[Row], q_rows: Sequence[Row], draft: Sequence[int], u_accept: Sequence[float], u_final: float
) -> list[int]:
    """The chain special case with the chain rule's contract (gamma + 1 p rows, gamma q rows)."""
    q_full = list(q_rows) + [p_rows[len(draft)]]  # the leaf's q row is never read
    return verify_traversal(p_rows, q_full, draft, chain_parents(len(draft)), u_accept, u_final)


def traversal_kernel_law(
    p_rows: Sequence[Row],
    q_rows: Sequence[Row],
    draft: Sequence[int],
    parents: Sequence[int],
    *,
    without_replacement: bool = True,
    variant: TraversalVariant = TRAVERSAL,
) -> dict[tuple[int, int], Weight]:
    """Exact law of (accepted node, y) for a fixed tree (node -1: every root child rejected).

    The tests come in a fixed order, so the law is one pass: the k-th test accepts with
    probability prod_{j < k} (1 - w_j) w_k, the weights those of the all-rejected run.
    """
    _check_draft(q_rows, draft, parents, without_replacement)
    st = _State(p_rows, q_rows, draft, parents)
    law: dict[tuple[int, int], Weight] = {}
    reach = _one(p_rows[0][0])

    def stop_at(node: int, pr: Weight) -> None:
        row = st.p[node + 1]
        mass = row_sum(row)
        for y, v in enumerate(row):
            _add(law, (node, y), pr * v / mass)

    for is_test, n in tree_events(parents):
        if not is_test:
            st.enter(n)
            continue
        if reach * st.w[n + 1] != 0:
            stop_at(n, reach * st.w[n + 1])
        reach = reach * (1 - st.w[n + 1])
        if reach == 0:
            return law
        st.reject(n, without_replacement, variant)
    stop_at(-1, reach)
    return law


def _context(prefix: Tokens, parents: Sequence[int], tokens: Sequence[int], n: int) -> Tokens:
    return prefix + tuple(tokens[m] for m in _path(parents, n))


def tree_draws(
    draft: Model, prefix: Sequence[int], parents: Sequence[int], *, without_replacement: bool = True
) -> Iterator[tuple[list[int], Weight]]:
    """Every assignment of tokens to the tree's nodes with its probability: the children of a slot
    drawn from its draft row in index order. Token -1 marks a node that is not there (without
    replacement, its earlier siblings used up the row's support; then its subtree is absent too)."""
    prefix = tuple(prefix)
    _check_parents(parents)

    def assign(tokens: list[int], weight: Weight) -> Iterator[tuple[list[int], Weight]]:
        n = len(tokens)
        if n == len(parents):
            yield tokens, weight
            return
        if parents[n] >= 0 and tokens[parents[n]] < 0:
            yield from assign(tokens + [-1], weight)
            return
        q = draft(_context(prefix, parents, tokens, parents[n]))
        taken = [tokens[m] for m in range(n) if parents[m] == parents[n] and tokens[m] >= 0]
        taken = taken if without_replacement else []
        left = 1 - sum((q[t] for t in taken), q[0] * 0)
        if left == 0:
            yield from assign(tokens + [-1], weight)
            return
        for x, qx in enumerate(q):
            if qx != 0 and x not in taken:
                yield from assign(tokens + [x], weight * qx / left)

    yield from assign([], 1)


def traversal_round_law(
    target: Model,
    draft: Model,
    prefix: Sequence[int],
    parents: Sequence[int],
    *,
    without_replacement: bool = True,
    variant: TraversalVariant = TRAVERSAL,
) -> dict[Tokens, Weight]:
    """Law of the block one round emits: the tree's tokens drawn from ``draft`` (see
    :func:`tree_draws`; absent nodes pruned), then traversal verification."""
    prefix = tuple(prefix)
    law: dict[Tokens, Weight] = {}
    for tokens, weight in tree_draws(draft, prefix, parents, without_replacement=without_replacement):
        keep = [n for n in range(len(parents)) if tokens[n] >= 0]
        index = {n: i for i, n in enumerate(keep)}
        sub_parents = [index.get(parents[n], -1) for n in keep]
        sub_tokens = [tokens[n] for n in keep]
        slots = [-1] + keep
        p_rows = [target(_context(prefix, parents, tokens, s)) for s in slots]
        q_rows = [draft(_context(prefix, parents, tokens, s)) for s in slots]
        kl = traversal_kernel_law(
            p_rows, q_rows, sub_tokens, sub_parents, without_replacement=without_replacement, variant=variant
        )
        for (node, y), v in kl.items():
            _add(law, tuple(sub_tokens[m] for m in _path(sub_parents, node)) + (y,), weight * v)
    return law


def traversal_first_tokens_law(
    target: Model,
    draft: Model,
    prefix: Sequence[int],
    parents: Sequence[int],
    length: int,
    *,
    without_replacement: bool = True,
    variant: TraversalVariant = TRAVERSAL,
) -> dict[Tokens, Weight]:
    """Law of the first ``length`` tokens over rounds of traversal verification."""

    def one_round(c: Tokens) -> Mapping[Tokens, Weight]:
        return traversal_round_law(target, draft, c, parents, without_replacement=without_replacement, variant=variant)

    return rounds_first_tokens_law(one_round, prefix, length)


@dataclasses.dataclass
class TraversalResult:
    """tokens [B, depth + 1] (-1 after the emitted ones), num_accepted [B] (kept path length) and
    node [B] (the accepted node, -1 when every child of the root was rejected)."""

    tokens: np.ndarray
    num_accepted: np.ndarray
    node: np.ndarray

    def as_lists(self) -> list[list[int]]:
        return [row[: n + 1].tolist() for row, n in zip(self.tokens, self.num_accepted)]


def _batch_checks(x: np.ndarray, parents: Sequence[int], q: np.ndarray, without_replacement: bool) -> None:
    b = x.shape[0]
    bi = np.arange(b) if q.shape[0] != 1 else np.zeros(b, dtype=np.int64)
    for n, par in enumerate(parents):
        bad = np.nonzero(q[bi, par + 1, x[:, n]] <= 0)[0]
        if len(bad):
            raise InvalidDraftError(
                f"round {bad[0]}: node {n} has token {x[bad[0], n]} with q = 0 under its parent; it cannot "
                "have been drawn from q. Pass the rows the tree was actually drawn from"
            )
        if without_replacement:
            for m in range(n):
                if parents[m] == par and (x[:, m] == x[:, n]).any():
                    raise InvalidDraftError(
                        f"nodes {m} and {n} are siblings with the same token in some round; without "
                        "replacement siblings are distinct (pass without_replacement=False)"
                    )


class _BatchState:
    """_State for c rounds at once: rows [c, N + 1, V] (float64 copies), masses and weights [c, N + 1]."""

    def __init__(self, p: np.ndarray, q: np.ndarray, c: int):
        self.p = np.array(np.broadcast_to(p, (c,) + p.shape[1:]), dtype=np.float64)
        self.q = np.array(np.broadcast_to(q, (c,) + q.shape[1:]), dtype=np.float64)
        self.pm = np.ones(self.p.shape[:2])
        self.qm = np.ones(self.q.shape[:2])
        self.w = np.ones(self.p.shape[:2])
        self.ar = np.arange(c)

    def enter(self, n: int, par: int, x: np.ndarray) -> None:
        s = par + 1
        px = self.p[self.ar, s, x] / self.pm[:, s]
        qx = self.q[self.ar, s, x] / self.qm[:, s]
        num = self.w[:, s] * px
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            self.w[:, n + 1] = np.where(num >= qx, 1.0, num / qx)

    def reject(
        self, par: int, x: np.ndarray, rows: np.ndarray, without_replacement: bool, variant: TraversalVariant
    ) -> None:
        s = par + 1
        w = self.w[rows, s]
        res = w[:, None] * (self.p[rows, s] / self.pm[rows, s, None]) - self.q[rows, s] / self.qm[rows, s, None]
        np.maximum(res, 0.0, out=res)
        r = np.cumsum(res, axis=-1)[:, -1]  # sequential sums, as row_sum
        with np.errstate(divide="ignore", invalid="ignore"):
            if variant.remaining_mass:  # the negative control: min(1, r / (1 - Q(x)))
                left = 1.0 - self.q[rows, s, x[rows]] / self.qm[rows, s]
                self.w[rows, s] = np.where(left > 0, np.where(r >= left, 1.0, r / left), 1.0)
            else:
                den = (1.0 - w) + r
                self.w[rows, s] = np.where(den > 0, r / den, 1.0)
        pos = r > 0
        self.p[rows[pos], s] = res[pos]
        self.pm[rows[pos], s] = r[pos]
        if without_replacement:
            xr = x[rows]
            self.qm[rows, s] = self.qm[rows, s] - self.q[rows, s, xr]
            self.q[rows, s, xr] = 0.0


def _batch_traverse(
    p: np.ndarray,
    q: np.ndarray,
    x: np.ndarray,
    parents: Sequence[int],
    u: np.ndarray,
    without_replacement: bool,
    variant: TraversalVariant = TRAVERSAL,
) -> tuple[np.ndarray, np.ndarray]:
    """(accepted node [c], unnormalised last-token rows [c, V]) for one chunk of rounds."""
    c = x.shape[0]
    st = _BatchState(p, q, c)
    node = np.full(c, -1, dtype=np.int64)
    active = np.ones(c, dtype=bool)
    for is_test, n in tree_events(parents):
        if not is_test:
            st.enter(n, parents[n], x[:, n])
            continue
        acc = active & (u[:, n] < st.w[:, n + 1])
        node[acc] = n
        active &= ~acc
        rows = np.nonzero(active)[0]
        if not len(rows):
            break
        st.reject(parents[n], x[:, n], rows, without_replacement, variant)
    return node, st.p[st.ar, node + 1]


def _paths_table(parents: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """anc [N + 1, D] (slot s = node + 1: the path's nodes, -1 padded) and depth [N + 1]."""
    paths: list[list[int]] = [[]] + [_path(parents, n) for n in range(len(parents))]
    d = max(len(pa) for pa in paths)
    anc = np.full((len(paths), max(1, d)), -1, dtype=np.int64)
    for s, pa in enumerate(paths):
        anc[s, : len(pa)] = pa
    return anc, np.array([len(pa) for pa in paths], dtype=np.int64)


def verify_traversal_batch(
    draft_tokens: ArrayLike,
    parents: Sequence[int],
    q: ArrayLike,
    p: ArrayLike,
    u_accept: ArrayLike,
    u_final: ArrayLike,
    *,
    without_replacement: bool = True,
    variant: TraversalVariant = TRAVERSAL,
) -> TraversalResult:
    """B rounds of traversal verification on trees of one shape (``parents``, N nodes):

    draft_tokens [B, N] int; q, p [B, N + 1, V] (slot rows; leading dim 1 broadcasts);
    u_accept [B, N]; u_final [B]  ->  TraversalResult (tokens [B, depth + 1]).
    The same tokens as :func:`verify_traversal` given the same uniforms (``variant`` as there).
    Work O(B N V).
    """
    _check_parents(parents)
    p, q = _floats(p), _floats(q)
    x = np.asarray(draft_tokens, dtype=np.int64)
    n_nodes = len(parents)
    if x.ndim != 2 or x.shape[1] != n_nodes:
        raise ShapeError(f"draft_tokens must be [B, N] with N = len(parents) = {n_nodes}; got {x.shape}")
    b = x.shape[0]
    if p.ndim != 3 or q.shape != (q.shape[0],) + p.shape[1:] or p.shape[1] != n_nodes + 1:
        raise ShapeError(f"p and q must be [B, N + 1, V] with N + 1 = {n_nodes + 1}; got {p.shape} and {q.shape}")
    v = p.shape[2]
    if x.size and (x.min() < 0 or x.max() >= v):
        raise InvalidDraftError(f"draft_tokens must lie in [0, {v}); got range [{x.min()}, {x.max()}]")
    _batch_checks(x, parents, q, without_replacement)
    ua = np.asarray(u_accept, dtype=np.float64).reshape(b, n_nodes)
    uf = np.asarray(u_final, dtype=np.float64).reshape(b)
    node = np.empty(b, dtype=np.int64)
    final = np.empty(b, dtype=np.int64)
    chunk = max(1, (1 << 22) // (16 * (n_nodes + 1) * v))
    for s in range(0, b, chunk):
        e = min(b, s + chunk)
        pc = p[s:e] if p.shape[0] != 1 else p
        qc = q[s:e] if q.shape[0] != 1 else q
        node[s:e], rows = _batch_traverse(pc, qc, x[s:e], parents, ua[s:e], without_replacement, variant)
        final[s:e] = inverse_cdf_sample(rows, uf[s:e])
    anc, depth = _paths_table(parents)
    a = anc[node + 1]  # [B, D]
    tokens = np.full((b, anc.shape[1] + 1), -1, dtype=np.int64)
    tokens[:, :-1] = np.where(a >= 0, np.take_along_axis(x, np.maximum(a, 0), axis=1), -1) if n_nodes else -1
    k = depth[node + 1]
    tokens[np.arange(b), k] = final
    return TraversalResult(tokens, k, node)


def traversal_first_token_law_batch(
    draft_tokens: ArrayLike,
    parents: Sequence[int],
    q: ArrayLike,
    p: ArrayLike,
    *,
    without_replacement: bool = True,
    variant: TraversalVariant = TRAVERSAL,
) -> np.ndarray:
    """[B, V] exact law of the first token a round emits given each of B fixed trees of one shape.

    Inputs as :func:`verify_traversal_batch` (draft_tokens [B, N]; q, p [B, N + 1, V]); the rows of
    leaf slots are never read. The first token is the root child on the accepted node's path, or
    the token drawn from the root's last row when every child of the root is rejected; as in
    :func:`traversal_kernel_law`, the k-th test accepts with probability prod_{j < k} (1 - w_j) w_k.
    Averaged over trees drawn from the draft (children without replacement, as
    :func:`tree_draws`), the exact rule's law is the target row p_rows[0] (module docstring); so
    the mean over M drawn trees is an unbiased estimate of a variant's first-token law. Trees must
    be drawable (a sibling's token has q > 0 and siblings differ); work O(B N V).
    """
    _check_parents(parents)
    x = np.asarray(draft_tokens, dtype=np.int64)
    p, q = _floats(p), _floats(q)
    b, n_nodes = x.shape
    if p.shape[:2] != (b, n_nodes + 1) or q.shape != p.shape:
        raise ShapeError(f"p and q must be [B, N + 1, V] = [{b}, {n_nodes + 1}, V]; got {p.shape} and {q.shape}")
    st = _BatchState(p, q, b)
    head = [_path(parents, n)[0] for n in range(n_nodes)]  # the root child on each node's path
    law = np.zeros((b, p.shape[2]))
    reach = np.ones(b)
    rows = np.arange(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        for is_test, n in tree_events(parents):
            if not is_test:
                st.enter(n, parents[n], x[:, n])
                continue
            w = st.w[:, n + 1]
            law[rows, x[:, head[n]]] += reach * w
            reach = reach * (1.0 - w)
            st.reject(parents[n], x[:, n], rows, without_replacement, variant)
        law += reach[:, None] * (st.p[:, 0] / st.pm[:, 0, None])
    return law
