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
from typing import Literal

import numpy as np

from ..dists import SamplingSettings
from ..lm.synthetic import TablePair
from ._records import RoundOutput

__all__ = ["ChainSampler", "Uniforms", "textbook_inverse_cdf"]


def textbook_inverse_cdf(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
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
    return np.minimum(idx, last).astype(np.int64)


@dataclasses.dataclass
class Uniforms:
    draft: np.ndarray  # [B, g]
    accept: np.ndarray  # [B, g]
    final: np.ndarray  # [B]
    target: np.ndarray  # [B, g + 1]  (sample-and-match and OR-accept rules)


def _first_false(ok):
    g = ok.shape[1]
    bad = ~ok
    return np.where(bad.any(1), bad.argmax(1), g)


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

    def draft_rows_sampled(self, pair: TablePair, ridx, settings) -> np.ndarray:
        return pair.draft_table(settings)[ridx]

    def draft_rows_reported(self, pair: TablePair, ridx, settings, sampled) -> np.ndarray:
        return sampled

    def draft_token(self, q_sampled, u, j, U) -> np.ndarray:
        return textbook_inverse_cdf(q_sampled, u)

    def target_rows(self, pair: TablePair, ridx, settings, *, bonus: bool) -> np.ndarray:
        return pair.target_table(settings)[ridx]

    def accept(self, px, qx, U: Uniforms, ctx) -> np.ndarray:
        """[B, g] acceptance decisions. ctx gives x, P (target rows) etc. for rules that need them."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return U.accept < px / qx

    def residual_weights(self, p_row, q_row, x) -> np.ndarray:
        w = np.maximum(p_row - q_row, 0.0)
        empty = ~(w > 0).any(-1)
        w[empty] = p_row[empty]
        return w

    def draw(self, weights, u) -> np.ndarray:
        """The bonus draw (and, unless draw_residual is overridden, the replacement draw)."""
        return textbook_inverse_cdf(weights, u)

    def draw_residual(self, weights, u) -> np.ndarray:
        return self.draw(weights, u)

    def final_uniform(self, U: Uniforms, n_acc) -> np.ndarray:
        return U.final

    def next_context(self, tokens, n_acc, drafts) -> np.ndarray:
        return tokens[np.arange(len(n_acc)), n_acc]

    def continue_after_rejection(self) -> bool:
        return False

    # -- the round -------------------------------------------------------------------------
    def round(
        self, pair: TablePair, ctx: np.ndarray, gamma: int, rng: np.random.Generator, settings=None
    ) -> RoundOutput:
        b, g = len(ctx), gamma
        U = self.uniforms(rng, b, g)
        ar = np.arange(b)
        P_rows: list[np.ndarray] = []
        Q_rows: list[np.ndarray] = []
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

    def _round_no_stop(self, P, Q, X, ok, U):
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
