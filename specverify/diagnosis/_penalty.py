"""Diagnosis of units whose laws depend on the history (penalties): token by token.

A unit with a repetition / presence / frequency penalty has no table of laws: the auditor keeps
each token's law, computed from its true prefix. Its rounds cannot be scored event by event,
but the output law of each class is known token by token, because in each class the rule itself
is exact for some wrong target (draft and target then agree on it, or the draft does not
matter). ``L``: the target's raw logits of the token's true prefix; "generated": the tokens
emitted before it in its request (the prompt excluded):

    target                            L with the bias, the penalties over the whole true prefix
    repetition_penalty_draft_only     L without any penalty (the target's logits processors are
                                      skipped; only the draft is penalised); units with a
                                      repetition penalty
    repetition_penalty_stale_history  the penalties over the prefix at the start of the round
                                      (the drafts before each row are not in its history)
    presence_penalty_ignored,         the target without that one penalty (the other penalties
    frequency_penalty_ignored         as they should be)
    penalties_ignored                 the target without presence and frequency penalties (units
                                      with both and no repetition penalty)
    penalties_count_the_prompt        presence and frequency counted over the whole prefix, the
                                      prompt included (the repetition penalty's convention)
    repetition_penalty_inverted       the repetition penalty taken as its reciprocal (1 / theta):
                                      seen tokens favoured instead of penalised
    repetition_penalty_skips_the_     the repetition penalty counted over the generated tokens
    prompt                            only (the prompt skipped) where the request counts it
    penalty_fed_last_token_only       the penalties' generated tokens: the last token of each
                                      earlier round of the request, then the round's own tokens
                                      before this one (the accepted drafts of earlier rounds
                                      never reach the counts)
    penalty_history_keeps_rejected_   the generated tokens plus, of each earlier round, its
    drafts                            drafts beyond the accepted ones (the rejected draft and
                                      those after it, as its last verification pass held them)
    penalty_history_counts_the_       each verified row's penalties also count the draft the row
    scored_draft                      scores (a history slice one too long): the token is the
                                      mixture over drafts x ~ q of keeping x with min(1, p_x(x) /
                                      q(x)) or a draw from (p_x - q)+, p_x the row with x counted
                                      once more; a bonus token's row is right (needs the drafts of
                                      each round and the draft's logits)
    frequency_penalty_follows_logit_  the frequency penalty with the repetition penalty's sign
    sign                              rule: a negative logit gets + frequency * count
    top_p_applied_twice               the request's pipeline, then top-p once more on its result
    logit_bias_ignored                L without the request's logit bias (penalties applied)
    logit_bias_after_temperature      the penalties on L, then temperature, then the bias added
                                      (b rather than b * T), then the truncations
    target_temperature_twice          the raw logits divided by the temperature before the pipeline
    top_p_before_temperature,         with the penalty, then the sampling steps in another order
    top_p_before_top_k_target,        on the target (a pipeline-order bug: the combined setting of
    truncation_before_temperature     the parity grid is the only one with both knobs, and it has
                                      a penalty)

Besides these, the penalty family of :mod:`._penalty_forms` (a window the request does not set, penalties
compounding along the verify block, the bonus row without penalties, presence as a factor, the
repetition penalty on probabilities, presence and frequency counting the prompt only).

A class whose knob a unit leaves off has no law there (it is the target's law). The round classes
(the last two penalty histories) need the round of each token and the drafts of each round's last
verification pass (``Generation.round_id``, ``drafts``, ``num_accepted``: round steps record them).

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
from ._models import ORDER, pipeline, settings_without
from ._penalty_forms import (
    FORM_FACTS,
    PENALTY_KNOBS,
    PenaltyInputs,
    penalty_form_laws,
    sampling_steps,
    unpenalised,
)
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
_ORDERS = {
    "top_p_before_temperature": ("top_p", "temperature", "top_k", "min_p"),
    "truncation_before_temperature": ("top_k", "top_p", "min_p", "temperature"),
    "top_p_before_top_k_target": ("temperature", "top_p", "top_k", "min_p"),
}
#: the classes that drop one knob of the request (the rest applied as it should be)
_IGNORED = {
    "presence_penalty": "presence_penalty_ignored",
    "frequency_penalty": "frequency_penalty_ignored",
    "logit_bias": "logit_bias_ignored",
}
#: the classes whose penalties count other tokens than the generated ones before each row
_WRONG_COUNTS = ("penalties_count_the_prompt", "penalty_fed_last_token_only", "penalty_history_keeps_rejected_drafts")
#: the class whose repetition penalty counts the generated tokens only, the prompt skipped
REPETITION_SKIPS_PROMPT = "repetition_penalty_skips_the_prompt"
_FACTS = {
    "repetition_penalty_draft_only": "tokens match the target WITHOUT the penalty",
    "repetition_penalty_stale_history": "tokens match the penalty computed over the prefix at the start of each round",
    "presence_penalty_ignored": "tokens match the target with every knob but the presence penalty",
    "frequency_penalty_ignored": "tokens match the target with every knob but the frequency penalty",
    "penalties_ignored": "tokens match the target without its presence and frequency penalties",
    "logit_bias_ignored": "tokens match the target with every knob but the logit bias",
    "logit_bias_after_temperature": "tokens match the target with the logit bias added after temperature, not before",
    "penalties_count_the_prompt": "tokens match presence and frequency penalties counted over the prompt too",
    REPETITION_SKIPS_PROMPT: "tokens match a repetition penalty counted over the generated tokens only, the prompt "
    "skipped",
    "repetition_penalty_inverted": "tokens match the repetition penalty's reciprocal: seen tokens favoured, not "
    "penalised",
    "penalty_fed_last_token_only": "tokens match penalties that count only the last token of each earlier round "
    "(and the round's own tokens before them)",
    "penalty_history_keeps_rejected_drafts": "tokens match penalties that also count the rejected drafts of each "
    "earlier round",
    "top_p_before_temperature": "tokens match the target with top-p applied before temperature",
    "top_p_before_top_k_target": "tokens match the target with top-p applied before top-k",
    "truncation_before_temperature": "tokens match the target with top-k, top-p and min-p applied before temperature",
    "target_temperature_twice": "tokens match the target's logits divided by the temperature before the whole pipeline",
    "penalty_history_counts_the_scored_draft": "tokens match verified rows whose penalties also count the draft "
    "the row scores",
    "frequency_penalty_follows_logit_sign": "tokens match a frequency penalty that adds to negative logits (the "
    "repetition penalty's sign rule)",
    "top_p_applied_twice": "tokens match the target with top-p applied a second time to its own result",
    **FORM_FACTS,
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


Counts = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]


@dataclasses.dataclass(frozen=True)
class _Histories:
    """Of the first n tokens: their pair rows [n], and the counts [n, V] each penalty sees, over the
    whole prefix and over the prefix at the round's start (``seen``: the repetition penalty's,
    prompt included; ``out``: presence and frequency penalties', generated tokens only); and, of
    each class of :data:`_WRONG_COUNTS` that the unit's record allows, the (seen, out) counts its
    penalties see."""

    rows: npt.NDArray[np.int64]
    seen: npt.NDArray[np.float64]
    seen_start: npt.NDArray[np.float64]
    out: npt.NDArray[np.float64]
    out_start: npt.NDArray[np.float64]
    wrong: dict[str, Counts]
    prefixes: list[list[int]]  # each token's prefix, prompt first
    n_prompt: npt.NDArray[np.int64]


class _Request:
    """One request walked token by token: its prefix so far, and what the round classes feed their
    penalties from the rounds it completed (the last token of each; the drafts beyond the accepted
    ones of each)."""

    def __init__(self, prompt: npt.NDArray[np.int64]) -> None:
        self.hist = [int(t) for t in prompt[prompt >= 0]]
        self.n_prompt = len(self.hist)
        self.lasts: list[int] = []
        self.rejected: list[int] = []
        self.round = -1

    def enter_round(self, r: int, gen: Generation) -> None:
        """The token about to be added belongs to round ``r``: close the round before it, if another."""
        if r == self.round:
            return
        if self.round >= 0:
            self.lasts.append(self.hist[-1])
            if gen.drafts is not None:
                d = gen.drafts[self.round][int(gen.num_accepted[self.round]) :]
                self.rejected += [int(t) for t in d if t >= 0]
        self.round = r

    def generated(self, cls: str, j: int) -> list[int]:
        """The generated tokens the penalties of round class ``cls`` count before the round's j-th token."""
        if cls == "penalty_fed_last_token_only":
            return self.lasts + (self.hist[len(self.hist) - j :] if j else [])
        return self.hist[self.n_prompt :] + self.rejected  # penalty_history_keeps_rejected_drafts


def _wrong_classes(gen: Generation, settings: SamplingSettings) -> tuple[str, ...]:
    """The classes of :data:`_WRONG_COUNTS` with a law on this unit: presence or frequency set (the
    round classes also need the round of each token and its drafts); and the repetition penalty
    that skips the prompt, where the request's repetition penalty counts it."""
    out: tuple[str, ...] = ()
    if settings.presence_penalty or settings.frequency_penalty:
        rounds = gen.round_id is not None and gen.drafts is not None
        out = _WRONG_COUNTS if rounds else _WRONG_COUNTS[:1]
    if settings.repetition_penalty != 1.0 and settings.penalize_prompt:
        out = (*out, REPETITION_SKIPS_PROMPT)
    return out


def _histories(gen: Generation, pair: Any, n: int, settings: SamplingSettings) -> _Histories:
    V = pair.target_logits.shape[1]
    rows = np.empty(n, dtype=np.int64)
    seen, seen_start, out, out_start = (np.zeros((n, V)) for _ in range(4))
    wrong = {c: (np.zeros((n, V)), np.zeros((n, V))) for c in _wrong_classes(gen, settings)}
    generated_only = dataclasses.replace(settings, penalize_prompt=False)  # the repetition penalty's counts
    seq_prev, req = -1, _Request(np.zeros(0, dtype=np.int64))
    prefixes, n_prompts = [], np.zeros(n, dtype=np.int64)
    round_of = gen.rounds_of_tokens
    for i in range(n):
        s, j = int(gen.sequence[i]), int(gen.position[i])
        if s != seq_prev:
            assert gen.prompts is not None, "penalty units keep their prompts"
            req, seq_prev = _Request(gen.prompts[s]), s
        req.enter_round(int(round_of[i]), gen)
        hist, n_prompt = req.hist, req.n_prompt
        rows[i] = pair.row_of(hist)
        seen[i], out[i] = history_counts(hist, n_prompt, settings, V)
        start = hist[: len(hist) - j] if j else hist  # the round's drafts kept so far are not in its start
        seen_start[i], out_start[i] = history_counts(start, min(n_prompt, len(start)), settings, V)
        for cls, (c_seen, c_out) in wrong.items():
            if cls == "penalties_count_the_prompt":
                c_seen[i], c_out[i] = seen[i], history_counts(hist, 0, settings, V)[1]
            elif cls == REPETITION_SKIPS_PROMPT:
                c_seen[i], c_out[i] = history_counts(hist, n_prompt, generated_only, V)[0], out[i]
            else:
                c_seen[i], c_out[i] = history_counts(hist[:n_prompt] + req.generated(cls, j), n_prompt, settings, V)
        prefixes.append(list(hist))
        n_prompts[i] = n_prompt
        hist.append(int(gen.tokens[i]))
    return _Histories(rows, seen, seen_start, out, out_start, wrong, prefixes, n_prompts)


def _bias_after_temperature(L: np.ndarray, settings: SamplingSettings, h: _Histories) -> np.ndarray:
    """The law of a target that applies the penalties to the raw logits, divides by the temperature,
    then adds the logit bias, then truncates (top-k, top-p, min-p)."""
    pen = SamplingSettings(**{k: getattr(settings, k) for k in PENALTY_KNOBS})
    bias = settings.bias_vector(L.shape[1])
    assert bias is not None, "a unit with a logit bias"
    x = process_logits(L, pen, seen_counts=h.seen, output_counts=h.out) / settings.temperature + bias
    rest = dataclasses.replace(settings_without(settings, "logit_bias"), temperature=1.0)
    return pipeline(x, rest, ("top_k", "top_p", "min_p"))


def _laws(
    gen: Generation, pair: Any, settings: SamplingSettings, n: int
) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, float], dict[str, str]]:
    """({class: law [n, V]}, history status [n, V]: 0 unseen, 1 seen at the round's start,
    2 seen only in the drafts kept earlier in the round, {class: nats paid}, {class: parameter})."""
    h = _histories(gen, pair, n, settings)
    full, start = h.seen + h.out, h.seen_start + h.out_start  # seen by any penalty
    status = np.where(start > 0, 1, np.where(full > 0, 2, 0))
    L = np.asarray(pair.target_logits, dtype=np.float64)[h.rows]
    plain = unpenalised(settings)
    # the bias and the penalties: the steps before the temperature (as the recorder's law)
    first = SamplingSettings(logit_bias=settings.logit_bias, **{k: getattr(settings, k) for k in PENALTY_KNOBS})
    penalised = process_logits(L, first, seen_counts=h.seen, output_counts=h.out)
    laws = {
        "target": np.asarray(gen.law, dtype=np.float64)[gen.row[:n]],
        "repetition_penalty_stale_history": probs_from_logits(
            L, settings, seen_counts=h.seen_start, output_counts=h.out_start
        ),
        **{name: pipeline(penalised, plain, order) for name, order in _ORDERS.items()},
    }
    if settings.repetition_penalty != 1.0:  # the target's processors skipped: no penalty at all
        laws["repetition_penalty_draft_only"] = probs_from_logits(L, plain)
        inverted = dataclasses.replace(settings, repetition_penalty=1.0 / settings.repetition_penalty)
        laws["repetition_penalty_inverted"] = probs_from_logits(L, inverted, seen_counts=h.seen, output_counts=h.out)
    for knob, name in _IGNORED.items():
        if getattr(settings, knob) != getattr(SamplingSettings(), knob):
            alt = settings_without(settings, knob)
            laws[name] = probs_from_logits(L, alt, seen_counts=h.seen, output_counts=h.out)
    if settings.presence_penalty and settings.frequency_penalty and settings.repetition_penalty == 1.0:
        # both dropped. Not on other units: with a repetition penalty, "every penalty dropped" has
        # the output law of repetition_penalty_draft_only (the target's processors skipped), and
        # the output tokens alone cannot tell the two apart (the diagnosis study's draft-only
        # stepper was named penalties_ignored when this law was on every penalised unit)
        laws["penalties_ignored"] = probs_from_logits(L, plain)
    if not settings.is_greedy and settings.temperature not in (0.0, 1.0):
        laws["target_temperature_twice"] = probs_from_logits(
            L / settings.temperature, settings, seen_counts=h.seen, output_counts=h.out
        )
    if settings.logit_bias and not settings.is_greedy and settings.temperature != 1.0:
        laws["logit_bias_after_temperature"] = _bias_after_temperature(L, settings, h)
    for name, (c_seen, c_out) in h.wrong.items():
        laws[name] = probs_from_logits(L, settings, seen_counts=c_seen, output_counts=c_out)
    laws.update(_pipeline_variants(L, settings, h))
    if gen.drafts is not None and gen.round_id is not None and hasattr(pair, "draft_logits"):
        D = np.asarray(pair.draft_logits, dtype=np.float64)[h.rows]
        if not settings.is_greedy:
            laws["penalty_history_counts_the_scored_draft"] = _scored_draft_counted(gen, L, D, settings, h, laws)
    inputs = PenaltyInputs(L, h.seen, h.out, h.prefixes, h.n_prompt, np.asarray(gen.tokens[:n]))
    forms, pay, params = penalty_form_laws(settings, inputs, gen, laws["target"])
    return {**laws, **forms}, status, pay, params


def _pipeline_variants(L: np.ndarray, settings: SamplingSettings, h: _Histories) -> dict[str, np.ndarray]:
    """The laws of a target whose frequency penalty follows the logit's sign, or that applies top-p
    twice (sampling units with that knob only)."""
    out: dict[str, np.ndarray] = {}
    if settings.is_greedy:
        return out
    plain = sampling_steps(settings)
    if settings.frequency_penalty:
        first = SamplingSettings(logit_bias=settings.logit_bias, repetition_penalty=settings.repetition_penalty)
        x = process_logits(L, first, seen_counts=h.seen)
        sign = np.where(x < 0, -1.0, 1.0)  # the multiplicative penalty's branch, copied
        x = x - settings.presence_penalty * (h.out > 0) - sign * settings.frequency_penalty * h.out
        out["frequency_penalty_follows_logit_sign"] = pipeline(x, plain, ORDER)
    if settings.top_p < 1.0:
        once = process_logits(L, settings, seen_counts=h.seen, output_counts=h.out)
        out["top_p_applied_twice"] = pipeline(once, SamplingSettings(top_p=settings.top_p), ("top_p",))
    return out


def _scored_draft_counted(
    gen: Generation,
    L: np.ndarray,
    D: np.ndarray,
    settings: SamplingSettings,
    h: _Histories,
    laws: dict[str, np.ndarray],
) -> np.ndarray:
    """[n, V] each token's law when every verified row also counts the draft it scores: for a draft x
    ~ q (the drafter right), p_x is the row with x counted once more by every penalty; x is kept with
    min(1, p_x(x) / q(x)), else the token comes from (p_x - q)+. A bonus token's row is the target's."""
    n, V = L.shape
    q = probs_from_logits(D, settings, seen_counts=h.seen, output_counts=h.out)  # [n, V]
    law = np.array(laws["target"], copy=True)
    assert gen.drafts is not None
    gamma = (gen.drafts >= 0).sum(axis=1)[gen.rounds_of_tokens[:n]]
    verified = np.flatnonzero(gen.position[:n] < gamma)  # the bonus rows are right
    # a penalty moves only the logit of the token it counts: x counted once more changes entry x alone
    first = SamplingSettings(logit_bias=settings.logit_bias, **{k: getattr(settings, k) for k in PENALTY_KNOBS})
    base = process_logits(L, first, seen_counts=h.seen, output_counts=h.out)  # [n, V] before temperature
    bumped = process_logits(L, first, seen_counts=h.seen + 1, output_counts=h.out + 1)  # [n, V]: entry x, x counted
    rest = sampling_steps(settings)
    step = max(1, (1 << 22) // (V * V))  # tokens per chunk: [step, c <= V, V] rows, at most 32 MB
    for lo in range(0, len(verified), step):
        idx = verified[lo : lo + step]
        qi = q[idx]  # [m, V]
        # the drafts x ~ q: only ids some row can draft (a truncated drafter leaves a few), largest q first
        c = int((qi > 0).sum(-1).max())
        cand = np.argsort(-qi, axis=-1, kind="stable")[:, :c]  # [m, c]
        px = _rows_with_one_entry_changed(base[idx], bumped[idx], rest, cand)  # [m, c, V]
        qc = np.take_along_axis(qi, cand, -1)
        px_x = np.take_along_axis(px, cand[:, :, None], -1)[:, :, 0]  # [m, c]: p_x(x)
        keep = np.minimum(1.0, np.divide(px_x, qc, out=np.ones_like(qc), where=qc > 0))
        res = np.maximum(px - qi[:, None, :], 0.0)
        mass = res.sum(-1, keepdims=True)
        res = np.divide(res, mass, out=px, where=mass > 0)
        kept = np.zeros_like(qi)
        np.put_along_axis(kept, cand, qc * keep, -1)
        law[idx] = kept + np.einsum("mc,mcv->mv", qc * (1.0 - keep), res)
    return law


def _rows_with_one_entry_changed(
    base: np.ndarray, bumped: np.ndarray, rest: SamplingSettings, cand: np.ndarray
) -> np.ndarray:
    """[m, c, V] the law of each row ``base`` [m, V] with its entry x = cand[:, j] set to
    ``bumped[:, x]``, after the sampling steps ``rest``. Without truncation, in closed form (the
    normaliser changes by one term)."""
    m, c = cand.shape
    rows, cols = np.arange(m)[:, None], np.arange(c)[None, :]
    new = np.take_along_axis(bumped, cand, -1)  # [m, c]
    if rest.top_k or rest.top_p < 1.0 or rest.min_p > 0.0:
        Y = np.repeat(base[:, None, :], c, axis=1)
        Y[rows, cols, cand] = new
        return probs_from_logits(Y, rest)
    top = np.maximum(base.max(-1, keepdims=True), new.max(-1, keepdims=True))
    E, En = np.exp((base - top) / rest.temperature), np.exp((new - top) / rest.temperature)
    Z = E.sum(-1, keepdims=True) - np.take_along_axis(E, cand, -1) + En  # [m, c]: normaliser, entry x changed
    out: np.ndarray = E[:, None, :] / Z[:, :, None]
    out[rows, cols, cand] = En / Z
    return out


def diagnose_penalty(
    units: Sequence[TokenUnit], *, min_llr: float = 10.0, min_explained: float = 0.9
) -> Diagnosis | None:
    """Rank the penalty classes on the units of :func:`penalty_units` (module docstring)."""
    if not units:
        return None
    acc = TokenScores(_CELLS, "penalised token")
    for gen, pair, settings, label in units:
        n = min(len(gen.tokens), PENALTY_TOKENS)
        laws, status, pay, params = _laws(gen, pair, settings, n)
        cell = status * 4 + _bands(laws["target"])  # [n, V]: history status x target-mass band
        acc.add_unit(label, laws, gen.tokens[:n], cell, pay, params)
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
