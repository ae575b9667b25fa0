"""Penalty forms and penalty counts: the target-row laws of the request-level penalty family.

A penalised unit's token has, under each class of :mod:`._penalty`, the law of a target whose rows
are computed another way; the drafts do not matter (the rule is exact for that target). This
module gives the classes that vary how the penalties are applied and which tokens they count,
each over the penalty units' first tokens (``L``: raw logits [n, V]; ``seen`` / ``out``: the
counts the repetition penalty and the presence and frequency penalties should see [n, V]):

    penalty_window_not_requested      every penalty counts only the last W tokens (W fitted in
                                      PENALTY_WINDOWS; llama.cpp's repeat_last_n is 64 by
                                      default) where the request counts every token
    penalty_compounds_along_the_block  penalties applied in place once per row of the verify block:
                                      row j (position j of its round) gets r ** (j + 1) or (j + 1) x
                                      presence and frequency (which of them compound is fitted)
    bonus_row_without_penalties       the token after a fully accepted round comes from the
                                      unpenalised row (the verified rows are right)
    presence_penalty_as_factor        presence taken as a repetition-style factor 1 + presence
                                      (logit / f when positive, * f when negative)
    repetition_penalty_on_probabilities  a seen token's probability divided by r (logit - log r)
                                      instead of the logit's sign rule
    penalties_count_the_prompt_only   presence and frequency count the prompt instead of the
                                      generated tokens (a slice taken the wrong way)

Each exists only on units whose knob it changes (elsewhere it is the target's law). Left out: a
repetition penalty that skips the ids drafted in the token's round. Its rows depend on the round's
drafts, so p' given the drafts is not the token's law (the token mostly IS a draft): scored as one,
it beat the target by 649 nats on a bug of another class while explaining 16% of the deviation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..dists import SamplingSettings, probs_from_logits, process_logits
from ..dists._processing import token_counts
from ._models import ORDER, pipeline, settings_without

if TYPE_CHECKING:
    from ..harness import Generation

__all__ = [
    "PENALTY_KNOBS",
    "PENALTY_WINDOWS",
    "FORM_FACTS",
    "PenaltyInputs",
    "penalty_form_laws",
    "sampling_steps",
    "unpenalised",
]

#: the windows the fitted window class tries (it pays log(len) nats for the choice)
PENALTY_WINDOWS = (8, 16, 32, 64)
PENALTY_KNOBS = ("repetition_penalty", "presence_penalty", "frequency_penalty")
FORM_FACTS = {
    "penalty_window_not_requested": "tokens match penalties that count only the last few tokens (a window the "
    "request does not set)",
    "penalty_compounds_along_the_block": "tokens match a penalty applied once more at each row of the verify block",
    "bonus_row_without_penalties": "tokens after a fully accepted round match the row without penalties",
    "presence_penalty_as_factor": "tokens match the presence penalty taken as a multiplicative factor 1 + presence",
    "repetition_penalty_on_probabilities": "tokens match a repetition penalty that divides probabilities (logit - "
    "log r) instead of following the logit's sign",
    "penalties_count_the_prompt_only": "tokens match presence and frequency penalties that count the prompt instead "
    "of the generated tokens",
}


@dataclasses.dataclass(frozen=True)
class PenaltyInputs:
    """Of the first n tokens: raw target logits ``L`` [n, V], the right counts ``seen`` / ``out``
    [n, V], each token's prefix (prompt first) and prompt length, and the observed ids [n]."""

    L: np.ndarray
    seen: np.ndarray
    out: np.ndarray
    prefixes: Sequence[Sequence[int]]
    n_prompt: np.ndarray
    y: np.ndarray


def _first(settings: SamplingSettings, repetition_penalty: float = 1.0) -> SamplingSettings:
    """The bias and a repetition penalty: steps before the temperature."""
    return SamplingSettings(logit_bias=settings.logit_bias, repetition_penalty=repetition_penalty)


def sampling_steps(settings: SamplingSettings) -> SamplingSettings:
    """The request's steps after the bias and the penalties (temperature and the truncations)."""
    return unpenalised(settings_without(settings, "logit_bias"))


def _additive(x: np.ndarray, s: SamplingSettings, out: np.ndarray) -> np.ndarray:
    return x - s.presence_penalty * (out > 0) - s.frequency_penalty * out


def _window_law(s: SamplingSettings, d: PenaltyInputs) -> tuple[np.ndarray, str] | None:
    """The best window of :data:`PENALTY_WINDOWS` (by likelihood) and its law."""
    if s.penalty_window or not any(getattr(s, k) != getattr(SamplingSettings(), k) for k in PENALTY_KNOBS):
        return None

    def law(w: int) -> np.ndarray:
        n, V = d.L.shape
        sw = dataclasses.replace(s, penalty_window=w)
        seen, out = np.zeros((n, V)), np.zeros((n, V))
        for i, (pre, k) in enumerate(zip(d.prefixes, d.n_prompt, strict=True)):
            a, b = sw.penalty_history(pre, int(k))
            seen[i], out[i] = token_counts(list(a), V), token_counts(list(b), V)
        return probs_from_logits(d.L, s, seen_counts=seen, output_counts=out)

    return _likeliest(((f"window {w}", law(w)) for w in PENALTY_WINDOWS), d.y)


def _likeliest(options: Iterator[tuple[str, np.ndarray]], y: np.ndarray) -> tuple[np.ndarray, str]:
    """(law, label) of the option (label, law [n, V]) under which the ids ``y`` are likeliest; the
    options come one at a time, so at most two laws are held."""
    best: tuple[float, np.ndarray, str] | None = None
    for label, law in options:
        ll = float(np.log(np.maximum(law[np.arange(len(y)), y], 1e-300)).sum())
        if best is None or ll > best[0]:
            best = (ll, law, label)
    assert best is not None, "at least one option"
    return best[1], best[2]


#: which penalties compound along the block (fitted; log 3 nats paid): a multiplicative scale kept
#: across the rows compounds the repetition penalty alone, a logits buffer reused by every row all
_COMPOUNDED = {
    "repetition": ("repetition_penalty",),
    "presence and frequency": ("presence_penalty", "frequency_penalty"),
    "every penalty": PENALTY_KNOBS,
}


def _compounding_law(s: SamplingSettings, d: PenaltyInputs, position: np.ndarray) -> tuple[np.ndarray, str]:
    """The best of :data:`_COMPOUNDED` (by likelihood) and its law: row j applies the chosen
    penalties j + 1 times (r ** (j + 1), (j + 1) x presence and frequency)."""

    def law(knobs: tuple[str, ...]) -> np.ndarray:
        out = np.empty_like(d.L)
        for j in np.unique(position):
            m, k = position == j, int(j) + 1
            sj = dataclasses.replace(
                s,
                repetition_penalty=s.repetition_penalty ** (k if "repetition_penalty" in knobs else 1),
                presence_penalty=s.presence_penalty * (k if "presence_penalty" in knobs else 1),
                frequency_penalty=s.frequency_penalty * (k if "frequency_penalty" in knobs else 1),
            )
            out[m] = probs_from_logits(d.L[m], sj, seen_counts=d.seen[m], output_counts=d.out[m])
        return out

    sets = {k for k in PENALTY_KNOBS if getattr(s, k) != getattr(SamplingSettings(), k)}

    def label(what: str, knobs: tuple[str, ...]) -> str:  # an option the unit's knobs miss is the target's law
        return f"compounded: {what}" if sets & set(knobs) else "compounded: none of this unit's penalties"

    return _likeliest(((label(w, k), law(k)) for w, k in _COMPOUNDED.items()), d.y)


def _round_laws(s: SamplingSettings, d: PenaltyInputs, gen: Generation, target: np.ndarray) -> dict[str, np.ndarray]:
    """The class that needs each token's round: the bonus row."""
    out: dict[str, np.ndarray] = {}
    if gen.drafts is None or gen.round_id is None:
        return out
    n = len(d.y)
    rounds = gen.rounds_of_tokens[:n]
    gamma = (gen.drafts >= 0).sum(axis=1)[rounds]
    bonus = (gen.position[:n] == gamma) & (gamma > 0)
    if bonus.any():
        law = np.array(target, copy=True)
        law[bonus] = probs_from_logits(d.L[bonus], unpenalised(s))
        out["bonus_row_without_penalties"] = law
    return out


def unpenalised(s: SamplingSettings) -> SamplingSettings:
    """``s`` without its repetition, presence and frequency penalties (the bias kept)."""
    for knob in PENALTY_KNOBS:
        s = settings_without(s, knob)
    return s


def _form_laws(s: SamplingSettings, d: PenaltyInputs) -> dict[str, np.ndarray]:
    """Presence as a factor, the repetition penalty on probabilities, the prompt counted instead."""
    out: dict[str, np.ndarray] = {}
    rest = sampling_steps(s)
    if s.presence_penalty:
        f = 1.0 + s.presence_penalty
        x = process_logits(d.L, _first(s, repetition_penalty=s.repetition_penalty), seen_counts=d.seen)
        x = np.where(d.out > 0, np.where(x < 0, x * f, x / f), x) - s.frequency_penalty * d.out
        out["presence_penalty_as_factor"] = pipeline(x, rest, ORDER)
    if s.repetition_penalty != 1.0:
        x = process_logits(d.L, _first(s)) - math.log(s.repetition_penalty) * (d.seen > 0)
        out["repetition_penalty_on_probabilities"] = pipeline(_additive(x, s, d.out), rest, ORDER)
    if s.presence_penalty or s.frequency_penalty:
        V = d.L.shape[1]
        prompt = np.stack([token_counts(list(p[: int(k)]), V) for p, k in zip(d.prefixes, d.n_prompt, strict=True)])
        out["penalties_count_the_prompt_only"] = probs_from_logits(d.L, s, seen_counts=d.seen, output_counts=prompt)
    return out


def penalty_form_laws(
    s: SamplingSettings, d: PenaltyInputs, gen: Generation, target: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, str]]:
    """({class: law [n, V]}, {class: nats paid}, {class: fitted parameter}) of the module's classes
    on one sampling unit (none on a greedy one: its laws are one-hot)."""
    if s.is_greedy:
        return {}, {}, {}
    laws = _form_laws(s, d)
    laws.update(_round_laws(s, d, gen, target))
    pay, params = {}, {}
    if s.repetition_penalty != 1.0 or s.presence_penalty or s.frequency_penalty:
        name = "penalty_compounds_along_the_block"
        laws[name], params[name] = _compounding_law(s, d, np.asarray(gen.position[: len(d.y)]))
        pay[name] = math.log(len(_COMPOUNDED))
    if (fit := _window_law(s, d)) is not None:
        laws["penalty_window_not_requested"], params["penalty_window_not_requested"] = fit
        pay["penalty_window_not_requested"] = math.log(len(PENALTY_WINDOWS))
    return laws, pay, params
