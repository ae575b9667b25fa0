"""Structural facts in plain words: which strata match which law, and where the deviation is.

Each stratum (acceptance, replacement, bonus, draft, structure) is compared with the target law
on its cells; one that does not match is compared with the laws of the classes that change only
that stratum, and the best of those is named ("replacements do not match (p - q)+; they match
p"). The leading class's likelihood ratio by position and by unit says where the evidence is
("only positions after the first", "only when every draft was accepted", "only at ...").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: this module is imported by _diagnose
    from ._candidate import Candidate
    from ._evidence import RoundUnit

__all__ = ["facts"]

_TARGET_WORDS = {
    "acceptance": "acceptances match min(1, p/q) given the draft",
    "replacement": "replacements match (p - q)+",
    "bonus": "bonus tokens match p",
    "draft": "drafts match q",
    "structure": "every round is drafts[:k] + one token, verified on the true prefix",
}
_ALT_WORDS = {
    "replacement_from_p": "p",
    "replacement_from_q": "q",
    "residual_wrong_sign": "(q - p)+",
    "residual_unclipped": "|p - q|",
    "residual_softmax": "softmax((p - q)+)",
    "residual_not_normalised": "(p - q)+ left unnormalised (the rest on the last id)",
    "bonus_from_previous_row": "p of the previous position's row",
    "bonus_from_q": "q",
    "bonus_argmax": "argmax p",
    "argmax_draft_soft_q": "argmax q",
    "drafts_unconditioned": "q of the first position's row",
    "always_accept": "always keep",
    "inverted_ratio": "min(1, q/p)",
    "u_const_zero": "keep iff p(x) > 0",
    "zero_guard_accepts": "min(1, p/q), but keep when p(x) = 0",
    "same_uniform_all_positions": "one uniform shared by the round's positions",
}


def _kind_sentence(kind: str, ranked: Sequence[Candidate], min_llr: float) -> str:
    """'X match <target law>' or 'X do not match <target law>; they match <alt>'."""
    moved = [c for c in ranked if c.llr_by_kind.get(kind, 0.0) >= min_llr]
    if not moved:
        return _TARGET_WORDS[kind]
    best = max(moved, key=lambda c: c.llr_by_kind[kind])
    negated = _TARGET_WORDS[kind].replace(" match ", " do not match ").replace("every round is", "not every round is")
    alt = _ALT_WORDS.get(best.name)
    return negated + (f"; they match {alt}" if alt else f"; closest: {best.name}")


def _where(best: Candidate, units: Sequence[RoundUnit], min_llr: float) -> list[str]:
    out = []
    pos = np.asarray(best.llr_by_position)
    total = pos.sum()
    if total > min_llr and len(pos) > 2:
        if pos[0] < 0.05 * total:
            out.append("only positions after the first")
        if best.llr_by_kind.get("bonus", 0.0) > 0.9 * total:
            out.append("only when every draft was accepted")
    hit = [u for u, v in best.llr_by_unit.items() if v >= min_llr]
    if hit and len(hit) < len(best.llr_by_unit):
        out.append("only in " + "; ".join(hit))
    return out


def facts(units: Sequence[RoundUnit], ranked: Sequence[Candidate], known: bool, min_llr: float) -> list[str]:
    """Plain-word facts for a diagnosis (module docstring)."""
    if not ranked:
        return ["no round of the audit could be scored (no drafts seen, or laws per token)"]
    out = [_kind_sentence(k, ranked, min_llr) for k in ("acceptance", "replacement", "bonus")]
    if any(ev.drafted_by_impl for ev, _, _ in units):
        out.append(_kind_sentence("draft", ranked, min_llr))
    out.append(_kind_sentence("structure", ranked, min_llr))
    if known:
        out += _where(ranked[0], units, min_llr)
    return out
