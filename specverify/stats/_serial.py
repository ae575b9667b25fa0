"""Fresh randomness at every position: consecutive tokens independent given their laws.

Under H0 every emitted token's law, given everything emitted before it, is its row of the target
table, so its randomized PIT u_t = F(x_t-) + V p(x_t) (id order: the order an inverse-CDF sampler
walks) is U(0, 1) *given the past*, including u_{t-1}. A sampler that reuses randomness across
positions keeps every margin exact and breaks only this: the same uniform at two positions
(flashinfer#424/#425: "uniform samples not unique per position"), the bonus drawn with the last
draft's uniform, one noise vector shared by the positions of a round. The per-token tests cannot
see it; a table of consecutive pairs can.

Test: every token t + 1 that follows token t in the same sequence is put in a group by
(its position in the round, capped at ``max_position``; the cell of u_t among ``groups`` equal
cells). Within a group, the cell of u_{t+1} among ``cells`` equal cells has expected count
n_g / cells. A group depends on the past only (a predictable stratum), so the counts are sums of
independent uniform categorical draws given the groups (Anderson and Goodman's "stack of cards"
argument, as for a Markov chain's transition counts) and Pearson's statistic, summed over groups
with at least 10 expected per cell, is asymptotically chi-square with sum_g (cells - 1) degrees of
freedom. How good that is in the far tail, where an audit tests (about 1e-8 per test), was computed
exactly (by convolving the exact law of each group's statistic, ``scripts/serial_calibration.py
--exact-tail``, scripts/results/serial_calibration.txt): with 40 or 100 pairs per group,
P(X2 >= the chi-square 1e-8 quantile) is 0.73-0.95 times 1e-8 for 16 and 48 groups, but 1.04-1.08
times for 8 groups and up to 2.3 times for one group; so with fewer than ``FEW_GROUPS`` groups the
p-value is multiplied by ``FEW_GROUPS_FACTOR``.

Why not the pair (u_t, u_{t+1}) as a 2-D uniform table: u_t given that t + 1 follows in the same
round is *not* uniform (an accepted draft has law min(p, q) / beta, not p); only the conditional
law of u_{t+1} given the past is known, which is what the groups test.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ._gof import tv_interval
from ._results import Cell, GofResult
from ._stream import StreamLaw, pit_values

__all__ = ["serial_dependence_test", "SERIAL_GROUPS", "SERIAL_CELLS", "SERIAL_STRATUM"]

#: the stratum an audit reports this test under (the diagnosis reads it)
SERIAL_STRATUM = "consecutive tokens"

#: cells of the previous token's PIT that group the pairs, and cells of the next token's PIT
SERIAL_GROUPS = 4
SERIAL_CELLS = 4
#: positions in the round above this share one group (a round rarely reaches them)
SERIAL_MAX_POSITION = 8
#: pairs a group needs per cell of the next token's PIT to be tested
MIN_PAIRS_PER_CELL = 10
#: below this many groups the chi-square tail is too light for the exact law (module docstring) ...
FEW_GROUPS = 16
#: ... and the p-value is multiplied by this (the exact excess there is at most 2.3 at 1e-8)
FEW_GROUPS_FACTOR = 3.0
TEST_NAME = "consecutive tokens independent (fresh randomness per position)"


def serial_dependence_test(
    law: StreamLaw | ArrayLike,
    tokens: ArrayLike,
    rows: ArrayLike,
    sequence: ArrayLike,
    position: ArrayLike,
    *,
    rng: np.random.Generator,
    groups: int = SERIAL_GROUPS,
    cells: int = SERIAL_CELLS,
    max_position: int = SERIAL_MAX_POSITION,
) -> GofResult:
    """Pearson's test of u_{t+1} against U(0, 1) within each group of the past (module docstring).

    law: a :class:`StreamLaw`, or the probability table [M, V] itself (only its id-order cumulative
    sums are needed, so a table of one row per token need not pay for a StreamLaw's sorting);
    tokens, rows, sequence, position: [N] per emitted token (``rows`` index the table; tokens of a
    sequence in the order emitted, sequences in any order)."""
    tokens, rows, sequence, position = (np.asarray(a, dtype=np.int64) for a in (tokens, rows, sequence, position))
    lengths = {len(a) for a in (tokens, rows, sequence, position)}
    if len(lengths) > 1 or tokens.ndim != 1:
        raise ValueError(
            f"tokens, rows, sequence and position must be 1-D with one entry per emitted token; got lengths "
            f"{[len(a) for a in (tokens, rows, sequence, position)]}: pass them flattened in the same order"
        )
    order = np.argsort(sequence, kind="stable")  # a sequence's tokens consecutive, in emitted order
    u = _id_order_pit(law, tokens[order], rows[order], rng)
    seq, pos = sequence[order], position[order]
    follows = seq[1:] == seq[:-1]  # [N - 1] token i + 1 follows token i in its sequence
    n = int(follows.sum())
    prev = np.minimum((u[:-1][follows] * groups).astype(np.int64), groups - 1)
    nxt = np.minimum((u[1:][follows] * cells).astype(np.int64), cells - 1)
    where = np.minimum(pos[1:][follows], max_position)
    g = where * groups + prev
    counts = np.bincount(g * cells + nxt, minlength=(max_position + 1) * groups * cells).reshape(-1, cells)
    n_g = counts.sum(axis=1)
    keep = n_g >= MIN_PAIRS_PER_CELL * cells  # n_g depends on the groups (the past) only
    if not keep.any():
        return GofResult.empty(
            TEST_NAME, n=n, why=f"fewer than {MIN_PAIRS_PER_CELL * cells} consecutive pairs in every group"
        )
    o = counts[keep].astype(float)
    e = np.repeat(n_g[keep, None] / cells, cells, axis=1)
    x2 = float(((o - e) ** 2 / e).sum())
    df = int(keep.sum()) * (cells - 1)
    pvalue = float(special.chdtrc(df, x2)) * (FEW_GROUPS_FACTOR if keep.sum() < FEW_GROUPS else 1.0)
    tv, iv = tv_interval(o.ravel() / o.sum(), e.ravel() / e.sum(), int(o.sum()), o.size)
    return GofResult(
        test=TEST_NAME,
        statistic=x2,
        pvalue=min(1.0, pvalue),
        df=df,
        n=n,
        cells=int(o.size),
        tv_estimate=tv,
        tv_interval=iv,
        worst_cells=_worst_cells(np.nonzero(keep)[0], o, e, groups, cells, max_position),
        note=f"{n:,} consecutive pairs in {int(keep.sum())} groups (position in the round x the previous "
        f"token's PIT {_share(groups)}), the next token's PIT in {_share(cells)}s (id order)",
    )


def _id_order_pit(
    law: StreamLaw | ArrayLike, tokens: np.ndarray, rows: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The randomised PIT in id order (:func:`pit_values` with ``order='id'``, the same draws)."""
    if isinstance(law, StreamLaw):
        return pit_values(law, tokens, rows, rng, order="id")
    table = np.asarray(law, dtype=np.float64)
    p = table[rows, tokens]
    before = np.cumsum(table, axis=1)[rows, tokens] - p
    return np.asarray(before + rng.random(len(tokens)) * p)


def _share(k: int) -> str:
    return {2: "half", 4: "quarter", 5: "fifth", 10: "decile"}.get(k, f"1/{k} share")


def _worst_cells(
    group_ids: np.ndarray, o: np.ndarray, e: np.ndarray, groups: int, cells: int, max_position: int
) -> list[Cell]:
    """The five (group, cell) pairs furthest from expected, labelled in words."""
    z = (o - e) / np.sqrt(e)
    out = []
    for flat in np.argsort(-np.abs(z).ravel(), kind="stable")[:5]:
        r, c = divmod(int(flat), cells)
        at, prev = divmod(int(group_ids[r]), groups)
        where = f"position {at}{'+' if at == max_position else ''}"
        label = f"{where}, previous token's PIT {_share(groups)} {prev + 1}: next token's PIT {_share(cells)} {c + 1}"
        out.append(Cell(label, float(o[r, c]), float(e[r, c])))
    return out
