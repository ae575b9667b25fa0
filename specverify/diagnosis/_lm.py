"""Diagnosis of generators audited against a language model's computed law: token by token.

An LM audit keeps every sequence with its prompt, so each token's law given its true prefix can
be recomputed under each class (one teacher-forced float64 pass per class and unit; ``T_s``: the
target under settings ``s``, ``D_s`` the draft when specverify built the pair and knows it):

    target                  T_s (the audited setting)
    <knob>_ignored          T_s without one knob of the request (temperature, top-k, top-p, min-p,
                            a penalty): lossless speculation of the wrong request, as when a
                            setting is dropped on the speculative path (sglang#10617: min-p and
                            logit bias not applied with EAGLE; vllm#18902: a frequency penalty
                            with no effect under speculation)
    temperature_twice       T_s with the temperature applied twice (logits / T^2)
    always_accept           D_s at the drafted indices, T_s at every (g + 1)-th (the bonus): every
                            draft kept; g fitted over 1..8 (draft known only)
    always_accept_from      T_s up to token k, then as always_accept (a draft buffer or cache that
                            runs out at some length); k and g fitted (draft known only)
    unverified_draft_tail,  as for table generators (:mod:`._stream`; draft known only)
    last_round_unverified

Fitted parameters pay log(grid size) nats (g, the change point) or (parameters / 2) log(n)
(mixture weights); a class is named by the rule of :mod:`._diagnose` (10 nats and 90% of the
deviation explained, or none left significant), else the answer is "not a known class".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..dists import SamplingSettings
from ._diagnose import NOT_KNOWN, Diagnosis
from ._models import settings_without
from ._stream import STREAM_FACTS, cells_by_index, draft_laws
from ._tokens import TokenScores

if TYPE_CHECKING:  # annotations only: importing torch costs seconds on every diagnosis
    from ..lm.transformers_lm import CausalLM

__all__ = [
    "LMStreamUnit",
    "diagnose_lm",
    "LM_TOKENS",
    "KNOB_CLASSES",
    "LM_FACTS",
    "REQUEST_SIGNATURES",
    "diagnose_request_finding",
    "finding_explains_statistics",
    "repeated_requests",
]

#: tokens scored per unit at most (the first sequences'): a stated sample size that keeps it to seconds
LM_TOKENS = 6_000
#: the request knobs a class drops, and the class that drops it
KNOB_CLASSES = {
    "temperature": "temperature_ignored",
    "top_k": "top_k_ignored",
    "top_p": "top_p_ignored",
    "min_p": "min_p_ignored",
    "repetition_penalty": "repetition_penalty_ignored",
    "presence_penalty": "presence_penalty_ignored",
    "frequency_penalty": "frequency_penalty_ignored",
    "logit_bias": "logit_bias_ignored",
}
_MAX_GAMMA = 8


@dataclasses.dataclass(frozen=True, kw_only=True)
class LMStreamUnit:
    """One audited unit of an LM audit: its sequences, and the float64 models that give their laws."""

    label: str
    settings: SamplingSettings
    prompts: Sequence[Sequence[int]]
    sequences: Sequence[Sequence[int]]
    target: CausalLM
    draft: CausalLM | None = None
    gamma: int = 4


def _first_sequences(u: LMStreamUnit) -> tuple[list[list[int]], list[list[int]]]:
    prompts, seqs, n = [], [], 0
    for p, q in zip(u.prompts, u.sequences, strict=True):
        if n >= LM_TOKENS:
            break
        prompts.append(list(p))
        seqs.append(list(q))
        n += len(q)
    return prompts, seqs


def _settings_classes(u: LMStreamUnit, prompts: list[list[int]], seqs: list[list[int]]) -> dict[str, np.ndarray]:
    """{class: law [n, V]} of the target under the audited settings with one change each."""
    s, default = u.settings, SamplingSettings()
    changed = {KNOB_CLASSES[k]: settings_without(s, k) for k in KNOB_CLASSES if getattr(s, k) != getattr(default, k)}
    if s.temperature not in (0.0, 1.0):
        changed["temperature_twice"] = dataclasses.replace(s, temperature=s.temperature**2)
    return {name: np.concatenate(u.target.batch_sequence_probs(prompts, seqs, alt)) for name, alt in changed.items()}


def _always_accept(t: np.ndarray, d: np.ndarray, y: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, int]:
    """The law of a generator that keeps every draft, with the round length g + 1 that fits best."""
    n = len(y)
    pt, pd = np.log(np.maximum(t[np.arange(n), y], 1e-9)), np.log(np.maximum(d[np.arange(n), y], 1e-9))
    ll = [np.where(idx % (g + 1) == g, pt, pd).sum() for g in range(1, _MAX_GAMMA + 1)]
    g = int(np.argmax(ll)) + 1
    return np.where((idx % (g + 1) == g)[:, None], t, d), g


def _always_accept_from(t: np.ndarray, d: np.ndarray, y: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, int, int]:
    """The law of a generator exact up to token k and keeping every draft from k on (a buffer or a
    cache that runs out at some length), with the change point k and round length g + 1 that fit best."""
    n, L = len(y), int(idx.max()) + 1
    gain = np.bincount(idx, weights=np.log(np.maximum(d[np.arange(n), y], 1e-9)), minlength=L)
    gain -= np.bincount(idx, weights=np.log(np.maximum(t[np.arange(n), y], 1e-9)), minlength=L)
    # k = L: no change in this unit (the class's knob is a length: a unit of short requests never reaches it)
    ar, best = np.arange(L), (0.0, 1, L)
    for g in range(1, _MAX_GAMMA + 1):
        for r in range(g + 1):  # rounds start at indices k = r mod (g + 1): the bonus at (i - r) % (g + 1) == g
            tail = np.cumsum((gain * ((ar - r) % (g + 1) != g))[::-1])[::-1]
            ks = np.arange(r, L, g + 1)
            ks = ks[ks >= 1]  # from token 0 on is always_accept
            if len(ks) and tail[ks].max() > best[0]:
                best = (float(tail[ks].max()), g, int(ks[np.argmax(tail[ks])]))
    _, g, k = best
    drafted = (idx >= k) & ((idx - k) % (g + 1) != g)
    return np.where(drafted[:, None], d, t), g, k


def _unit_laws(
    u: LMStreamUnit,
) -> tuple[dict[str, np.ndarray], dict[str, str], dict[str, float], np.ndarray, np.ndarray]:
    """(laws, fitted parameters, prices, ids [n], index in sequence [n]) of one unit's first tokens."""
    prompts, seqs = _first_sequences(u)
    y = np.array([t for q in seqs for t in q], dtype=np.int64)
    idx = np.concatenate([np.arange(len(q)) for q in seqs])
    t = np.concatenate(u.target.batch_sequence_probs(prompts, seqs, u.settings))
    laws: dict[str, np.ndarray] = {"target": t}
    params: dict[str, str] = {}
    pay: dict[str, float] = {}
    if u.draft is not None:
        d = np.concatenate(u.draft.batch_sequence_probs(prompts, seqs, u.settings))
        laws, params, pay = draft_laws(t, d, y, idx)
        laws["always_accept"], g = _always_accept(t, d, y, idx)
        params["always_accept"], pay["always_accept"] = f"rounds of {g} drafts + 1", float(np.log(_MAX_GAMMA))
        laws["always_accept_from"], g, k = _always_accept_from(t, d, y, idx)
        params["always_accept_from"] = f"from token {k}, rounds of {g} drafts + 1" if k < len(y) else "never"
        pay["always_accept_from"] = float(np.log(_MAX_GAMMA * max(int(idx.max()), 1)))
    laws.update(_settings_classes(u, prompts, seqs))
    return laws, params, pay, y, idx


def diagnose_lm(
    units: Sequence[LMStreamUnit], *, min_llr: float = 10.0, min_explained: float = 0.9
) -> Diagnosis | None:
    """Rank the LM stream classes on ``units`` (module docstring); None without units."""
    if not units:
        return None
    acc = TokenScores(12, "token")
    for u in units:
        laws, params, pay, y, idx = _unit_laws(u)
        acc.add_unit(u.label, laws, y, cells_by_index(idx, laws["target"]), pay=pay, params=params)
    ranked = acc.ranked()
    top = ranked[0] if ranked else None
    known = top is not None and top.qualifies(min_llr, min_explained)
    facts = [
        "each generated token scored against the target's law given its true prefix (prompt + the tokens before "
        "it), computed in float64, and against what each class makes of that prefix"
    ]
    if known and top is not None:
        unit = max(top.llr_by_unit, key=lambda k: top.llr_by_unit[k])
        fitted = acc.params.get(top.name, {}).get(unit)
        facts.append(f"{LM_FACTS[top.name]} (strongest in {unit}{f': {fitted}' if fitted else ''})")
    method = (
        f"law of each of {acc.tokens:,} generated tokens under each class, from its prefix (at most {LM_TOKENS:,} "
        "per unit); fitted parameters paid for in nats; events floored at probability 1e-9"
    )
    name = top.name if known and top is not None else NOT_KNOWN
    return Diagnosis(name, ranked, facts, method, min_llr, min_explained, acc.tokens)


#: what each class the LM scorer can name says in a FAIL's facts
LM_FACTS = {
    **{
        c: f"tokens follow the target's law with the request's {k.replace('_', '-')} not applied"
        for k, c in KNOB_CLASSES.items()
    },
    "temperature_twice": "tokens follow the target's law at the temperature squared (applied twice)",
    "always_accept": "tokens follow the draft's law q, with one target token per round: every draft is kept",
    "always_accept_from": "tokens follow the target's law up to some token, then the draft's law q with one "
    "target token per round: from there on every draft is kept",
    "unverified_draft_tail": STREAM_FACTS["unverified_draft_tail"],
    "last_round_unverified": STREAM_FACTS["last_round_unverified"],
}


#: the classes a request-level finding of an LM audit names by its signature (exact: no scoring)
REQUEST_SIGNATURES = {
    "stop_missed_mid_round": "tokens were emitted after a stop id: the stop check looked at part of what a round "
    "committed (its last token, or what came before the length cap)",
    "request_ended_early": "a request ended at neither a stop id nor max_new_tokens: it finished on something the "
    "target did not emit (a drafted stop not yet verified, a rejected draft)",
    "over_max_tokens": "more ids than max_new_tokens came back: the last round was not cut at the cap",
    "id_outside_vocab": "an id outside the vocabulary came back: a recovered or bonus token drawn over a padded "
    "vocabulary (a kernel tile) or from an uninitialised buffer",
    "logprobs_not_target": "the returned logprobs are not the target's law of the true prefix (0 for every token, "
    "the draft's row, or another position's)",
}


_SEEDS_FACT = "requests with different seeds gave the same tokens: one random stream serves them all"


def diagnose_request_finding(signature: str, check: str, *, facts: Sequence[str] = ()) -> Diagnosis:
    """The diagnosis of an exact request-level finding: its class, from the finding's signature
    (``facts``: what else the audit saw that the finding explains)."""
    from ._candidate import Candidate

    cand = Candidate(signature, float("inf"), 1.0, {}, [], {}, "")
    fact = REQUEST_SIGNATURES.get(signature) or _SEEDS_FACT
    method = f"signature of the exact request check of '{check}'"
    return Diagnosis(signature, [cand], [fact, *facts], method, 0.0, 1.0, 0)


def repeated_requests(units: Sequence[tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]]]) -> tuple[int, int]:
    """(requests that repeat an earlier request of the same prompt token for token, requests) over
    ``units`` ((prompts, sequences) each): honest sampling of a few dozen tokens almost never repeats,
    one random stream restarted for every request repeats every time its prompt does."""
    repeats = total = 0
    for prompts, seqs in units:
        seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
        for p, q in zip(prompts, seqs, strict=True):
            key = (tuple(p), tuple(q))
            repeats += key in seen and len(q) > 1
            seen.add(key)
            total += 1
    return repeats, total


def finding_explains_statistics(
    signature: str, check: str, units: Sequence[tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]]]
) -> Diagnosis:
    """An exact finding whose class the token scoring could not name from the failing statistics
    (each token follows the target's law given its prefix; the samples are what is wrong): the
    finding's class, with the repeated requests of the failing units said in its facts."""
    facts = ["the sampled tokens deviate, yet no token-level class beats the target's law given each prefix"]
    repeats, total = repeated_requests(units)
    if repeats:
        facts.append(
            f"{repeats:,} of the sampled units' {total:,} requests repeat an earlier request of the same prompt "
            "token for token: the samples are not independent"
        )
    return diagnose_request_finding(signature, check, facts=facts)
