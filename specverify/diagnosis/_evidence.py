"""The evidence a diagnosis scores: each round of one audit unit, in the form of its events.

A round that drafted x_0 .. x_{g-1} and emitted the block b is *standard* when
b = x_0 .. x_{k-1}, y (k drafts kept, then one final token y: a replacement when k < g, the
bonus when k = g). Its probability given the drafts factorises into events, each conditional on
the ones before it (the decomposition every candidate law is scored on):

    P(b | x) = prod_{j<k} A_j  *  { (1 - A_k) R_k(y)   if k < g
                                   { B(y)               if k = g

with A_j the probability of keeping x_j, R_k the replacement law and B the bonus law; an
implementation that draws its own drafts adds prod_j D_j(x_j). A round whose block is not of
that form (a token after a replacement), or whose verification pass was asked about a prefix
other than the true one (the auditor then records no drafts), is a structural event of its own.

Shapes: R rounds, g = gamma, V vocabulary; row ids index the pair's [M, V] tables.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings

if TYPE_CHECKING:  # annotations only
    from ..harness import Generation

__all__ = ["RoundEvidence", "round_evidence", "RoundUnit"]


@dataclasses.dataclass
class RoundEvidence:
    """One unit's rounds (module docstring). -1 marks what the auditor could not see."""

    drafts: np.ndarray  # [R, g] drafted tokens
    k: np.ndarray  # [R] drafts kept
    y: np.ndarray  # [R] final token (replacement or bonus), -1 when truncated
    prow: np.ndarray  # [R, g + 1] target row of each position (row of the true prefix)
    qrow: np.ndarray  # [R, g] draft row of each position
    standard: np.ndarray  # [R] the block is drafts[:k] + [y]
    mismatch: np.ndarray  # [R] the verification pass saw another prefix (no drafts recorded)
    prev_rejected: np.ndarray  # [R] the previous round of the same sequence ended in a rejection
    spare: np.ndarray  # [R, g] drafts left over after the previous round's rejection (-1: none)
    drafted_by_impl: bool
    label: str = ""
    settings: SamplingSettings | None = None
    pair_kind: str = ""
    earlier_rejected: np.ndarray | None = None  # [R] some earlier round of the same sequence ended in a rejection
    first_round: np.ndarray | None = None  # [R] the first round of the same sequence
    prev_row: np.ndarray | None = None  # [R] target row of the token before position 0 (-1: unknown)
    tail: np.ndarray | None = None  # [R] tokens emitted after the first one that is not a kept draft
    emitted: np.ndarray | None = None  # [R] tokens the round emitted
    prefix_len: np.ndarray | None = None  # [R] tokens before the round: its prompt and earlier rounds (-1: unknown)
    prev_round: np.ndarray | None = None  # [R] the round before it in its sequence (-1: none)
    #: {context: [R, g + 1] target rows of each position on a wrong context (CONTEXTS)}; context pairs only
    ctx_rows: dict[str, np.ndarray] | None = None

    @property
    def gamma(self) -> int:
        return int(self.drafts.shape[1])

    @property
    def usable(self) -> np.ndarray:
        """[R] rounds whose events can be scored: standard, drafts seen, final token seen."""
        out: np.ndarray = self.standard & ~self.mismatch & (self.y >= 0)
        return out


#: what a round diagnosis scores of one unit: its evidence, its pair (duck-typed) and its settings
RoundUnit = tuple[RoundEvidence, Any, SamplingSettings | None]


def _blocks(gen: Generation, n_rounds: int, g: int) -> npt.NDArray[np.int64]:
    """[R, g + 1] emitted tokens by (round, position), -1 where nothing was recorded."""
    blocks = np.full((n_rounds, g + 1), -1, dtype=np.int64)
    rid = gen.rounds_of_tokens
    ok = gen.position <= g
    blocks[rid[ok], gen.position[ok]] = gen.tokens[ok]
    return blocks


def _token_rows(gen: Generation, n_rounds: int, g: int) -> npt.NDArray[np.int64]:
    rows = np.full((n_rounds, g + 1), -1, dtype=np.int64)
    rid = gen.rounds_of_tokens
    ok = gen.position <= g
    rows[rid[ok], gen.position[ok]] = gen.row[ok]
    return rows


def _sequence_links(
    gen: Generation, n_rounds: int, k: npt.NDArray[np.int64], drafts: npt.NDArray[np.int64], g: int
) -> tuple[np.ndarray, npt.NDArray[np.int64], np.ndarray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(prev_rejected [R], spare [R, g], earlier_rejected [R], first_round [R], previous round [R],
    -1 for none): what the rounds before each one in its sequence left, and where its sequence began."""
    seq_of_round = np.full(n_rounds, -1, dtype=np.int64)
    seq_of_round[gen.rounds_of_tokens] = gen.sequence
    # rounds of one sequence need not be consecutive (re-collected sequence rounds interleave
    # them): order by (sequence, round) and link each round to the one before it in its sequence
    order = np.lexsort((np.arange(n_rounds), seq_of_round))
    prev = np.full(n_rounds, -1, dtype=np.int64)
    same = (seq_of_round[order[1:]] == seq_of_round[order[:-1]]) & (seq_of_round[order[1:]] >= 0)
    prev[order[1:][same]] = order[:-1][same]
    prev_rej = (prev >= 0) & (k[np.maximum(prev, 0)] < g)
    # rejections before each round in its sequence (in (sequence, round) order)
    rej = (k[order] < g).astype(np.int64)
    first = np.r_[True, seq_of_round[order[1:]] != seq_of_round[order[:-1]]]
    cum = np.cumsum(rej)
    base = np.maximum.accumulate(np.where(first, cum - rej, 0))
    earlier = np.zeros(n_rounds, dtype=bool)
    earlier[order] = (cum - rej - base) > 0
    first_round = np.empty(n_rounds, dtype=np.int64)
    first_round[order] = order[np.maximum.accumulate(np.where(first, np.arange(n_rounds), 0))]
    spare = np.full((n_rounds, g), -1, dtype=np.int64)
    for r in np.nonzero(prev_rej)[0]:
        left = drafts[prev[r], k[prev[r]] + 1 :]
        spare[r, : len(left)] = left
    return prev_rej, spare, earlier, first_round, prev


#: wrong contexts a verification pass may be fed that the harness still records as the true prefix
#: and the drafts (a context list that already holds the drafts). A pass fed a shorter or reordered
#: context is recorded as another prefix (a mismatch) or as other drafts, which the state and
#: structure diagnoses read; tried here and left out: the prefix one token short, its last token
#: twice, the drafts reversed (none of their rounds is scored as a verified round).
CONTEXTS = {
    "drafts_twice": "the prefix, every draft, then the drafts before the row (the drafts appended to the prefix twice)",
}


def _context_tails(
    gen: Generation, n_rounds: int, prefix_len: npt.NDArray[np.int64], width: int, start: int
) -> np.ndarray:
    """[R, width] the last ``width`` ids of each round's prefix (its prompt, then what its sequence
    emitted before it); ``start`` (the start symbol) before a prefix's first token."""
    assert gen.prompts is not None
    order = np.argsort(gen.sequence, kind="stable")  # tokens by sequence, in order within each
    counts = np.bincount(gen.sequence, minlength=len(gen.prompts))
    parts, off, at, lo = [], np.zeros(len(gen.prompts), dtype=np.int64), 0, 0
    for s, prompt in enumerate(np.asarray(gen.prompts)):
        stream = np.concatenate([prompt[prompt >= 0], gen.tokens[order[lo : lo + counts[s]]]])
        parts.append(stream)
        off[s], at, lo = at, at + len(stream), lo + counts[s]
    big = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    seq = np.full(n_rounds, 0, dtype=np.int64)
    seq[gen.rounds_of_tokens] = gen.sequence
    pos = prefix_len[:, None] - width + np.arange(width)[None, :]  # [R, width] index in the stream
    out: np.ndarray = np.where(pos >= 0, big[np.clip(off[seq][:, None] + pos, 0, max(len(big) - 1, 0))], start)
    return out


def _context_rows(
    gen: Generation, pair: Any, drafts: npt.NDArray[np.int64], prefix_len: npt.NDArray[np.int64]
) -> dict[str, np.ndarray] | None:
    """{context: [R, g + 1]} the target row of each position had the pass been fed that wrong context
    (:data:`CONTEXTS`); None where the pair has no rows by context or the record keeps no prompts."""
    if gen.prompts is None or gen.draft_rows is None or not hasattr(pair, "rows_at") or (prefix_len < 0).any():
        return None
    R, g = drafts.shape
    k = int(pair.order)
    pre = _context_tails(gen, R, prefix_len, k + 1, int(pair.vocab_size))  # [R, k + 1]
    xs = np.where(drafts >= 0, drafts, 0)
    # each context's tail (pre's last ids, then what follows them) and where row j's window ends in it
    tails = {"drafts_twice": (np.concatenate([pre, xs, xs], 1), k + 1 + g, g)}
    out = {}
    for name, (T, end0, extra) in tails.items():
        rows = np.empty((R, g + 1), dtype=np.int64)
        for j in range(g + 1):
            windows = T[:, end0 + j - k : end0 + j]
            rows[:, j] = pair.rows_at(np.maximum(prefix_len + extra + j, 0), windows)
        out[name] = rows
    return out


def _prefix_lengths(gen: Generation, n_rounds: int, emitted: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """[R] each round's prefix length: its sequence's prompt, then what earlier rounds emitted
    (-1 where the record keeps no prompts)."""
    if gen.prompts is None:
        return np.full(n_rounds, -1, dtype=np.int64)
    seq = np.full(n_rounds, -1, dtype=np.int64)
    seq[gen.rounds_of_tokens] = gen.sequence
    order = np.lexsort((np.arange(n_rounds), seq))
    cum = np.cumsum(emitted[order])
    first = np.r_[True, seq[order[1:]] != seq[order[:-1]]]
    start = np.maximum.accumulate(np.where(first, cum - emitted[order], 0))
    before = np.empty(n_rounds, dtype=np.int64)
    before[order] = cum - emitted[order] - start
    prompt = (np.asarray(gen.prompts) >= 0).sum(1)
    out: npt.NDArray[np.int64] = np.where(seq >= 0, prompt[np.maximum(seq, 0)] + before, -1)
    return out


def _rows(
    gen: Generation, n_rounds: int, g: int, drafts: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], np.ndarray]:
    """(target rows [R, g + 1], draft rows [R, g], mismatch [R]) of every round."""
    if gen.draft_rows is None:  # positional pairs: rows are positions in the round
        prow = np.broadcast_to(np.arange(g + 1), (n_rounds, g + 1)).copy()
        return prow, prow[:, :g].copy(), np.zeros(n_rounds, dtype=bool)
    # context pairs: the rows of the drafted prefixes
    qrow = np.asarray(gen.draft_rows, dtype=np.int64)[:, :g]
    trow = _token_rows(gen, n_rounds, g)
    if gen.bonus_rows is not None:  # the bonus position's row, also where no bonus was emitted
        trow[:, g] = np.where(trow[:, g] >= 0, trow[:, g], np.asarray(gen.bonus_rows, dtype=np.int64))
    return np.concatenate([qrow, trow[:, g:]], axis=1), qrow, np.asarray((drafts < 0).all(1))


def round_evidence(
    gen: Generation,
    pair: Any,
    gamma: int,
    *,
    label: str = "",
    settings: SamplingSettings | None = None,
    pair_kind: str = "",
) -> RoundEvidence | None:
    """The rounds of one unit's :class:`~specverify.harness.Generation`, or None when the unit
    shows no rounds (generators, order-1 sequence samplers) or its laws are per token."""
    if gen.drafts is None or gen.law is not None or not len(gen.tokens):
        return None
    g = gamma
    n_rounds = len(gen.num_accepted)
    drafts = np.asarray(gen.drafts, dtype=np.int64)[:, :g]
    k = np.minimum(np.asarray(gen.num_accepted, dtype=np.int64), g)
    blocks = _blocks(gen, n_rounds, g)
    y = blocks[np.arange(n_rounds), k]
    kept = np.arange(g)[None, :] < k[:, None]
    standard = ~(kept & (blocks[:, :g] != drafts)).any(1)
    # a token after the final one: the round went on after its replacement
    after = np.arange(g + 1)[None, :] > k[:, None]
    standard &= ~(after & (blocks >= 0)).any(1)
    prow, qrow, mismatch = _rows(gen, n_rounds, g, drafts)
    prev_rej, spare, earlier, first_round, prev = _sequence_links(gen, n_rounds, k, drafts, g)
    # a non-standard block's shape: how many tokens follow its first departure from the drafts
    # (one: a token appended after the replacement; g - d: verification that went on)
    departs = np.concatenate([blocks[:, :g] != drafts, np.ones((n_rounds, 1), dtype=bool)], axis=1)
    emitted = (blocks >= 0).sum(1)
    tail = emitted - (np.argmax(departs, axis=1) + 1)
    prefix_len = _prefix_lengths(gen, n_rounds, emitted)
    # the row the token before position 0 was drawn from: the previous round's final position
    # (rows of the prefix minus its last token, which a pass that re-feeds that token reads)
    prev_row = np.where(prev >= 0, prow[np.maximum(prev, 0), k[np.maximum(prev, 0)]], -1)
    if gen.draft_rows is None:
        prev_row[:] = -1  # positional pairs: no row before the round
    return RoundEvidence(
        drafts,
        k,
        y,
        prow,
        qrow,
        standard,
        mismatch,
        prev_rej,
        spare,
        bool(gen.drafts_from_implementation),
        label,
        settings,
        pair_kind,
        earlier,
        first_round,
        prev_row,
        tail,
        emitted,
        prefix_len,
        prev,
        _context_rows(gen, pair, drafts, prefix_len),
    )
