"""A vectorised chain speculative sampler over table models, built from overridable hooks.

The reference behaviour is the full rule of :mod:`specverify.algorithms.chain_reference`; every
catalogued bug is a subclass that overrides one hook, the way the real bug sat in one place of a
real engine. Shapes (B rounds or sequences processed together, V vocabulary, g = gamma):

    draft rows sampled   [B, V] per position     draft_rows_sampled
    draft rows reported  [B, V] per position     draft_rows_reported  (the q the verifier sees)
    target rows          [B, V] per position     target_rows
    acceptance           [B, g]                  accept
    final token          [B]                     final (residual after a rejection, bonus otherwise)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings
from ..lm.synthetic import TablePair
from ._records import RoundOutput

__all__ = ["ChainSampler", "Uniforms", "textbook_inverse_cdf"]


def textbook_inverse_cdf(weights: npt.ArrayLike, u: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """First token id i with cumsum(w)[i] > u * sum(w), rows [..., V] and uniforms [...].

    The catalogue models other engines, whose inverse-CDF draws walk the vocabulary in id order;
    specverify's own kernels use the two-level order of :mod:`specverify.dists` instead (so that
    its scalar, numpy and torch forms agree token for token). The order matters to the bugs
    that reuse a uniform: they move mass along the sampler's own order. Zero-weight tokens are
    never returned."""
    w = np.asarray(weights, dtype=np.float64)
    c = np.cumsum(w, axis=-1)
    thr = np.asarray(u, dtype=np.float64) * c[..., -1]
    idx = (c <= thr[..., None]).sum(-1)
    # u * total can round to total: fall back to the last token of positive weight.
    last = w.shape[-1] - 1 - np.argmax((w > 0)[..., ::-1], axis=-1)
    out: npt.NDArray[np.int64] = np.minimum(idx, last).astype(np.int64)
    return out


@dataclasses.dataclass
class Uniforms:
    draft: npt.NDArray[np.float64]  # [B, g]
    accept: npt.NDArray[np.float64]  # [B, g]
    final: npt.NDArray[np.float64]  # [B]
    target: npt.NDArray[np.float64]  # [B, g + 1]  (sample-and-match and OR-accept rules)


def _first_false(ok: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    g = ok.shape[1]
    bad = ~ok
    first: npt.NDArray[np.int64] = np.where(bad.any(1), bad.argmax(1), g)
    return first


class ChainSampler:
    """Reference chain speculative sampling (full rule) over a :class:`TablePair`.

    Subclasses set ``name``, ``exact`` and a docstring naming the root cause, and override hooks.
    """

    name = "reference"
    exact = True
    #: settings the entry needs to show itself (None: the case's own)
    needs: SamplingSettings | None = None
    #: 'kernel' (position rows) or 'sequence' (Markov; state bugs only show there)
    harness: Literal["kernel", "sequence"] = "kernel"
    #: where the bug was reported (issue or PR) or "structural mutant"
    source = ""
    #: the rule the sampler claims to implement, with drafts drawn from the pair's draft table;
    #: 'full' lets the audit test each stratum of a round against its exact law
    rule: str | None = "full"
    #: whether the sampler draws its own drafts (a kernel under audit is handed the auditor's)
    draws_drafts = True

    # -- hooks -----------------------------------------------------------------------------
    def uniforms(self, rng: np.random.Generator, b: int, g: int) -> Uniforms:
        return Uniforms(rng.random((b, g)), rng.random((b, g)), rng.random(b), rng.random((b, g + 1)))

    def draft_rows_sampled(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        return pair.draft_table(settings)[ridx]

    def draft_rows_reported(
        self,
        pair: TablePair,
        ridx: npt.NDArray[np.int64],
        settings: SamplingSettings | None,
        sampled: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        return sampled

    def draft_token(
        self, q_sampled: npt.NDArray[np.float64], u: npt.NDArray[np.float64], j: int, U: Uniforms
    ) -> npt.NDArray[np.int64]:
        return textbook_inverse_cdf(q_sampled, u)

    def target_rows(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None, *, bonus: bool
    ) -> npt.NDArray[np.float64]:
        return pair.target_table(settings)[ridx]

    def accept(
        self,
        px: npt.NDArray[np.float64],
        qx: npt.NDArray[np.float64],
        U: Uniforms,
        ctx: dict[str, npt.NDArray[Any]],
    ) -> npt.NDArray[np.bool_]:
        """[B, g] acceptance decisions. ctx gives x, P (target rows) etc. for rules that need them."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return U.accept < px / qx

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        w = np.maximum(p_row - q_row, 0.0)
        empty = ~(w > 0).any(-1)
        w[empty] = p_row[empty]
        return w

    def draw(self, weights: npt.NDArray[np.float64], u: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """The bonus draw (and, unless draw_residual is overridden, the replacement draw)."""
        return textbook_inverse_cdf(weights, u)

    def draw_residual(self, weights: npt.NDArray[np.float64], u: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        return self.draw(weights, u)

    def final_uniform(self, U: Uniforms, n_acc: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return U.final

    def next_context(
        self, tokens: npt.NDArray[np.int64], n_acc: npt.NDArray[np.int64], drafts: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        return tokens[np.arange(len(n_acc)), n_acc]

    def continue_after_rejection(self) -> bool:
        return False

    # -- the round -------------------------------------------------------------------------
    def round(
        self,
        pair: TablePair,
        ctx: npt.NDArray[np.int64],
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        b, g = len(ctx), gamma
        U = self.uniforms(rng, b, g)
        ar = np.arange(b)
        P_rows: list[npt.NDArray[np.float64]] = []
        Q_rows: list[npt.NDArray[np.float64]] = []
        X = np.empty((b, g), dtype=np.int64)
        c = ctx
        for j in range(g):
            ridx = pair.row_index(c, j)
            qs = self.draft_rows_sampled(pair, ridx, settings)
            X[:, j] = self.draft_token(qs, U.draft[:, j], j, U)
            Q_rows.append(self.draft_rows_reported(pair, ridx, settings, qs))
            P_rows.append(self.target_rows(pair, ridx, settings, bonus=False))
            c = X[:, j]
        P_rows.append(self.target_rows(pair, pair.row_index(c, g), settings, bonus=True))
        P = np.stack(P_rows, 1)  # [B, g + 1, V]
        Q = np.stack(Q_rows, 1)  # [B, g, V]
        px = P[ar[:, None], np.arange(g)[None, :], X]
        qx = Q[ar[:, None], np.arange(g)[None, :], X]
        ok = self.accept(px, qx, U, dict(X=X, P=P, Q=Q))
        if self.continue_after_rejection():
            return self._round_no_stop(P, Q, X, ok, U)
        n_acc = _first_false(ok)
        stop = n_acc < g
        p_stop = P[ar, n_acc]
        u_fin = self.final_uniform(U, n_acc)
        y = np.empty(b, dtype=np.int64)
        if stop.any():
            w = self.residual_weights(p_stop[stop], Q[ar[stop], n_acc[stop]], X[ar[stop], n_acc[stop]])
            y[stop] = self.draw_residual(w, u_fin[stop])
        if (~stop).any():
            y[~stop] = self.draw(p_stop[~stop], u_fin[~stop])
        tokens = np.full((b, g + 1), -1, dtype=np.int64)
        tokens[:, :g] = np.where(np.arange(g)[None, :] < n_acc[:, None], X, -1)
        tokens[ar, n_acc] = y
        return RoundOutput(tokens, n_acc, X, self.next_context(tokens, n_acc, X))

    def _round_no_stop(
        self,
        P: npt.NDArray[np.float64],
        Q: npt.NDArray[np.float64],
        X: npt.NDArray[np.int64],
        ok: npt.NDArray[np.bool_],
        U: Uniforms,
    ) -> RoundOutput:
        # Bug shape: a rejection emits its replacement but verification goes on with the drafts
        # that were conditioned on the rejected token.
        b, g = X.shape
        ar = np.arange(b)
        tokens = np.empty((b, g + 1), dtype=np.int64)
        for j in range(g):
            w = self.residual_weights(P[:, j], Q[:, j], X[:, j])
            y = self.draw_residual(w, U.target[:, j])
            tokens[:, j] = np.where(ok[:, j], X[:, j], y)
        tokens[:, g] = self.draw(P[:, g], U.final)
        n = np.full(b, g)
        return RoundOutput(tokens, n, X, tokens[ar, g])
