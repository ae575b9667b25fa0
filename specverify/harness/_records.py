"""What an audited implementation emitted, in the form the statistics consume.

Shapes: N emitted tokens, R rounds, g = gamma, V vocabulary.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

#: the id that pads a round's tokens after the emitted ones (and a sequence's prompt, drafts and draft
#: rows in the records); never a token: ids lie in [0, vocabulary)
PAD = -1

__all__ = ["PAD", "RoundOutput", "Generation", "concat_generations"]


@dataclasses.dataclass
class RoundOutput:
    """One batch of rounds."""

    tokens: npt.NDArray[np.int64]  # [B, g + 1], -1 after the emitted ones
    num_accepted: npt.NDArray[np.int64]  # [B]
    drafts: npt.NDArray[np.int64]  # [B, g]
    next_context: npt.NDArray[np.int64]  # [B] the sampler's own state after the round


@dataclasses.dataclass(kw_only=True)
class Generation:
    """A stream of emitted tokens with what the auditor needs to know each one's law.

    The law of token i is row ``row[i]`` of the pair's target table, or, when ``law`` is given
    (laws that depend on the whole history, e.g. a repetition penalty), ``law[row[i]]``."""

    tokens: npt.NDArray[np.int64]  # [N] emitted token ids, in order within each sequence
    row: npt.NDArray[np.int64]  # [N] law row of each token (from the true prefix, never from the implementation)
    position: npt.NDArray[np.int64]  # [N] position within its round (0 = first emitted)
    sequence: npt.NDArray[np.int64]  # [N] which sequence / round it belongs to
    num_accepted: npt.NDArray[np.int64]  # [R] accepted drafts per round
    rounds: int
    drafts: npt.NDArray[np.int64] | None = None  # [R, g] drafted tokens per round (kernel harness)
    drafts_from_implementation: bool = False  # drawn by the implementation, not by the auditor
    law: npt.NDArray[np.float64] | None = None  # [M', V] per-token law rows, when not a table of the pair
    draft_rows: npt.NDArray[np.int64] | None = None  # [R, g] row of each proposed draft's context (context pairs)
    round_id: npt.NDArray[np.int64] | None = None  # [N] round of each token, where a sequence spans several rounds
    prompts: npt.NDArray[np.int64] | None = None  # [S, L] prompt of each sequence, -1 padded (context runs)
    paths: npt.NDArray[np.int64] | None = None  # [R] leaves of each round's target passes (round steps; > 1: a tree)
    bonus_rows: npt.NDArray[np.int64] | None = None  # [R] row after all gamma drafts (-1: fewer drafts); context pairs

    @property
    def rounds_of_tokens(self) -> npt.NDArray[np.int64]:
        """[N] index into ``num_accepted`` of each token's round."""
        return self.sequence if self.round_id is None else self.round_id

    @classmethod
    def empty(cls) -> Generation:
        z = np.zeros(0, dtype=np.int64)
        return cls(tokens=z, row=z, position=z, sequence=z, num_accepted=z, rounds=0)


def concat_generations(parts: list[Generation]) -> Generation:
    """One Generation from consecutive batches (sequence ids and law rows renumbered)."""
    if not parts:
        return Generation.empty()
    seq_off, law_off = 0, 0
    toks: list[npt.NDArray[np.int64]] = []
    rows: list[npt.NDArray[np.int64]] = []
    pos: list[npt.NDArray[np.int64]] = []
    seqs: list[npt.NDArray[np.int64]] = []
    laws: list[npt.NDArray[np.float64]] = []
    for g in parts:
        toks.append(g.tokens)
        pos.append(g.position)
        seqs.append(g.sequence + seq_off)
        rows.append(g.row + law_off)
        seq_off += int(g.sequence.max()) + 1 if len(g.sequence) else 0
        if g.law is not None:
            laws.append(g.law)
            law_off += len(g.law)
    if laws and len(laws) != len(parts):
        raise ValueError("cannot concatenate generations with and without per-token laws")

    def cat(field: str) -> npt.NDArray[np.int64] | None:
        arrs = [getattr(g, field) for g in parts]
        return np.concatenate(arrs) if all(a is not None for a in arrs) else None

    round_ids = None
    given_ids = [g.round_id for g in parts if g.round_id is not None]
    if len(given_ids) == len(parts):
        offsets = np.cumsum([0] + [len(g.num_accepted) for g in parts[:-1]])
        round_ids = np.concatenate([r + o for r, o in zip(given_ids, offsets)])

    prompts = None
    given = [g.prompts for g in parts if g.prompts is not None]
    if len(given) == len(parts):
        width = max(p.shape[1] for p in given)
        prompts = np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=PAD) for p in given])
    return Generation(
        tokens=np.concatenate(toks),
        row=np.concatenate(rows),
        position=np.concatenate(pos),
        sequence=np.concatenate(seqs),
        num_accepted=np.concatenate([g.num_accepted for g in parts]),
        rounds=sum(g.rounds for g in parts),
        drafts=cat("drafts"),
        drafts_from_implementation=parts[0].drafts_from_implementation,
        law=np.concatenate(laws) if laws else None,
        draft_rows=cat("draft_rows"),
        round_id=round_ids,
        prompts=prompts,
        paths=cat("paths"),
        bonus_rows=cat("bonus_rows"),
    )
