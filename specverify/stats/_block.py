"""White-box strata of a declared block-verification rule (Sun et al., ICLR 2025; ``--rule block``).

Block verification keeps tau drafts, tau the largest i with u_i < h_i (the thresholds of
:mod:`specverify.algorithms.block_verification`), then draws one token from the residual
(w_tau p_{tau+1} - q_{tau+1})+ (tau < gamma) or from p_{gamma+1} (the bonus). Given the drafts of a
round every piece of that is computable, so each piece is a stratum tested against its own exact
law, and a FAIL says which piece broke:

* the number of drafts kept given the drafts ~ P(tau = i | x) = h_i prod_{j > i} (1 - h_j): a
  Pearson test on (tau, band of the round's expected tau) cells, the expected counts summed over
  rounds (a sum of unequal categorical laws has a covariance below the multinomial one, so the
  chi-square reference is conservative);
* the token after no kept draft ~ (p_1 - q_1)+ / beta (the chain rule's residual: w_0 = 1);
* the token after 1 <= tau < gamma kept drafts ~ (w_tau p_{tau+1} - q_{tau+1})+ / r_tau, each against
  its own round's row (the weight w_tau is the round's);
* bonus tokens (tau = gamma) ~ p_{gamma+1};
* drafts ~ q, when the implementation drew them (round steps).

The rows come either positional (kernels: P [gamma + 1, V] and Q [gamma, V] for every round) or
per round from a context pair's tables (round steps: the rows of each draft's context).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from ..algorithms.block_verification import BLOCK, BlockVariant, block_stop_rows, block_tau_law
from ._gof import cells_result, pool_cells
from ._results import Cell, GofResult
from ._stratified import StratumResult, _pooled_stream, token_at_stop

__all__ = ["WHITEBOX_BLOCK_STRATA", "BlockRows", "whitebox_block_tests", "kept_given_drafts_test"]

#: the most strata :func:`whitebox_block_tests` returns (an audit plans for them)
WHITEBOX_BLOCK_STRATA = 5
_BANDS = 3  # bands of a round's expected tau (by the rounds' own tertiles)
_CHUNK = 4096  # rounds whose [chunk, gamma + 1, V] rows are gathered at once
_MAX_ROUNDS = 50_000  # rounds per last-token stratum


@dataclasses.dataclass(frozen=True)
class BlockRows:
    """Where each round's rows come from: positional (``draft_rows`` None: P [g + 1, V], Q [g, V])
    or a context pair's tables P, Q [M, V] with the row of each draft's context, draft_rows [R, g]."""

    P: np.ndarray
    Q: np.ndarray
    draft_rows: np.ndarray | None = None

    def rounds(self, idx: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
        """(p [n or 1, g + 1, V], q [n or 1, g, V]) of the rounds ``idx``. Context rows: position g is
        a stand-in (the rule's tau law and residuals never read p_{gamma+1})."""
        if self.draft_rows is None:
            return self.P[None, : g + 1], self.Q[None, :g]
        r = self.draft_rows[idx]
        p = self.P[np.concatenate([r, r[:, -1:]], axis=1)]
        return p, self.Q[r]


def kept_given_drafts_test(law: np.ndarray, tau: np.ndarray) -> GofResult:
    """Pearson test of each round's kept-draft count against its own law ``law`` [R, g + 1], on cells
    (tau, band of the round's expected tau); a count of probability 0 is an exact failure."""
    g = law.shape[1] - 1
    name = "kept drafts given the drafts"
    n = len(tau)
    if n == 0:
        return GofResult.empty(name, why="no rounds")
    at = law[np.arange(n), tau]
    if (at <= 0).any():
        r = int(np.nonzero(at <= 0)[0][0])
        return GofResult.exact_failure(
            name, n=n, why=f"a round kept {int(tau[r])} drafts, which the block rule gives probability 0 for its drafts"
        )
    mean = law @ np.arange(g + 1)
    edges = np.quantile(mean, np.linspace(0, 1, _BANDS + 1)[1:-1])
    band = np.searchsorted(edges, mean, side="right")
    k = g + 1
    obs = np.bincount(band * k + tau, minlength=_BANDS * k).astype(np.float64)
    exp = np.zeros(_BANDS * k)
    np.add.at(exp, (band[:, None] * k + np.arange(k)[None, :]).ravel(), law.ravel())
    grp = pool_cells(exp)
    labels = [f"tau = {c % k} (expected-tau band {c // k + 1} of {_BANDS})" for c in range(_BANDS * k)]
    keep = grp >= 0
    m = int(grp.max()) + 1 if keep.any() else 0
    o = np.bincount(grp[keep], weights=obs[keep], minlength=m)
    e = np.bincount(grp[keep], weights=exp[keep], minlength=m)
    members = [np.nonzero(grp == i)[0].tolist() for i in range(m)]
    glabels = [" + ".join(labels[j] for j in mem) for mem in members]
    res = cells_result(f"{name} (Pearson)", o, e, glabels, lambda_="pearson", members=members)
    res.worst_cells = [Cell(c.label, c.observed, c.expected) for c in res.worst_cells]
    return res


def _laws(rows: BlockRows, drafts: np.ndarray, variant: BlockVariant) -> tuple[np.ndarray, np.ndarray]:
    """(w [R, g + 1], law of tau [R, g + 1]) of every round, in chunks."""
    r, g = drafts.shape
    w, law = np.empty((r, g + 1)), np.empty((r, g + 1))
    for s in range(0, r, _CHUNK):
        idx = np.arange(s, min(r, s + _CHUNK))
        p, q = rows.rounds(idx, g)
        w[idx], law[idx] = block_tau_law(p, q, drafts[idx], variant)
    return w, law


def _stop_stratum(
    name: str,
    rows: BlockRows,
    w: np.ndarray,
    tau: np.ndarray,
    final: np.ndarray,
    idx: np.ndarray,
    variant: BlockVariant,
    rng: np.random.Generator,
) -> StratumResult | None:
    """The last tokens of the rounds ``idx`` against their laws. A round's law is a function of
    (tau, w_tau, the row at tau), so each distinct key's law is computed once (the first
    ``_MAX_ROUNDS`` rounds are tested: a stated size that keeps the memory to a few MiB)."""
    idx = idx[:_MAX_ROUNDS]
    if not len(idx):
        return None
    g = w.shape[1] - 1
    ctx = rows.draft_rows[idx, np.minimum(tau[idx], g - 1)] if rows.draft_rows is not None else np.zeros(len(idx))
    key = np.stack([tau[idx], w[idx, tau[idx]], ctx], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    rep = idx[first]
    laws = np.empty((len(rep), rows.P.shape[1]))
    for s in range(0, len(rep), _CHUNK):
        part = rep[s : s + _CHUNK]
        p, q = rows.rounds(part, g)
        laws[s : s + len(part)] = block_stop_rows(p, q, w[part], tau[part], variant)
    return _pooled_stream(name, laws, final[idx], np.asarray(inverse).ravel(), rng)


# long: the list of white-box strata, each a few lines; the list is the point
def whitebox_block_tests(
    tokens: ArrayLike,
    position: ArrayLike,
    round_ids: ArrayLike,
    num_accepted: ArrayLike,
    rows: BlockRows,
    *,
    drafts: ArrayLike,
    token_rows: ArrayLike | None = None,
    drafts_from_implementation: bool = False,
    rng: np.random.Generator | None = None,
    variant: BlockVariant = BLOCK,
) -> list[StratumResult]:
    """The white-box strata of block verification (module docstring), over every round whose drafts
    are all known. tokens, position, round_ids: [N] per emitted token (token_rows: the row of each
    token's true prefix, context pairs); num_accepted [R]; drafts [R, g] (-1: not proposed)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    tokens, position, round_ids = (np.asarray(a, dtype=np.int64) for a in (tokens, position, round_ids))
    drafts = np.asarray(drafts, dtype=np.int64)
    g = drafts.shape[1]
    tau_all = np.minimum(np.asarray(num_accepted, dtype=np.int64), g)
    final_all = token_at_stop(tokens, position, round_ids, tau_all)
    # a round cut at the sequence's length shows no last token: its cut depends on tau only, so the
    # last tokens that are seen keep their law given tau
    seen_all = np.zeros(len(tau_all), dtype=bool)
    seen_all[round_ids[position == tau_all[round_ids]]] = True
    out: list[StratumResult] = []
    if drafts_from_implementation and rows.draft_rows is not None:
        proposed = drafts >= 0
        r = _pooled_stream("draft tokens ~ q", rows.Q, drafts[proposed], rows.draft_rows[proposed], rng)
        if r:
            out.append(r)
    full = np.nonzero((drafts >= 0).all(axis=1))[0]
    if not len(full) or g == 0:
        return out
    sub = BlockRows(rows.P, rows.Q, None if rows.draft_rows is None else rows.draft_rows[full])
    x, tau, final, seen = drafts[full], tau_all[full], final_all[full], seen_all[full]
    w, law = _laws(sub, x, variant)
    out.append(StratumResult("kept drafts given the drafts ~ block law", kept_given_drafts_test(law, tau)))
    for name, m in (
        ("token after no kept draft ~ (p - q)+", seen & (tau == 0)),
        ("token after tau kept drafts ~ (w_tau p - q)+", seen & (tau > 0) & (tau < g)),
    ):
        r = _stop_stratum(name, sub, w, tau, final, np.nonzero(m)[0], variant, rng)
        if r:
            out.append(r)
    bonus = position == g
    if rows.draft_rows is None:
        r = _pooled_stream("bonus tokens ~ p", rows.P[g:], tokens[bonus], np.zeros(int(bonus.sum()), np.int64), rng)
    else:
        assert token_rows is not None, "context rows need each token's row"
        r = _pooled_stream("bonus tokens ~ p", rows.P, tokens[bonus], np.asarray(token_rows)[bonus], rng)
    if r:
        out.append(r)
    return out
