"""Diagnosis of units whose laws depend on the history (penalties): token by token.

A unit with a repetition / presence / frequency penalty has no table of laws: the auditor keeps
each token's law, computed from its true prefix. Its rounds cannot be scored event by event,
but the output law of each class is known token by token, because in each class the rule itself
is exact for some wrong target (draft and target then agree on it, or the draft does not
matter):

    target                            p with the penalty over the whole true prefix
    repetition_penalty_draft_only     p without the penalty (only the draft is penalised)
    repetition_penalty_stale_history  p with the penalty over the prefix at the start of the
                                      round (the drafts before each row are not in its history)
    top_p_before_temperature,         p with the penalty, then the sampling steps in another order
    top_p_before_top_k_target         on the target (a pipeline-order bug: the combined setting of
                                      the parity grid is the only one with both knobs, and it has
                                      a penalty)

Each token's prefix is rebuilt from its sequence's prompt (kept by the recorder for units with
per-token laws) and the tokens emitted before it; its pair row is ``pair.row_of(prefix)``. The
scores are summed log-probabilities (floored at EPS) and the G statistic on cells (the token's
history status: unseen, seen at the round's start, seen only among the round's earlier tokens x
its target-mass band), as in :mod:`._score`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings, probs_from_logits, process_logits
from ..harness import history_counts
from ._diagnose import NOT_KNOWN, Diagnosis
from ._models import pipeline, settings_without
from ._score import _bands
from ._tokens import TokenScores

if TYPE_CHECKING:  # the audit's types, for annotations only: the diagnosis sits below the audit
    from ..audit.pipeline.collect import UnitSample
    from ..audit.pipeline.plan import AuditPlan
    from ..audit.sources.adapters import Adapter
    from ..harness import Generation
    from ._tokens import TokenUnit

__all__ = ["diagnose_penalty", "penalty_units", "PENALTY_TOKENS"]

#: tokens scored per unit at most (the first ones): a stated sample size that keeps it to seconds
PENALTY_TOKENS = 20_000
_CELLS = 12  # history status (unseen, seen at the round's start, seen only earlier in the round) x 4 bands
_PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")
_ORDERS = {
    "top_p_before_temperature": ("top_p", "temperature", "top_k", "min_p"),
    "top_p_before_top_k_target": ("temperature", "top_p", "top_k", "min_p"),
}
_FACTS = {
    "repetition_penalty_draft_only": "tokens match the target WITHOUT the penalty",
    "repetition_penalty_stale_history": "tokens match the penalty computed over the prefix at the start of each round",
    "top_p_before_temperature": "tokens match the target with top-p applied before temperature",
    "top_p_before_top_k_target": "tokens match the target with top-p applied before top-k",
}


def penalty_units(
    adapter: Adapter, plan: AuditPlan, pairs: dict[int, Any], samples: dict[int, UnitSample]
) -> list[TokenUnit]:
    """(Generation, pair, settings, label) of every unit with per-token laws under a penalty."""
    out: list[TokenUnit] = []
    for u in plan.units:
        s, pair = samples.get(u.index), pairs.get(u.index)
        gen: Generation | None = getattr(s, "gen", None)
        if gen is None or gen.law is None or getattr(gen, "prompts", None) is None or not len(gen.tokens):
            continue
        if u.settings is None or not u.settings.uses_history or not hasattr(pair, "row_of"):
            continue
        out.append((gen, pair, u.settings, u.label))
    return out


@dataclasses.dataclass(frozen=True)
class _Histories:
    """Of the first n tokens: their pair rows [n], and the counts [n, V] each penalty sees, over the
    whole prefix and over the prefix at the round's start (``seen``: the repetition penalty's,
    prompt included; ``out``: presence and frequency penalties', generated tokens only)."""

    rows: npt.NDArray[np.int64]
    seen: npt.NDArray[np.float64]
    seen_start: npt.NDArray[np.float64]
    out: npt.NDArray[np.float64]
    out_start: npt.NDArray[np.float64]


def _histories(gen: Generation, pair: Any, n: int, settings: SamplingSettings) -> _Histories:
    V = pair.target_logits.shape[1]
    rows = np.empty(n, dtype=np.int64)
    seen, seen_start, out, out_start = (np.zeros((n, V)) for _ in range(4))
    seq_prev, n_prompt = -1, 0
    hist: list[int] = []
    for i in range(n):
        s, j = int(gen.sequence[i]), int(gen.position[i])
        if s != seq_prev:
            assert gen.prompts is not None, "penalty units keep their prompts"
            p = gen.prompts[s]
            hist, seq_prev = [int(t) for t in p[p >= 0]], s
            n_prompt = len(hist)
        rows[i] = pair.row_of(hist)
        seen[i], out[i] = history_counts(hist, n_prompt, settings, V)
        start = hist[: len(hist) - j] if j else hist  # the round's drafts kept so far are not in its start
        seen_start[i], out_start[i] = history_counts(start, min(n_prompt, len(start)), settings, V)
        hist.append(int(gen.tokens[i]))
    return _Histories(rows, seen, seen_start, out, out_start)


def _laws(gen: Generation, pair: Any, settings: SamplingSettings, n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """({class: law [n, V]}, history status [n, V]: 0 unseen, 1 seen at the round's start,
    2 seen only in the drafts kept earlier in the round)."""
    h = _histories(gen, pair, n, settings)
    full, start = h.seen + h.out, h.seen_start + h.out_start  # seen by any penalty
    status = np.where(start > 0, 1, np.where(full > 0, 2, 0))
    L = np.asarray(pair.target_logits, dtype=np.float64)[h.rows]
    plain = settings
    for knob in _PENALTIES:
        plain = settings_without(plain, knob)
    only = SamplingSettings(**{k: getattr(settings, k) for k in _PENALTIES})
    penalised = process_logits(L, only, seen_counts=h.seen, output_counts=h.out)  # as the recorder's law
    laws = {
        "target": np.asarray(gen.law, dtype=np.float64)[gen.row[:n]],
        "repetition_penalty_draft_only": probs_from_logits(L, plain),
        "repetition_penalty_stale_history": probs_from_logits(
            L, settings, seen_counts=h.seen_start, output_counts=h.out_start
        ),
        **{name: pipeline(penalised, plain, order) for name, order in _ORDERS.items()},
    }
    return laws, status


def diagnose_penalty(
    units: Sequence[TokenUnit], *, min_llr: float = 10.0, min_explained: float = 0.9
) -> Diagnosis | None:
    """Rank the penalty classes on the units of :func:`penalty_units` (module docstring)."""
    if not units:
        return None
    acc = TokenScores(_CELLS, "penalised token")
    for gen, pair, settings, label in units:
        n = min(len(gen.tokens), PENALTY_TOKENS)
        laws, status = _laws(gen, pair, settings, n)
        cell = status * 4 + _bands(laws["target"])  # [n, V]: history status x target-mass band
        acc.add_unit(label, laws, gen.tokens[:n], cell)
    ranked, tokens = acc.ranked(), acc.tokens
    top = ranked[0]
    known = top.qualifies(min_llr, min_explained)
    facts = [
        "the failing units' laws depend on the history (a penalty): tokens scored one by one against "
        "the target with the penalty over the whole true prefix"
    ]
    if known:
        facts.append(_FACTS[top.name])
    method = (
        f"law of each of {tokens:,} tokens of the penalty units under each penalty class, from its rebuilt "
        f"prefix (at most {PENALTY_TOKENS:,} per unit); events floored at probability 1e-9"
    )
    return Diagnosis(top.name if known else NOT_KNOWN, ranked, facts, method, min_llr, min_explained, tokens)
