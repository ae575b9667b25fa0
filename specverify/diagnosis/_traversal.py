"""Law of the first token of a traversal-verification round on a 2 x 2 tree, for the tree scorer.

The round (:func:`specverify.catalogue.tree_steps.make_traversal_tree_step`, arXiv 2505.12398):
two children x0, x1 of the root drawn from the draft row q without replacement, two leaf children
under each drawn from the draft row after it, then traversal verification (rules in
:mod:`specverify.algorithms.traversal`). Summing over every tree is about V^6 terms (6e10 per
context at V = 64), and averaging the law given M whole drawn trees is too noisy at V = 64 (most of
the variance is which two tokens are the root's children). So the root's children are summed
exactly and only the leaves are drawn:

* The subtree of a root child x, entered with weight w, is accepted somewhere (the output then
  starts with x) with probability A_x(w), over its two leaves drawn from the draft row after x.
  Given the leaves (c2, c3) this is one closed form f(w | c2, c3) (:func:`subtree_accept`): the
  weights w_c2, w_c3 and the weight of x after both rejections, each residual mass a sum
  max(a P - b Q, 0) over a row, read off the row's sorted ratios Q / P (:class:`RowSums`).
* For the exact rule A_x(w) = w (the induction of :mod:`specverify.algorithms.traversal`). For a
  variant, A_x(w) = w + E[f_variant - f_exact], estimated with K leaf pairs drawn per table row
  (the rows after x are table rows, so the draws serve every context): the exact rule's f is a
  control variate that removes most of the leaves' variance.
* The root then has one closed form (:func:`first_token_law`): x0 ~ q, accepted through its
  subtree with a0 = A_x0(w0); else the root rejects x0 (new weight W1, residual P'), x1 ~ q
  without x0, a1 = A_x1(w1) with w1 = min(1, W1 P'(x1) / Q'(x1)); else y ~ P'' (the residual after
  rejecting x1, which depends on x0 alone: it is formed before x1 leaves the row):

      law(y) = q(y) a0(y) + sum_{x0 != y} q(x0) (1 - a0(x0)) q'(y | x0) a1(x0, y)
               + sum_{x0} q(x0) (1 - a0(x0)) B(x0) P''_x0(y),
      B(x0) = sum_{x1 != x0} q'(x1 | x0) (1 - a1(x0, x1)),   q'(. | x0) = q without x0, renormalised.

  With the leaves drawn independently for the roles of x0 and x1, the law is an unbiased estimate
  of the first token's law before each A is clipped to [0, 1] (the clip keeps it a law and moves
  each A towards its true value, at a small bias: at most 0.004 on a token at K = 4 in
  tests/test_traversal_first_token_law.py); exact given ``draws=None`` (every ordered leaf pair,
  weighted).
  w1 = min(1, s(x0) P'(x1) / q(x1)) with s(x0) = W1 (1 - q(x0)); under the wrong parent update
  s(x0) = min(r, 1 - q(x0)), the same r for most x0, so A is evaluated at about 2V points per
  context, K leaf pairs each (the exact rule's A is w itself: no leaves, and its law is p).
"""

from __future__ import annotations

import numpy as np

from ..algorithms.traversal import REMAINING_MASS, TRAVERSAL, TraversalVariant

__all__ = ["RowSums", "LeafDraws", "leaf_draws", "subtree_accept", "accept_prob", "first_token_law", "BRANCHING"]

BRANCHING = (2, 2)  # the tree this module models: two children of the root, two leaves under each


class RowSums:
    """sum_i max(a P_i - b Q_i, 0) over rows of a table pair, for arrays of (row, a, b), b > 0.

    The terms with Q_i / P_i < a / b are the positive ones, so the sum is a CP[k] - b CQ[k], k the
    count of such i among the row's sorted ratios and CP, CQ cumulative sums in that order.
    """

    def __init__(self, T: np.ndarray, D: np.ndarray) -> None:
        self.T, self.D = T, D
        n, v = T.shape
        with np.errstate(divide="ignore", invalid="ignore"):
            theta = np.where(T > 0, D / np.where(T > 0, T, 1.0), np.inf)
        order = np.argsort(theta, axis=1, kind="stable")
        ts = np.take_along_axis(theta, order, 1)
        self.v = v
        self.cp = np.concatenate([np.zeros((n, 1)), np.cumsum(np.take_along_axis(T, order, 1), 1)], 1)
        self.cq = np.concatenate([np.zeros((n, 1)), np.cumsum(np.take_along_axis(D, order, 1), 1)], 1)
        # one sorted key per (row, ratio): row + an increasing map of the ratio into [0, 0.5]
        self.keys = (np.arange(n)[:, None] + self._unit(ts)).ravel()

    @staticmethod
    def _unit(t: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            out: np.ndarray = np.where(np.isinf(t), 0.75, t / (1.0 + t) / 2.0)
        return out

    def sum_pos(self, row: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        t = np.where(a > 0, a / b, 0.0)
        k = np.searchsorted(self.keys, row + self._unit(t), side="left") - row * self.v
        k = np.where(a > 0, k, 0)
        out: np.ndarray = np.maximum(a * self.cp[row, k] - b * self.cq[row, k], 0.0)
        return out


def _capped(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """min(1, num / den) as :func:`~specverify.algorithms.block_verification.capped_ratio` (1 when num >= den)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(num >= den, 1.0, num / den)
    return out


def _update(variant: TraversalVariant, w: np.ndarray, r: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """A parent's weight after a child of draft probability ``qx`` is rejected (residual mass r)."""
    if variant.remaining_mass:
        left = 1.0 - qx
        return np.where(left > 0, _capped(r, left), 1.0)
    den = (1.0 - w) + r
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(den > 0, r / den, 1.0)
    return out


def subtree_accept(
    sums: RowSums,
    row: np.ndarray,
    w: np.ndarray,
    c2: np.ndarray,
    c3: np.ndarray,
    variants: tuple[TraversalVariant, ...] = (REMAINING_MASS, TRAVERSAL),
) -> list[np.ndarray]:
    """P(the subtree of a node is accepted somewhere | its two leaves c2, c3) under each variant:
    the node's rows are the table rows ``row``, entered with weight ``w`` (arrays of one shape;
    c2 != c3, both with q > 0). The leaves' gathers and the first residual are shared."""
    T, D = sums.T, sums.D
    p2, q2, p3, q3 = T[row, c2], D[row, c2], T[row, c3], D[row, c3]
    w2 = _capped(w * p2, q2)
    r1 = sums.sum_pos(row, w, np.ones_like(w))
    beta = 1.0 / (1.0 - q2)  # the draft row without c2, renormalised: beta Q
    pos = r1 > 0
    safe = np.where(pos, r1, 1.0)
    pc3 = np.where(pos, np.maximum(w * p3 - q3, 0.0) / safe, p3)  # P'(c3): the residual, or P when r1 = 0
    res2 = np.maximum(w * p2 - q2, 0.0) / safe
    out = []
    for variant in variants:
        w1 = _update(variant, w, r1, q2)
        w3 = _capped(w1 * pc3, beta * q3)
        # r2 = sum over the row of max(w1 P' - beta Q, 0) with Q(c2) = 0: P' = max(w P - Q, 0) / r1,
        # so off c2 each term is max(a P - b Q, 0), a = w1 w / r1, b = w1 / r1 + beta (P' = P when r1 = 0)
        alpha = np.where(pos, w1 / safe, w1)
        a, b = np.where(pos, alpha * w, w1), np.where(pos, alpha + beta, beta)
        at_c2 = w1 * np.where(pos, res2, p2)
        r2 = sums.sum_pos(row, a, b) - np.maximum(a * p2 - b * q2, 0.0) + at_c2
        w_end = _update(variant, w1, np.maximum(r2, 0.0), beta * q3)
        out.append(w2 + (1.0 - w2) * (w3 + (1.0 - w3) * w_end))
    return out


class LeafDraws:
    """Leaf pairs (c2, c3) of every table row with their weights [R, K] (weights sum to 1 per row)."""

    def __init__(self, c2: np.ndarray, c3: np.ndarray, weight: np.ndarray) -> None:
        self.c2, self.c3, self.weight = c2, c3, weight


def leaf_draws(D: np.ndarray, draws: int | None, rng: np.random.Generator | None = None) -> LeafDraws:
    """``draws`` leaf pairs per row of the draft table D [R, V], drawn without replacement (weight
    1 / draws each), or every ordered pair with its probability (``draws=None``: exact, K = V(V - 1)).
    A row with fewer than two tokens of q > 0 cannot hold two leaves: its pairs get weight 0."""
    n, v = D.shape
    if draws is None:
        c2, c3 = (g.ravel() for g in np.meshgrid(np.arange(v), np.arange(v), indexing="ij"))
        keep = c2 != c3
        c2, c3 = np.broadcast_to(c2[keep], (n, keep.sum())), np.broadcast_to(c3[keep], (n, keep.sum()))
        with np.errstate(divide="ignore", invalid="ignore"):
            wt = D[np.arange(n)[:, None], c2] * D[np.arange(n)[:, None], c3] / (1.0 - D[np.arange(n)[:, None], c2])
        return LeafDraws(np.array(c2), np.array(c3), np.nan_to_num(wt, nan=0.0, posinf=0.0))
    assert rng is not None, "drawn leaves need a generator"
    ok = (D > 0).sum(1) >= 2
    cum = np.cumsum(D, 1)
    u = rng.random((n, draws, 2))
    c2 = np.minimum((cum[:, None, :] < u[..., :1] * cum[:, -1, None, None]).sum(2), v - 1)
    rest = np.repeat(D[:, None, :], draws, 1)
    np.put_along_axis(rest, c2[..., None], 0.0, 2)
    cr = np.cumsum(rest, 2)
    c3 = np.minimum((cr < u[..., 1:] * cr[..., -1:]).sum(2), v - 1)
    wt = np.where(ok[:, None], 1.0 / draws, 0.0) * np.ones((n, draws))
    return LeafDraws(c2, c3, wt)


def accept_prob(
    sums: RowSums, leaves: LeafDraws, row: np.ndarray, w: np.ndarray, variant: TraversalVariant
) -> np.ndarray:
    """A_row(w), the subtree's acceptance probability over its leaves, at points (row, w) [P]:
    w for the exact rule; w + sum_k weight_k (f_variant - f_exact)(w | leaves k) for a variant,
    clipped to [0, 1] (module docstring). Rows that cannot hold two leaves keep w."""
    if variant.exact:
        return w
    c2, c3, wt = leaves.c2[row], leaves.c3[row], leaves.weight[row]  # [P, K]
    rr, ww = np.broadcast_to(row[:, None], c2.shape), np.broadcast_to(w[:, None], c2.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        f_variant, f_exact = subtree_accept(sums, rr, ww, c2, c3, (variant, TRAVERSAL))
        diff = f_variant - f_exact
    out: np.ndarray = np.clip(w + (np.nan_to_num(diff) * wt).sum(1), 0.0, 1.0)
    return out


def _root(p: np.ndarray, q: np.ndarray, variant: TraversalVariant) -> tuple[np.ndarray, ...]:
    """The root after rejecting x0, for every x0: (W1 [n, V], P' [n, V], s [n, V], P'' [n, V, V])."""
    r1 = np.maximum(p - q, 0.0).sum(1)
    left = 1.0 - q
    w_root = _update(variant, np.ones_like(q), np.broadcast_to(r1[:, None], q.shape), q)  # [n, x0]
    pos = (r1 > 0)[:, None]
    p1 = np.where(pos, np.maximum(p - q, 0.0) / np.where(pos, r1[:, None], 1.0), p)  # P', the same for every x0
    with np.errstate(divide="ignore", invalid="ignore"):
        q1 = q[:, None, :] / left[:, :, None]  # [n, x0, V]: q without x0, renormalised
    v = q.shape[1]
    q1[:, np.arange(v), np.arange(v)] = 0.0
    r2_rows = np.maximum(w_root[:, :, None] * p1[:, None, :] - q1, 0.0)  # formed before x1 leaves the row
    r2 = r2_rows.sum(2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p2 = np.where(r2 > 0, r2_rows / np.where(r2 > 0, r2, 1.0), p1[:, None, :])
    return w_root, p1, w_root * left, p2


def first_token_law(
    T: np.ndarray,
    D: np.ndarray,
    r0: np.ndarray,
    child: np.ndarray,
    leaves: tuple[LeafDraws, LeafDraws],
    variant: TraversalVariant = REMAINING_MASS,
    sums: RowSums | None = None,
) -> np.ndarray:
    """[n, V] law of the first token of a round (module docstring): root rows T[r0], D[r0] [n],
    the rows after each root child x T[child[:, x]], D[child[:, x]] ([n, V] row indices), leaves
    (for the roles of x0 and of x1) from :func:`leaf_draws`. Non-finite rows fall back to T[r0]."""
    sums = sums if sums is not None else RowSums(T, D)
    p, q = T[r0], D[r0]
    n, v = p.shape
    w0 = _capped(p, q)
    a0 = accept_prob(sums, leaves[0], child.ravel(), w0.ravel(), variant).reshape(n, v)
    w_root, p1, s, p2 = _root(p, q, variant)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(q > 0, p1 / q, 0.0)  # P'(x1) / q(x1); w1 = min(1, s(x0) rho(x1))
    live = q > 0
    s_common = np.where(live, s, -np.inf).max(1)
    special = live & (s < s_common[:, None] * (1 - 1e-12))
    a1 = np.broadcast_to(
        accept_prob(sums, leaves[1], child.ravel(), np.minimum(1.0, s_common[:, None] * rho).ravel(), variant).reshape(
            n, 1, v
        ),
        (n, v, v),
    ).copy()
    ci, xi = np.nonzero(special)
    if len(ci):
        w1 = np.minimum(1.0, s[ci, xi, None] * rho[ci])  # [S, V]
        a1[ci, xi] = accept_prob(sums, leaves[1], child[ci].ravel(), w1.ravel(), variant).reshape(len(ci), v)
    with np.errstate(divide="ignore", invalid="ignore"):
        q1 = np.where(live, q, 0.0)[:, None, :] / (1.0 - q)[:, :, None]  # q'(x1 | x0)
    q1[:, np.arange(v), np.arange(v)] = 0.0
    reach0 = np.where(live, q * (1.0 - a0), 0.0)  # [n, x0]: x0 drawn and its subtree rejected
    law = q * a0 + np.einsum("ab,abc->ac", reach0, q1 * a1)
    both = (q1 * (1.0 - a1)).sum(2)  # B(x0)
    law += np.einsum("ab,abc->ac", reach0 * both, p2)
    bad = ~np.isfinite(law).all(1)
    law[bad] = p[bad]
    return law
