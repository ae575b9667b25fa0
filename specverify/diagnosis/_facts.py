"""Structural facts in plain words: which strata match which law, and where the deviation is.

Each stratum (acceptance, replacement, bonus, draft, structure) is compared with the target law
on its cells; one that does not match is compared with the laws of the classes that change only
that stratum, and the best of those is named ("replacements do not match (p - q)+; they match
p"). The leading class's likelihood ratio by position and by unit says where the evidence is
("only positions after the first", "only when every draft was accepted", "only at ...").

A stratum is said to match the target law only when its own cells do: the target law's G statistic
on the stratum's cells, summed over the units, is compared with chi-square at 1e-6 (a diagnosis
runs only after a FAIL; the stringent level keeps "do not match" for strata that truly moved). A
stratum that does not match and that no class explains is located by its worst cell group in
words ("at position 1, p/q in (0, 0.5]: 880 of 1,000 drafts kept (88%); the rule keeps 31%"), so a
bug outside every class still gets a place to look.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from ..dists import SamplingSettings
from ._score import g_statistic

if TYPE_CHECKING:  # annotations only: this module is imported by _diagnose
    from ..audit.pipeline.plan import AuditPlan
    from ..stats import CheckOutcome
    from ._candidate import Candidate
    from ._evidence import RoundUnit

__all__ = ["facts", "departures", "negated", "knob_fact"]

#: a stratum "does not match" the target law when its cells reject it at this level
DEPARTURE_ALPHA = 1e-6

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


def negated(kind: str) -> str:
    """The sentence of a stratum that does not match the target law, as the facts begin it."""
    return _TARGET_WORDS[kind].replace(" match ", " do not match ").replace("every round is", "not every round is")


def _kind_sentence(kind: str, ranked: Sequence[Candidate], min_llr: float, away: dict[str, str], known: bool) -> str:
    """'X match <target law>', or 'X do not match <target law>' with the law they match (when a class
    is the diagnosis; 'closest' otherwise) and where they depart (:func:`departures`)."""
    moved = [c for c in ranked if c.llr_by_kind.get(kind, 0.0) >= min_llr]
    if not moved and kind not in away:
        return _TARGET_WORDS[kind]
    out = negated(kind)
    if moved:
        # the diagnosis itself where it moves this stratum; otherwise the class that moves it most
        best = ranked[0] if known and ranked[0] in moved else max(moved, key=lambda c: c.llr_by_kind[kind])
        alt = _ALT_WORDS.get(best.name)
        # "they match" only when a class or a mechanism is the diagnosis: one that moves one stratum
        # of a bug it does not explain is only the closest tried there
        named = known and (alt is not None or best is ranked[0])
        out += f"; they match {alt or best.name}" if named else f"; closest: {alt or best.name}"
    return out + (f"; {away[kind]}" if kind in away and not (known and moved) else "")


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


def facts(
    units: Sequence[RoundUnit], ranked: Sequence[Candidate], known: bool, min_llr: float, away: dict[str, str]
) -> list[str]:
    """Plain-word facts for a diagnosis (module docstring); ``away``: :func:`departures`."""
    if not ranked:
        return ["no round of the audit could be scored (no drafts seen, or laws per token)"]
    out = [_kind_sentence(k, ranked, min_llr, away, known) for k in ("acceptance", "replacement", "bonus")]
    if any(ev.drafted_by_impl for ev, _, _ in units):
        out.append(_kind_sentence("draft", ranked, min_llr, away, known))
    out.append(_kind_sentence("structure", ranked, min_llr, away, known))
    if known:
        out += _where(ranked[0], units, min_llr)
    return out


# -- where the target law fails, cell by cell ---------------------------------------------------------
_RATIO_BAND = ("p(x) = 0", "p/q in (0, 0.5]", "p/q in (0.5, 1)", "p/q >= 1")
_STRUCTURE = (
    "were verified on another prefix",
    "are not drafts[:k] plus one token",
    "that are not drafts[:k] plus one token end with a one-token tail",
    "that are not drafts[:k] plus one token run to the last draft or past it",
)


def _mass(b: int, law: str) -> str:
    return f"tokens with {25 * b}-{25 * (b + 1)}% of {law}'s mass ranked above them"


def _describe(kind: str, layout: Any, group: int, seen_n: np.ndarray, want_n: np.ndarray, cells: np.ndarray) -> str:
    """One cell group of one kind in words: what was seen against what the target law expects."""
    n = seen_n.sum()
    worst = int(np.argmax(np.abs(seen_n - want_n) / np.sqrt(np.maximum(want_n, 1.0))))
    seen, want = f"{int(seen_n[worst]):,} of {int(n):,} ({seen_n[worst] / n:.0%})", f"{want_n[worst] / n:.0%}"
    local = int(cells[worst] - cells[0])
    if kind == "acceptance":
        j, band = divmod(int((cells[0] - layout.acc0) // 2), 4)
        kept = f"{int(seen_n[0]):,} of {int(n):,} drafts kept ({seen_n[0] / n:.0%})"
        return f"at position {j}, {_RATIO_BAND[band]}: {kept}; the rule keeps {want_n[0] / n:.0%}"
    if kind == "replacement":
        at = "the first position" if group == 0 else "later positions"
        inside = "inside" if local // 4 else "outside"
        where = f"{_mass(local % 4, 'p')}, {inside} the residual's support"
        said = f"at {at}, {seen} replacements are {where}; (p - q)+ gives {want}"
        if not local // 4 and want_n[worst] < 0.5:  # tokens with p <= q: the rule never replaces with them
            said += (
                " (a token with p <= q is never a replacement under the rule: the step's replacement law is not"
                " the residual, or the p / q rows it uses are not the audited ones: a wrong row, context or cache)"
            )
        return said
    if kind == "bonus":
        return f"{seen} bonus tokens are {_mass(local, 'p')}; p gives {want}"
    if kind == "draft":
        at = "the first position" if group == 0 else "later positions"
        return f"at {at}, {seen} drafts are {_mass(local, 'q')}; q gives {want}"
    what = _STRUCTURE[group]
    return f"{int(seen_n[0]):,} of {int(n):,} rounds {what} ({seen_n[0] / n:.0%}); the rule gives {want_n[0] / n:.0%}"


def departures(
    obs: Sequence[np.ndarray], layouts: Sequence[Any], expected: Sequence[np.ndarray], labels: Sequence[str]
) -> dict[str, str]:
    """{kind: where it departs, in words} for each kind whose cells reject the target law at
    :data:`DEPARTURE_ALPHA` (G summed over the units), the kind of the largest G first; the worst
    group by G is described."""
    out: dict[str, tuple[float, str]] = {}
    for kind in ("acceptance", "replacement", "bonus", "draft", "structure"):
        G, df, worst = 0.0, 0, (0.0, "")
        for o, lay, e, label in zip(obs, layouts, expected, labels, strict=True):
            lo, hi = lay.span(kind)
            groups = lay.group_of[lo:hi]
            for grp in np.unique(groups):
                cells = lo + np.nonzero(groups == grp)[0]
                got, want = o[cells], e[cells]
                if got.sum() == 0:
                    continue
                g_grp = g_statistic(got, want)
                # a group of k cells (any seen or expected) has k - 1 degrees of freedom: a deterministic
                # acceptance fills one cell of two and still has one
                G, df = G + g_grp, df + int(((got > 0) | (want > 1e-6)).sum()) - 1
                if g_grp > worst[0]:
                    first = int(lay.group_of[lo])
                    sentence = _describe(kind, lay, int(grp) - first, got, want, cells)
                    worst = (g_grp, sentence + (f" ({label})" if label and len(labels) > 1 else ""))
        if df > 0 and stats.chi2.sf(G, df) < DEPARTURE_ALPHA:
            out[kind] = (G, worst[1])
    return {k: v for k, (_, v) in sorted(out.items(), key=lambda kv: -kv[1][0])}


# -- which sampling knobs the failing settings share ----------------------------------------------------
_KNOBS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "logit_bias",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)


def _knobs_set(s: SamplingSettings) -> set[str]:
    default = SamplingSettings()
    return {k for k in _KNOBS if getattr(s, k) != getattr(default, k) and (k != "logit_bias" or s.logit_bias)}


def knob_fact(plan: AuditPlan, checks: Sequence[CheckOutcome]) -> str | None:
    """Which knobs every failing setting sets and no passing one does, across the audit's settings:
    where a settings-parity bug lives even when no class fits. None with fewer than two settings
    judged, or when the failing settings share no such knob and some setting passed."""
    by_id = {f"unit/{u.index}": u for u in plan.units}
    status: dict[int, set[str]] = {}
    for c in checks:
        if c.check_id in by_id and c.kind == "statistical":
            status.setdefault(by_id[c.check_id].setting_index, set()).add(str(c.status))
    failing = sorted(i for i, s in status.items() if "FAIL" in s)
    passing = sorted(i for i, s in status.items() if s == {"PASS"})
    if not failing or len(failing) + len(passing) < 2:
        return None
    settings = {u.setting_index: u.settings for u in plan.units}
    if not passing:
        return f"every audited setting fails ({len(failing)}): the deviation follows no one sampling knob"
    shared = set.intersection(*(_knobs_set(settings[i]) for i in failing))
    shared -= set().union(*(_knobs_set(settings[i]) for i in passing))
    if not shared:
        return None
    names = " and ".join(sorted(shared))
    return (
        f"every failing setting ({', '.join(f'settings[{i}]' for i in failing)}) sets {names} and no passing one "
        f"({len(passing)}) does: the deviation follows {names}; check how the target and the draft apply it"
    )
