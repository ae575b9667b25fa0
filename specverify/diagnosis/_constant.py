"""Rounds that emit one fixed token without verifying: a finish, stop or padding path.

A round whose verification pass never read the true prefix (the auditor records no drafts: a
*mismatched* round, ``_evidence``) is what the state classes explain as verification on another
prefix: a stale cache, a block boundary, a window. Such a pass still drafts and draws its block
from some target row, so its blocks vary in length and content. When every mismatched round of
a FAIL emits the same single token c, no prefix explains them: the implementation took a path
that outputs c as it is. This module fits c, the rate of such rounds per unit and what the
round before each one did (the trigger), and says so in words.

The likelihood ratio against the target law is that of the rounds' structural event alone (a
mismatch, floored at probability ``EPS`` under the rule, at the fitted rate here), less log V
for the fitted id and log of the number of triggers tried.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from ._evidence import RoundEvidence, RoundUnit

__all__ = ["ConstantRounds", "constant_rounds"]

#: the floor of an event's probability under the rule (as in ``_score``)
EPS = 1e-9
#: mismatched rounds needed before their content is read as one path
MIN_ROUNDS = 20
#: the share of mismatched rounds that must be the one-token block [c]
MIN_SHARE = 0.99
#: a trigger must precede this share of the fixed rounds ...
MIN_COVER = 0.95
#: ... and make one at least this many times likelier than its absence
MIN_LIFT = 5.0


@dataclasses.dataclass(frozen=True)
class Trigger:
    """What the round before a fixed round did, with the counts that back it."""

    words: str  # "drafted id 63"
    cover: tuple[int, int]  # (fixed rounds preceded by it, fixed rounds)
    rate_with: float  # P(fixed | trigger)
    rate_without: float  # P(fixed | no trigger)


@dataclasses.dataclass(frozen=True)
class ConstantRounds:
    """Every mismatched round emits the single token ``token``: its rate, trigger and price."""

    token: int
    vocab: int
    rounds: int  # fixed rounds, all units
    seen: int  # rounds with a final token, all units
    llr: float  # against the target law, net of the price of the id and the trigger
    trigger: Trigger | None
    drafted_not_emitted: bool  # the trigger is a drafted c, and an emitted one does not do as well
    chosen: tuple[()] = ()  # the interface of a fitted Mechanism (_diagnose.MechanismCandidate)
    basis: str = "fitted on the rounds that did not verify the drafts; no catalogued class fits"

    @property
    def name(self) -> str:
        return f"constant_token_rounds(id={self.token})"

    def alternatives(self) -> dict[str, list[str]]:
        return {}

    def words(self) -> str:
        last = " (the last id)" if self.token == self.vocab - 1 else ""
        out = (
            f"some rounds emit only id {self.token}{last}, without drafting or verifying: {self.rounds:,} of "
            f"{self.seen:,} rounds, every one alike (verification on another prefix would vary)"
        )
        if self.trigger is not None:
            t = self.trigger
            out += (
                f"; each follows a round that {t.words} ({t.cover[0]:,} of {t.cover[1]:,}; after such a round "
                f"{t.rate_with:.0%} of rounds are this one, after any other {t.rate_without:.1%})"
            )
            if self.drafted_not_emitted:
                out += f": a drafted id {self.token} sets it off, kept or not"
        return out

    def check(self) -> str:
        what = "drafts" if self.drafted_not_emitted else "what precedes it"
        return (
            f"the path that outputs id {self.token} on its own (a finished or stop flag, padding, a placeholder) "
            f"and what sets it: a request finishes on tokens it emitted, never on its {what}"
        )


def constant_rounds(units: Sequence[RoundUnit]) -> ConstantRounds | None:
    """The fixed-token path of ``units``, or None when their mismatched rounds are too few or vary."""
    evs = [ev for ev, _, _ in units if ev.emitted is not None]
    mis = [ev.mismatch & (ev.y >= 0) for ev in evs]
    total = sum(int(m.sum()) for m in mis)
    if total < MIN_ROUNDS:
        return None
    singles = np.concatenate([ev.y[m & (ev.emitted == 1)] for ev, m in zip(evs, mis, strict=True)])
    if not len(singles):
        return None
    ids, counts = np.unique(singles, return_counts=True)
    c = int(ids[np.argmax(counts)])
    fixed = [m & (ev.emitted == 1) & (ev.y == c) for ev, m in zip(evs, mis, strict=True)]
    n_fixed = sum(int(f.sum()) for f in fixed)
    if n_fixed < MIN_SHARE * total:
        return None
    triggers = _triggers(c)
    trigger, drafted_only = _best_trigger(evs, fixed, triggers)
    vocab = max(int(pair.vocab_size) if hasattr(pair, "vocab_size") else c + 1 for _, pair, _ in units)
    llr = _rate_llr(evs, fixed) - math.log(vocab) - math.log(len(triggers) + 1)
    seen = sum(int((ev.y >= 0).sum()) for ev in evs)
    return ConstantRounds(c, vocab, n_fixed, seen, llr, trigger, drafted_only)


def _rate_llr(evs: list[RoundEvidence], fixed: list[np.ndarray]) -> float:
    """Log-likelihood ratio of the fixed rounds at their rate per unit against the floor EPS."""
    out = 0.0
    for ev, f in zip(evs, fixed, strict=True):
        seen = ev.y >= 0
        n, m = int(seen.sum()), int(f.sum())
        if n == 0:
            continue
        t = min(max(m / n, EPS), 1 - 1e-12)
        out += m * math.log(t) + (n - m) * math.log1p(-t) - (m * math.log(EPS) + (n - m) * math.log1p(-EPS))
    return out


#: a trigger: (words, [R] whether each round's previous round in its sequence shows it)
_Trigger = tuple[str, Callable[[RoundEvidence], np.ndarray]]


def _triggers(c: int) -> list[_Trigger]:
    def before(fn: Callable[[RoundEvidence], np.ndarray]) -> Callable[[RoundEvidence], np.ndarray]:
        def shown(ev: RoundEvidence) -> np.ndarray:
            prev = ev.prev_round if ev.prev_round is not None else np.full(len(ev.k), -1)
            return np.asarray((prev >= 0) & fn(ev)[np.maximum(prev, 0)])

        return shown

    def drafted(ev: RoundEvidence) -> np.ndarray:
        return np.asarray((ev.drafts == c).any(1))

    def emitted(ev: RoundEvidence) -> np.ndarray:
        kept = np.arange(ev.gamma)[None, :] < ev.k[:, None]
        return np.asarray(((ev.drafts == c) & kept).any(1) | (ev.y == c))

    def first(ev: RoundEvidence) -> np.ndarray:
        return np.asarray(ev.prev_round < 0) if ev.prev_round is not None else np.zeros(len(ev.k), dtype=bool)

    return [
        (f"drafted id {c}", before(drafted)),
        (f"emitted id {c}", before(emitted)),
        ("kept every draft", before(lambda ev: ev.k >= ev.gamma)),
        ("ended at a rejection", lambda ev: ev.prev_rejected.astype(bool)),
        ("is none: it is its sequence's first round", first),
    ]


def _best_trigger(
    evs: list[RoundEvidence], fixed: list[np.ndarray], triggers: list[_Trigger]
) -> tuple[Trigger | None, bool]:
    """The trigger that precedes most fixed rounds, when it covers MIN_COVER of them and makes one
    MIN_LIFT times likelier; and whether it is 'drafted c' while 'emitted c' does not qualify."""
    found: dict[str, Trigger] = {}
    for words, fn in triggers:
        n = np.zeros((2, 2), dtype=np.int64)  # [trigger shown, round fixed]
        for ev, f in zip(evs, fixed, strict=True):
            seen = ev.y >= 0
            n += np.bincount(2 * fn(ev)[seen] + f[seen], minlength=4).reshape(2, 2)
        with_, without = n[1, 1] / max(n[1].sum(), 1), n[0, 1] / max(n[0].sum(), 1)
        fix = int(n[:, 1].sum())
        if fix and n[1, 1] >= MIN_COVER * fix and with_ >= MIN_LIFT * max(without, 1e-12):
            found[words] = Trigger(words, (int(n[1, 1]), fix), float(with_), float(without))
    if not found:
        return None, False
    best = max(found.values(), key=lambda t: (t.cover[0], t.rate_with))
    drafted_only = best.words.startswith("drafted") and not any(w.startswith("emitted") for w in found)
    return best, drafted_only
