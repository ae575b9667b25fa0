"""Diagnosis of a greedy (temperature 0) FAIL: the law of every emitted token under each greedy class.

At temperature 0 the output is deterministic given the true prefix, so each class is a law of
the token at round position j given the true prefix's rows (raw probabilities p, q), the round's
drafts x and j; most are point masses:

    target                    argmax p (lowest id on exact ties)
    greedy_tie_highest_id     argmax p, highest id on exact ties
    greedy_tie_accepts_draft  x_j when p(x_j) = max p, else argmax p
    greedy_near_acceptance    x_j when p(x_j) >= c max p, else argmax p (c fitted on a grid)
    greedy_residual_argmax    x_j when argmax p = x_j, else argmax max(0, p - q); argmax p at the bonus
    bonus_from_previous_row   argmax of the previous position's row at the bonus position
    greedy_ignored            p itself (a correct sampler on the raw rows emits each token ~ p)
    greedy_as_low_temperature p sharpened at temperature 1e-3 (ties and near ties split at random)

Each token costs log P_class(token), floored at EPS as in the round scorer. A class is named
when it beats the target law by ``min_llr`` nats and reproduces at least ``min_explained`` of
the tokens that differ from target-only greedy (a token the class gives probability under 1e-6
is not reproduced).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ._diagnose import NOT_KNOWN, Candidate, Diagnosis
from ._models import EPS

if TYPE_CHECKING:  # annotations only
    from ..harness import Generation
    from ..lm.synthetic import TablePair

__all__ = ["diagnose_greedy", "greedy_laws"]

_NEAR_GRID = (0.3, 0.5, 0.7, 0.9)
_LOW_T = 1e-3
_RARE = 1e-6


def _hot(idx: np.ndarray, V: int) -> npt.NDArray[np.float64]:
    out = np.zeros((len(idx), V))
    out[np.arange(len(idx)), idx] = 1.0
    return out


def _sharpen(P: npt.NDArray[np.float64], t: float) -> npt.NDArray[np.float64]:
    with np.errstate(divide="ignore"):
        z = np.log(P) / t
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    out: npt.NDArray[np.float64] = e / e.sum(-1, keepdims=True)
    return out


def _token_context(
    gen: Generation, gamma: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(position j [N], draft x_j at j or -1 [N], row of the previous token in the round or -1 [N])."""
    j = np.asarray(gen.position, dtype=np.int64)
    rid = gen.rounds_of_tokens
    drafts = np.asarray(gen.drafts, dtype=np.int64)
    x = np.where(j < gamma, drafts[rid, np.minimum(j, gamma - 1)], -1)
    prev_row = np.r_[-1, gen.row[:-1]]
    same_round = np.r_[False, rid[1:] == rid[:-1]]
    return j, x, np.where(same_round, prev_row, -1)


def greedy_laws(gen: Generation, pair: TablePair, gamma: int) -> dict[str, list[tuple[np.ndarray, float, str]]]:
    """{class: [(law [N, V] of each emitted token, penalty nats, parameter)]} (module docstring)."""
    P = np.asarray(pair.target_table(None), dtype=np.float64)[gen.row]
    Q = np.asarray(pair.draft_table(None), dtype=np.float64)[gen.row]
    logits = np.asarray(pair.target_logits, dtype=np.float64)[gen.row]
    N, V = P.shape
    top = logits.max(-1, keepdims=True)
    lo = np.argmax(logits, -1)
    hi = V - 1 - np.argmax(logits[:, ::-1], -1)
    j, x, prev = _token_context(gen, gamma)
    has_x = x >= 0
    xs = np.maximum(x, 0)
    px, pmax = P[np.arange(N), xs], P.max(-1)
    x_top = has_x & (logits[np.arange(N), xs] == top[:, 0])
    laws: dict[str, list[tuple[np.ndarray, float, str]]] = {"target": [(_hot(lo, V), 0.0, "")]}
    laws["greedy_tie_highest_id"] = [(_hot(hi, V), 0.0, "")]
    laws["greedy_tie_accepts_draft"] = [(_hot(np.where(x_top, xs, lo), V), 0.0, "")]
    pen = float(np.log(len(_NEAR_GRID)))
    laws["greedy_near_acceptance"] = [
        (_hot(np.where(has_x & (px >= c * pmax), xs, lo), V), pen, f"c = {c:g}") for c in _NEAR_GRID
    ]
    res = np.argmax(np.maximum(P - Q, 0.0), -1)
    laws["greedy_residual_argmax"] = [(_hot(np.where(~has_x | (lo == xs), lo, res), V), 0.0, "")]
    prev_lo = np.argmax(np.asarray(pair.target_logits, dtype=np.float64)[np.maximum(prev, 0)], -1)
    laws["bonus_from_previous_row"] = [(_hot(np.where((j == gamma) & (prev >= 0), prev_lo, lo), V), 0.0, "")]
    laws["greedy_ignored"] = [(P, 0.0, "")]
    laws["greedy_as_low_temperature"] = [(_sharpen(P, _LOW_T), 0.0, f"temperature {_LOW_T:g}")]
    return laws


def _facts(gen: Generation, pair: TablePair, gamma: int, bad: np.ndarray, best_law: np.ndarray | None) -> list[str]:
    logits = np.asarray(pair.target_logits, dtype=np.float64)[gen.row]
    srt = np.sort(logits, -1)
    tie = srt[:, -1] == srt[:, -2]
    n_bad = int(bad.sum())
    out = [f"{n_bad:,} of {len(bad):,} tokens differ from target-only greedy (argmax p, lowest id on ties)"]
    if n_bad:
        j = np.asarray(gen.position)[bad]
        if tie[bad].all():
            out.append("only at exact ties of the target's top logits")
        if (j == gamma).all():
            out.append("only at the bonus position (every draft accepted)")
        elif (j > 0).all():
            out.append("only positions after the first")
        if best_law is not None:
            got = best_law[np.arange(len(gen.tokens)), gen.tokens][bad]
            out.append(f"the leading class gives {int((got >= _RARE).sum()):,} of them a probability >= {_RARE:g}")
    return out


def diagnose_greedy(
    gen: Generation, pair: TablePair, gamma: int, *, min_llr: float = 10.0, min_explained: float = 0.9
) -> Diagnosis:
    """Rank the greedy classes on one greedy run (module docstring)."""
    laws = greedy_laws(gen, pair, gamma)
    idx = np.arange(len(gen.tokens))
    ((ref_law, _, _),) = laws.pop("target")
    ref_p = ref_law[idx, gen.tokens]
    ref_ll = float(np.log(np.maximum(ref_p, EPS)).sum())
    bad = ref_p < _RARE
    cands: list[Candidate] = []
    best_laws: dict[str, np.ndarray] = {}
    for name, variants in laws.items():
        best: Candidate | None = None
        for law, pen, param in variants:
            p = law[idx, gen.tokens]
            llr = float(np.log(np.maximum(p, EPS)).sum()) - ref_ll - pen
            miss = int((p < _RARE).sum())
            expl = (int(bad.sum()) - miss) / max(int(bad.sum()), 1)
            c = Candidate(name, llr, float(expl), {"greedy token": llr}, [], {}, param)
            if best is None or c.llr_vs_target > best.llr_vs_target:
                best, best_laws[name] = c, law
        if best is not None:
            cands.append(best)
    ranked = sorted(cands, key=lambda c: -c.llr_vs_target)
    top = ranked[0]
    known = top.llr_vs_target >= min_llr and top.explained >= min_explained and bad.any()
    method = (
        f"law of each of {len(gen.tokens):,} greedy tokens under each greedy class given its true prefix and the "
        "round's drafts (the greedy check's run, repeated with its seed); events floored at probability 1e-9"
    )
    return Diagnosis(
        top.name if known else NOT_KNOWN,
        ranked,
        _facts(gen, pair, gamma, bad, best_laws[top.name]),
        method,
        min_llr,
        min_explained,
        len(gen.tokens),
    )
