"""Audits on real language models (transformers), where the target's law is computed, not tabled.

``audit_lm`` drives ``generate(prompt, max_new_tokens, seed, settings) -> list[int]`` (any
implementation: specverify's runner, transformers' assisted generation, an HTTP endpoint) and
tests every generated token against the target's processed distribution given its prefix,
computed by the auditor with one teacher-forced pass in float64 (docs/verdict.md: references compute
in float64). It runs the stages of the table audit with the LM's data: plan (units = setting x
model pair, each with its :class:`~specverify.audit.pipeline.config.TestFamily`; alpha 1e-6, beta
1e-3, eps 0.05, :data:`DEFAULT_SETTINGS`), collect (sequences per unit up to the plan; the budget
a cap that gives INCONCLUSIVE), conclude (the default stream test, ``make_verdict``) and, after a
FAIL, a diagnosis (:func:`specverify.diagnosis.diagnose_lm`: settings not applied, drafts kept
unverified). Options are the fields of :class:`LMAuditConfig` (an unknown one is an error).
Sequences are ``4 (gamma + 1)`` tokens by default, several rounds at the largest gamma in use, so
bugs that appear from the second round on are in scope. The test is the default stream test on the
pooled tokens (round positions are not visible to a black-box generator). A setting the
implementation declines (it raises NotImplementedError) is reported as unsupported, never as a FAIL.
With ``workers=N`` (CPU models), N units are sampled at once, each in a fork of this process on one
torch thread, and concluded in plan order: the verdict of units sampled in turn for a generator whose
output depends on its request alone. One that keeps a state across requests (a cache, an n-gram
pool) starts every unit in a fork from the state it had when the audit began, and in turn from the
state the units before left: ``isolate_units=True`` forks each unit with one worker too, so that any
number of workers gives its verdict (``None``: where this process can fork, as the CLI does).

``audit_lm_pairs`` audits a generator factory ``make_generate(target, draft)`` on model pairs that
specverify builds (:func:`lm_pairs`: a low- and a high-overlap pair of tiny transformers models),
because bugs of the rejection path hide under high overlap and bugs of the all-accepted path under
low overlap; with the draft known, the diagnosis can also name draft-law mechanisms.

``greedy_equivalence`` compares greedy output with target-only greedy token for token; a
divergence is excused only where the target's top-two logits are within ``tie_tol`` (a near-tie
that kernel numerics may flip), and the report gives the margin at every divergence together with
the measured difference between batched and one-token-at-a-time logits.

``common_shape_generator`` adapts the usual third-party signature ``generate(target, draft,
input_ids, max_new_tokens, *, do_sample, temperature, top_p, top_k, seed)``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import os
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from scipy.stats import poisson_binom

from ...dists import GREEDY, SamplingSettings
from ...errors import ImplementationError, MalformedOutputError, SpecVerifyError, UnsupportedSettingError
from ...harness._isolation import forked_in_order
from ...lm.transformers_lm import CausalLM, KVSession
from ...stats import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SERIAL_STRATUM,
    CheckOutcome,
    StreamLaw,
    Verdict,
    default_stream_test,
    event_count_test,
    serial_dependence_test,
)
from ..pipeline.checkpoint import digest, load_json_checkpoint, save_json_checkpoint
from ..pipeline.conclude import FINDING, UNSUPPORTED, fail_fast_skips, failed_outcome, failure_of, make_verdict
from ..pipeline.config import LMAuditConfig, TestFamily
from ..pipeline.plan import DEFAULT_SETTINGS, offset_buckets
from .adapters import call_with_timeout
from .lm_logprobs import RequestOutput, logprob_problem, logprobs_mode, parse_output, reference_laws
from .reported_law import ReportedLaw

__all__ = [
    "LM_VOCAB",
    "LMAuditConfig",
    "LMPair",
    "audit_lm",
    "audit_lm_pairs",
    "audit_lm_reported",
    "lm_pairs",
    "greedy_equivalence",
    "batched_vs_incremental_logit_gap",
    "common_shape_generator",
]

GREEDY_NAME = "greedy equivalence (tie-aware)"
#: ``generate(prompt, max_new_tokens, seed, settings) -> token ids``
Generate = Callable[..., Any]
#: a model pair's kind: the caller's own target (draft unknown), or a pair specverify built
LMPairKind = Literal["given", "low", "high"]
#: what a unit audits: one setting, where requests end (stop ids), or long outputs
LMRole = Literal["settings", "stop", "long"]


def _auditor(model: torch.nn.Module) -> CausalLM:
    return CausalLM(copy.deepcopy(model).to(torch.float64))


def common_shape_generator(
    fn: Callable[..., Any], target: torch.nn.Module, draft: torch.nn.Module | None = None
) -> Generate:
    """``generate(prompt, n, seed, settings)`` over ``fn(target, draft, input_ids, max_new_tokens, *,
    do_sample, temperature, top_p, top_k, seed)`` (input_ids a [1, L] LongTensor; the return value
    the whole sequence or only the new tokens, as a tensor or a list). Settings it cannot express
    (min-p, penalties) raise NotImplementedError, which the audit reports as unsupported."""

    def generate(prompt: list[int], n: int, seed: int, s: SamplingSettings) -> Any:  # ids, checked by the audit
        if s.min_p or s.uses_history:
            raise NotImplementedError(f"the common shape has no min-p or penalties ({s.short()})")
        s.require_conventions(who="the common shape (transformers' conventions)")
        ids = torch.tensor([list(prompt)], dtype=torch.long)
        out = fn(
            target,
            draft,
            ids,
            n,
            do_sample=not s.is_greedy,
            temperature=s.temperature or 1.0,
            top_p=s.top_p,
            top_k=s.top_k,
            seed=seed,
        )
        out = out.tolist() if hasattr(out, "tolist") else list(out)
        if out and isinstance(out[0], list):
            out = out[0]
        return out[len(prompt) :] if len(out) >= len(prompt) + n and out[: len(prompt)] == list(prompt) else out

    generate.__name__ = getattr(fn, "__name__", "generate")
    return generate


def _laws(
    aud: CausalLM, prompts: list[list[int]], seqs: list[list[int]], s: SamplingSettings, logit_tol: float
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sequence: the law rows each token is tested against and marks [m, 2] (token at an
    ambiguous filter boundary, bound on the engine's mass there). With ``logit_tol`` the law of a
    position is its law restricted to the tokens kept under every perturbation within the
    tolerance (specverify.dists._boundary); without, marks are zero."""
    if (logit_tol <= 0 or s.is_greedy) and getattr(aud, "complete", True):
        rows = aud.batch_sequence_probs(prompts, seqs, s)
        return rows, [np.zeros((len(r), 2)) for r in rows]
    rows, marks = [], []
    for (probs, b), seq in zip(aud.batch_sequence_boundaries(prompts, seqs, s, tol=logit_tol), seqs, strict=True):
        at = np.arange(len(seq))
        amb = b.ambiguous[at, seq]
        kept = np.where(b.sure, probs, 0.0)
        rows.append(kept / kept.sum(-1, keepdims=True))
        marks.append(np.stack([amb.astype(float), np.where(b.ambiguous.any(-1), b.ambiguous_bound, 0.0)], axis=1))
    return rows, marks


# -- pairs ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class LMPair:
    """A target model and, when known, the draft the generator speculates with."""

    target: torch.nn.Module
    draft: torch.nn.Module | None = None
    kind: LMPairKind = "given"
    eos_token_id: int | None = None  # a stop id with real mass under the target (the stop unit's)


#: the mean probability of the EOS id under the target of :func:`lm_pairs`
EOS_MASS = 0.05
#: the vocabulary of :func:`lm_pairs` by default: not a multiple of 8 or 64, so the last tile of a kernel
#: that pads the vocabulary has a tail (vllm#44744: an id >= vocab from the padding)
LM_VOCAB = 250
#: attention logits of the default pairs times this (see ``build_model``'s ``attention_scale``)
ATTENTION_SCALE = 1000.0


def lm_pairs(vocab: int = LM_VOCAB, *, seed: int = 0) -> tuple[LMPair, LMPair]:
    """A low- and a high-overlap pair of seeded tiny Llama models (2 layers, hidden 32), built from
    configs: the high draft is the target plus 5% relative weight noise, the low draft an
    independently seeded model of the same shape (as :func:`specverify.harness.make_model_pair`).
    The last id is an EOS with mass :data:`EOS_MASS` on average under the target (and the high
    draft), at many positions: the stop unit's sequences end at it, mid-block included, and a
    shortcut keyed on the last id of the vocabulary meets a token that matters. Attention is
    sharpened (:data:`ATTENTION_SCALE`) so that the law depends on the context, not only on the last
    token: a cache that keeps rejected drafts (ml-explore/mlx-lm#846) changes what the target sees."""
    from ...lm.transformers_lm import build_model, perturbed_copy, with_token_mass

    def model(s: int) -> torch.nn.Module:
        m: torch.nn.Module = build_model(
            "llama",
            vocab=vocab,
            hidden=32,
            layers=2,
            heads=2,
            seed=s,
            lm_head_scale=6.0,
            attention_scale=ATTENTION_SCALE,
        )
        return m

    eos = vocab - 1
    target = with_token_mass(model(seed), eos, mean_prob=EOS_MASS, seed=seed)
    return (
        LMPair(target=target, draft=model(seed + 7919), kind="low", eos_token_id=eos),
        LMPair(target=target, draft=perturbed_copy(target, eps=0.05, seed=seed + 1), kind="high", eos_token_id=eos),
    )


def _default_prompts(vocab: int, seed: int, n: int = 8) -> tuple[tuple[int, ...], ...]:
    rng = np.random.default_rng([seed, 11])
    return tuple(tuple(int(t) for t in rng.integers(0, vocab, int(rng.integers(2, 6)))) for _ in range(n))


# -- plan -------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class LMUnit:
    """One (setting, model pair) cell of an LM audit and its test family."""

    index: int
    setting_index: int
    settings: SamplingSettings
    pair_index: int
    kind: LMPairKind
    family: TestFamily
    length: int  # max_new_tokens of every request of the unit
    role: LMRole = "settings"

    @property
    def label(self) -> str:
        pair = "" if self.kind == "given" else f" / {self.kind}-overlap pair"
        long = f" / {self.length} tokens" if self.role == "long" else ""
        return f"settings[{self.setting_index}] {self.settings.short()}{long}{pair}"

    @property
    def tests(self) -> int:
        """Tests the unit runs: the stream test and the consecutive pairs, plus the stop count or one per
        offset bucket."""
        return 2 + (self.role == "stop") + (len(offset_buckets(self.length)) if self.role == "long" else 0)


def plan_lm(cfg: LMAuditConfig, pairs: Sequence[LMPair]) -> tuple[LMUnit, ...]:
    """Units = settings x pairs, then the request units on the first setting that samples: a stop
    unit (stop ids: the option, else the pair's EOS; on the high-overlap pair, where drafted stops
    are accepted mid-block) and a long unit (``long_length`` tokens; on the low-overlap pair, where
    rejections leave state to roll back). Alpha is split over every test of every unit, the looks,
    and the boundary test (union bound)."""
    settings = cfg.settings if cfg.settings is not None else DEFAULT_SETTINGS
    length = int(cfg.length or 0)
    cells: list[tuple[int, SamplingSettings, int, int, LMRole]] = [
        (i, s, j, length, "settings") for i, s in enumerate(settings) for j, p in enumerate(pairs)
    ]
    first = next(((i, s) for i, s in enumerate(settings) if not s.is_greedy), None)
    if first is not None:
        i, s = first
        j = _pair_of(pairs, "high")
        stops = cfg.stop_token_ids if cfg.stop_token_ids is not None else _eos(pairs[j])
        if stops:
            cells.append((i, dataclasses.replace(s, stop_token_ids=tuple(stops)), j, stop_length(cfg), "stop"))
        if cfg.long_length:
            cells.append((i, s, _pair_of(pairs, "low"), int(cfg.long_length), "long"))
    units = [
        LMUnit(index=u, setting_index=i, settings=s, pair_index=j, kind=pairs[j].kind, family=_NO_FAMILY, length=n,
               role=r)
        for u, (i, s, j, n, r) in enumerate(cells)
    ]  # fmt: skip
    tests = max(sum(u.tests for u in units), 1) * len(cfg.looks) * (2 if cfg.logit_tol > 0 else 1)
    fam = TestFamily(cfg.alpha / tests, cfg.beta, cfg.eps, strata=1, sequential=False)
    return tuple(dataclasses.replace(u, family=fam) for u in units)


def stop_length(cfg: LMAuditConfig) -> int:
    """max_new_tokens of the stop unit: not a multiple of gamma + 1, so that the round that reaches
    the cap crosses it, and short enough that a third of the requests get there (sglang#31599: a
    stop inside that round was masked by the length check)."""
    return int(cfg.length or 0) + cfg.gamma // 2 + 1


def _pair_of(pairs: Sequence[LMPair], kind: LMPairKind) -> int:
    return next((j for j, p in enumerate(pairs) if p.kind == kind), 0)


def _eos(pair: LMPair) -> tuple[int, ...]:
    return () if pair.eos_token_id is None else (pair.eos_token_id,)


_NO_FAMILY = TestFamily(1.0, 1.0, 1.0, strata=1)


def _validated(cfg: LMAuditConfig) -> LMAuditConfig:
    looks = tuple(cfg.looks)
    if not looks or looks[-1] != 1.0 or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] <= 0:
        raise ValueError(
            f"looks={looks!r}: fractions of the planned sample, increasing, ending at 1.0 (e.g. (0.25, 0.5, 1.0))"
        )
    if not (np.isfinite(cfg.logit_tol) and cfg.logit_tol >= 0):
        raise ValueError(f"logit_tol={cfg.logit_tol!r}: a bound on |engine logit - float64 logit|, finite and >= 0")
    if not (isinstance(cfg.long_length, int) and cfg.long_length >= 0):
        raise ValueError(f"long_length={cfg.long_length!r}: tokens per long sequence, an int >= 0 (0: no long unit)")
    if cfg.stop_token_ids is not None:
        SamplingSettings(stop_token_ids=cfg.stop_token_ids)  # the same check as a request's
    if not (isinstance(cfg.workers, int) and cfg.workers >= 1):
        raise ValueError(f"workers={cfg.workers!r}: processes sampling units at once, an int >= 1 (1: in this one)")
    if cfg.isolate_units not in (True, False, None):
        raise ValueError(
            f"isolate_units={cfg.isolate_units!r}: True (each unit in a fresh fork), False (in turn here with one "
            "worker) or None (forks where this process can fork)"
        )
    return dataclasses.replace(cfg, looks=looks, length=cfg.length or 4 * (cfg.gamma + 1))


def _config(config: LMAuditConfig | None, overrides: dict[str, Any]) -> LMAuditConfig:
    fields = {f.name for f in dataclasses.fields(LMAuditConfig)}
    if unknown := sorted(set(overrides) - fields):
        raise SpecVerifyError(
            f"audit_lm() got the unknown option(s) {', '.join(unknown)}; the options are LMAuditConfig's fields: "
            f"{', '.join(sorted(fields))}"
        )
    if "prompts" in overrides and overrides["prompts"] is not None:
        overrides = {**overrides, "prompts": tuple(tuple(int(t) for t in p) for p in overrides["prompts"])}
    for key in ("settings", "stop_token_ids"):
        if overrides.get(key) is not None:
            overrides = {**overrides, key: tuple(overrides[key])}
    return _validated(dataclasses.replace(config or LMAuditConfig(), **overrides))


# -- collect ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class LMSample:
    """What one unit collected: the tokens, the law row each is tested against, boundary marks, and
    the (prompt, sequence) pairs they came from (the diagnosis rebuilds prefixes from them)."""

    tokens: list[int] = dataclasses.field(default_factory=list)
    rows: list[np.ndarray] = dataclasses.field(default_factory=list)  # [len(seq), V] per sequence
    marks: list[np.ndarray] = dataclasses.field(default_factory=list)  # [len(seq), 2] per sequence
    prompts: list[list[int]] = dataclasses.field(default_factory=list)
    sequences: list[list[int]] = dataclasses.field(default_factory=list)
    error: str | None = None
    unsupported: str | None = None
    unsupported_by: str = "implementation"  # or "reference": a reported law that cannot give the setting's
    complete: bool = False
    early: CheckOutcome | None = None  # a FAIL at a look before the last
    looks_done: int = 0  # looks concluded without a FAIL (a resumed unit goes on from the next)
    logprobs_checked: int = 0  # tokens whose returned logprobs matched the target's law
    reported_top: int | None = None  # K when the law came from a reference that reports its top K only
    signature: str | None = None  # the bug record an exact request-level finding names
    # the unit's own stream of request seeds: a unit's sample never depends on how far another got
    rng: np.random.Generator = dataclasses.field(default_factory=lambda: np.random.default_rng(0))

    @property
    def tested(self) -> int:
        """Tokens the stream test sees: all but those emitted at an ambiguous filter boundary."""
        return _tested(self.tokens, self.marks)


def _collect(
    generate: Generate, aud: CausalLM, unit: LMUnit, cfg: LMAuditConfig, sample: LMSample, *, need: int,
    deadline: float, on_batch: Callable[[], None] | None = None,
) -> None:  # fmt: skip
    """Sample ``unit`` into ``sample`` until it holds ``need`` tested tokens, the deadline passes
    (after at least one batch) or ``max_sequences`` is reached; a declined setting or an
    implementation failure ends it."""
    length, s, prompts = unit.length, unit.settings, cfg.prompts or ()
    size = max(1, int(getattr(generate, "batch_size", 1)))
    cap = cfg.max_sequences
    if cap and unit.role == "long":  # the tokens of max_sequences requests of cfg.length, in longer ones
        cap = max(1, -(-cap * int(cfg.length or cfg.gamma + 1) // length))
    while (short := need - sample.tested) > 0:
        i = len(sample.sequences)
        if (time.monotonic() > deadline and sample.tokens) or (cap and i >= cap):
            return
        k = min(size, -(-short // length), (cap - i) if cap else size)
        batch = [list(prompts[(i + j) % len(prompts)]) for j in range(k)]
        seeds = [int(sample.rng.integers(2**31)) for _ in range(k)]
        try:
            outs = _call_batch(generate, batch, length, seeds, s, timeout=call_timeout(cfg, length), name=cfg.name)
        except UnsupportedSettingError as exc:
            sample.unsupported = str(exc)
            return
        except ImplementationError as exc:
            sample.error = str(exc)
            return
        seqs = [o.ids for o in outs]
        if problem := next((m for q in seqs if (m := request_problem(q, length, s, aud.vocab_size))), None):
            sample.error, sample.signature = f"{cfg.name}: {problem.text}", problem.signature
            return
        if lp := _logprobs_problem(generate, aud, batch, outs, s, cfg):
            sample.error, sample.signature = f"{cfg.name}: {lp}", "logprobs_not_target"
            return
        sample.logprobs_checked += sum(len(o.ids) for o in outs if o.logprobs is not None or o.top_logprobs)
        laws, marks = _laws(aud, batch, seqs, s, cfg.logit_tol)
        sample.reported_top = _reported_top(aud)
        sample.rows.extend(laws)
        sample.marks.extend(marks)
        sample.prompts.extend(batch)
        sample.sequences.extend(seqs)
        sample.tokens.extend(t for seq in seqs for t in seq)
        if on_batch is not None:
            on_batch()
    sample.complete = True


def _collect_with_looks(
    generate: Generate, aud: CausalLM, unit: LMUnit, cfg: LMAuditConfig, sample: LMSample, *, deadline: float,
    on_batch: Callable[[], None] | None = None,
) -> None:  # fmt: skip
    """Sample one unit up to each look in turn (group-sequential); stop at the first look whose test
    FAILs. A resumed sample goes on from the first look it had not concluded."""
    need = unit.family.tokens_per_stratum()
    if why := _refused(aud, unit.settings):
        sample.unsupported, sample.unsupported_by = why, "reference"
    if sample.unsupported or sample.error:
        return
    for n_look, look in enumerate(cfg.looks, 1):
        if n_look <= sample.looks_done:
            continue
        sample.complete = False
        _collect(
            generate, aud, unit, cfg, sample, need=max(1, round(need * look)), deadline=deadline, on_batch=on_batch
        )
        if sample.unsupported or sample.error or not sample.complete or n_look == len(cfg.looks):
            return
        c = _conclude_sample(unit, cfg, dataclasses.replace(sample, complete=False))
        if c.status == FAIL:
            stop = f" (stopped at look {n_look} of {len(cfg.looks)}: {len(sample.tokens):,} tokens)"
            sample.early, sample.complete = dataclasses.replace(c, summary=c.summary + stop), False
            return
        sample.looks_done = n_look
    raise AssertionError("looks end at 1.0")


class RequestProblem(NamedTuple):
    """A request's output that no correct implementation returns: its class (a bug record's name)
    and what came back."""

    signature: str
    text: str


def call_timeout(cfg: LMAuditConfig, n: int) -> float | None:
    """The per-call timeout for requests of ``n`` tokens: ``call_timeout`` is for the default length,
    and a longer request gets proportionally longer (a hang guard, never a speed test: a slow
    implementation's verdict must not change with the unit's length)."""
    if cfg.call_timeout is None:
        return None
    return cfg.call_timeout * max(1.0, n / max(int(cfg.length or 1), 1))


def request_problem(ids: Sequence[int], n: int, s: SamplingSettings, vocab: int) -> RequestProblem | None:
    """What is wrong with ``ids`` as the output of a request for ``n`` new tokens under ``s``
    (None: nothing). A request ends at its first stop id (that token included) or at ``n`` tokens:
    tokens after a stop, an end that is neither, ids outside the vocabulary and more than ``n``
    tokens are findings (the reference is target-only sampling with the same stop rule)."""
    ids = list(ids)
    if bad := [t for t in ids if not 0 <= t < vocab]:
        return RequestProblem("id_outside_vocab", f"returned ids {bad[:5]} outside [0, {vocab}) (output {_clip(ids)})")
    if len(ids) > n:
        return RequestProblem("over_max_tokens", f"returned {len(ids)} tokens for max_new_tokens={n} ({_clip(ids)})")
    if (at := s.stop_at(ids)) is not None and at < len(ids) - 1:
        return RequestProblem(
            "stop_missed_mid_round",
            f"emitted {len(ids) - 1 - at} token(s) after stop id {ids[at]} (token {at} of {len(ids)}: "
            f"...{ids[max(0, at - 2) : at + 3]}...; stop_token_ids={list(s.stop_token_ids)}): a request ends at its "
            "first stop token, a stop accepted mid-round included. Cut the output after it, or raise "
            "NotImplementedError when settings.stop_token_ids is set (reported as unsupported)",
        )
    if len(ids) < n and at is None:
        ends = f"a stop id {list(s.stop_token_ids)} or " if s.stop_token_ids else ""
        return RequestProblem(
            "request_ended_early",
            f"returned {len(ids)} tokens {_clip(ids)}: a request ends at {ends}max_new_tokens={n}",
        )
    return None


def _clip(ids: list[int], k: int = 12) -> str:
    return str(ids) if len(ids) <= k else f"[{', '.join(map(str, ids[:k]))}, ...] ({len(ids)} ids)"


def _call_batch(
    generate: Generate, prompts: list[list[int]], length: int, seeds: list[int], s: SamplingSettings, *,
    timeout: float | None, name: str,
) -> list[RequestOutput]:  # fmt: skip
    """``len(prompts)`` outputs: one ``generate.batch`` call when the generator has one (engines
    that schedule requests together; the call gets ``timeout`` per sequence), else one call each.
    An output is ids, or ids with logprobs (:mod:`.lm_logprobs`)."""
    if hasattr(generate, "batch"):
        t = timeout * len(prompts) if timeout else None
        out = call_with_timeout(generate.batch, [list(p) for p in prompts], length, seeds, s, timeout=t, what=name)
        if len(out) != len(prompts):
            raise MalformedOutputError(f"{name}.batch returned {len(out)} sequences for {len(prompts)} prompts")
        return [parse_output(x, f"{name}.batch") for x in out]
    return [
        parse_output(call_with_timeout(generate, list(p), length, sd, s, timeout=timeout, what=name), name)
        for p, sd in zip(prompts, seeds, strict=False)
    ]


def _logprobs_problem(
    generate: Generate, aud: CausalLM, prompts: list[list[int]], outs: list[RequestOutput], s: SamplingSettings,
    cfg: LMAuditConfig,
) -> str | None:  # fmt: skip
    """The first logprob that differs from the target's law (None: none, or none returned)."""
    which = [i for i, o in enumerate(outs) if o.logprobs is not None or o.top_logprobs]
    if not which:
        return None
    mode = logprobs_mode(generate)
    laws = reference_laws(aud, [prompts[i] for i in which], [outs[i].ids for i in which], s, mode)
    for i, law in zip(which, laws, strict=True):
        if problem := logprob_problem(outs[i], law, tol=cfg.logprob_tol, mode=mode):
            return f"{problem} (prompt {prompts[i]}, settings {s.short()})"
    return None


def _tested(toks: list[int], marks: list[np.ndarray]) -> int:
    """Tokens the stream test sees: all but those emitted at an ambiguous filter boundary."""
    return len(toks) - int(sum(m[:, 0].sum() for m in marks))


def _boundary_count(marks: np.ndarray, logit_tol: float) -> dict[str, Any]:
    """The tokens emitted at ambiguous filter boundaries against the most the tolerance allows: a
    count stochastically below a Poisson-binomial of the per-position bounds (each bound holds
    given the past), so its upper tail is a valid p-value."""
    amb = marks[:, 0] > 0
    bounds = np.minimum(marks[:, 1][marks[:, 1] > 0], 1.0)
    n = int(amb.sum())
    pvalue = float(poisson_binom(bounds).sf(n - 1)) if n else 1.0
    return {
        "logit_tol": logit_tol,
        "excused": n,
        "at_most_expected": round(float(bounds.sum()), 3),
        "positions_with_ambiguity": len(bounds),
        "pvalue": pvalue,
    }


# -- conclude ---------------------------------------------------------------------------------------


def _reported_top(aud: CausalLM | ReportedLaw) -> int | None:
    """K when the law comes from a reference that reports its top K only (else None)."""
    return aud.top if isinstance(aud, ReportedLaw) and not aud.complete else None


def _refused(aud: Any, s: SamplingSettings) -> str | None:
    """Why the auditor's law source cannot give the law of ``s`` (a reported law may not), or None."""
    refuses = getattr(aud, "refuses", None)
    return refuses(s) if refuses is not None else None


def _conclude_sample(unit: LMUnit, cfg: LMAuditConfig, sample: LMSample) -> CheckOutcome:
    """The unit's check: unsupported, an implementation failure (exact), the FAIL of an earlier
    look, or the stream test. With ``logit_tol``, tokens at ambiguous filter boundaries are left
    out of the stream test (their positions' laws are already restricted to the sure tokens) and
    counted against their bound instead."""
    label, fam = unit.label, unit.family
    if sample.unsupported:
        return CheckOutcome(
            name=f"{label}: {sample.unsupported_by}", status=UNSUPPORTED, kind="exact", summary=sample.unsupported
        )
    if sample.error:
        return CheckOutcome(
            name=f"{label}: implementation",
            status=FAIL,
            kind="exact",
            summary=sample.error,
            details={**FINDING, "signature": sample.signature} if sample.signature else FINDING,
        )
    if sample.early is not None:
        return sample.early
    toks = np.asarray(sample.tokens)
    keep = np.ones(len(toks), dtype=bool)
    boundary = None
    if cfg.logit_tol > 0 and sample.marks:
        m = np.concatenate(sample.marks)
        keep = m[:, 0] == 0
        boundary = _boundary_count(m, cfg.logit_tol)
        if sample.reported_top:
            boundary["reported_top"] = sample.reported_top
        if (c := _boundary_outcome(label, fam, boundary, len(toks))) is not None:
            return c
    rows = np.concatenate(sample.rows)
    res = _stream_test(rows, toks, keep, unit, cfg, stratum="all generated tokens")
    request = _request_tests(unit, cfg, sample, rows, toks, keep)
    pairs = _serial_test(unit, cfg, sample, rows, toks, keep)
    detail: dict[str, Any] = {
        "setting": f"settings[{unit.setting_index}] {unit.settings.short()}",
        "pair_kind": unit.kind,
        "components": [c.record() for c in res.components],
        "sequences": len(sample.sequences),
        "length": unit.length,
        "logprobs_checked": sample.logprobs_checked,
    }
    detail.update(request.details)
    detail.update(pairs.details)
    if res.pvalue > fam.alpha_fixed and request.failed is not None:
        return dataclasses.replace(request.failed, details=detail)
    if res.pvalue > fam.alpha_fixed and pairs.failed is not None:
        return dataclasses.replace(pairs.failed, details=detail)
    note = ""
    if stops := request.details.get("stops"):  # a PASS says where its requests ended
        note = f"; {stops['observed']:,} requests ended at a stop id, {stops['expected']:,.1f} expected"
    if boundary is not None:
        detail["boundary"] = boundary
        if boundary["excused"]:
            note += (
                f"; {boundary['excused']} more {_where(boundary)} left out (at most "
                f"{boundary['at_most_expected']:.1f} expected)"
            )
    return _stream_outcome(label, fam, res, int(keep.sum()), sample.complete, cfg.eps, detail, note)


def _stream_test(
    rows: np.ndarray,
    toks: np.ndarray,
    keep: np.ndarray,
    unit: LMUnit,
    cfg: LMAuditConfig,
    *,
    stratum: str,
    salt: int = 0,
) -> Any:
    """The default stream test of the kept tokens against their rows, at the unit's per-test alpha."""
    return default_stream_test(
        StreamLaw(rows[keep]),
        toks[keep],
        np.arange(int(keep.sum())),
        rng=np.random.default_rng([cfg.seed, unit.index, salt])
        if salt
        else np.random.default_rng([cfg.seed, unit.index]),
        alpha=unit.family.alpha_fixed,
        beta=unit.family.beta,
        stratum=stratum,
    )


@dataclasses.dataclass(frozen=True)
class _RequestTests:
    """The request unit's own tests: a FAIL (or None) and the facts for the details."""

    failed: CheckOutcome | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


def _request_tests(
    unit: LMUnit, cfg: LMAuditConfig, sample: LMSample, rows: np.ndarray, toks: np.ndarray, keep: np.ndarray
) -> _RequestTests:
    """A stop unit counts its stops against the law's P(stop) at every position (where sequences
    end); a long unit tests each offset bucket on its own (a bug from some offset on)."""
    fam, label = unit.family, unit.label
    if unit.role == "stop":
        stops = list(unit.settings.stop_token_ids)
        r = event_count_test(np.isin(toks[keep], stops), rows[keep][:, stops].sum(axis=1))
        fact = {"observed": r.observed, "expected": round(r.expected, 1), "sd": round(r.sd, 1), "pvalue": r.pvalue}
        if r.pvalue > fam.alpha_fixed:
            return _RequestTests(details={"stops": fact})
        text = (
            f"{r.observed:,} requests ended at a stop id {stops} where the target's law expects {r.expected:,.1f} "
            f"(sd {r.sd:.1f}; p = {r.pvalue:.2g}): {r.direction} stops than target-only sampling makes"
        )
        c = CheckOutcome(name=label, status=FAIL, kind="statistical", summary=f"{label}, where requests end: {text}",
                         stratum="where requests end", finding=text, pvalue=r.pvalue, n=int(keep.sum()))  # fmt: skip
        return _RequestTests(c, {"stops": fact})
    if unit.role != "long":
        return _RequestTests()
    offsets = np.concatenate([np.arange(len(q)) for q in sample.sequences])
    for b, (lo, hi) in enumerate(offset_buckets(unit.length), 1):
        inside = keep & (offsets >= lo) & (offsets < hi)
        if inside.sum() < 50:
            continue
        stratum = f"tokens {lo}-{hi - 1} of each sequence"
        res = _stream_test(rows, toks, inside, unit, cfg, stratum=stratum, salt=b)
        if res.pvalue <= fam.alpha_fixed:
            f = failure_of(stratum, res.worst, res.pvalue)
            return _RequestTests(failed_outcome(label, f, kind="statistical", pvalue=res.pvalue, n=int(inside.sum())))
    return _RequestTests(details={"buckets": [list(b) for b in offset_buckets(unit.length)]})


def _serial_test(
    unit: LMUnit, cfg: LMAuditConfig, sample: LMSample, rows: np.ndarray, toks: np.ndarray, keep: np.ndarray
) -> _RequestTests:
    """Consecutive tokens of a sequence independent given their laws (:func:`serial_dependence_test`,
    grouped by the offset in the sequence: a package shows no rounds). Not run when tokens were left
    out at filter boundaries: a token left out for its value would bias the pair it ends."""
    if not len(toks) or not keep.all():
        return _RequestTests()
    lengths = [len(r) for r in sample.rows]
    seq = np.repeat(np.arange(len(lengths)), lengths)
    offset = np.concatenate([np.arange(n) for n in lengths])
    rng = np.random.default_rng([cfg.seed, unit.index, 5])
    r = serial_dependence_test(rows, toks, np.arange(len(toks)), seq, offset, rng=rng)
    fact = {"consecutive_pairs": {"n": r.n, "groups_df": r.df, "pvalue": r.pvalue}}
    if r.pvalue > unit.family.alpha_fixed:
        return _RequestTests(details=fact)
    f = failure_of(SERIAL_STRATUM, r, r.pvalue)
    return _RequestTests(failed_outcome(unit.label, f, kind="statistical", pvalue=r.pvalue, n=len(toks)), fact)


def _stream_outcome(
    label: str, fam: TestFamily, res: Any, n_tok: int, complete: bool, eps: float, detail: dict[str, Any], note: str
) -> CheckOutcome:
    """FAIL at the family's alpha, PASS when the sample reached eps, else INCONCLUSIVE."""
    common: dict[str, Any] = dict(kind="statistical", pvalue=res.pvalue, eps=res.min_detectable_tv, n=n_tok)
    common["details"] = detail
    if res.pvalue <= fam.alpha_fixed:
        return failed_outcome(label, failure_of("all generated tokens", res.worst, res.pvalue), note, **common)
    if complete and res.min_detectable_tv <= eps * (1 + 1e-9):
        summary = f"no deviation of TV >= {res.min_detectable_tv:.4f} over {n_tok:,} tokens"
        return CheckOutcome(name=label, status=PASS, summary=summary + note, **common)
    short = f"{n_tok:,} tokens ({fam.tokens_per_stratum():,} planned)"
    summary = (
        f"not reached: eps {res.min_detectable_tv:.4f} > {eps:g} after {short}; no deviation found"
        if res.min_detectable_tv > eps * (1 + 1e-9)
        else f"stopped short of the plan (the budget or the sequence cap) after {short}; no deviation found"
    )
    return CheckOutcome(name=label, status=INCONCLUSIVE, summary=summary + note, **common)


def _where(boundary: dict[str, Any]) -> str:
    """Where the tokens left out of the stream test were: at filter boundaries, or also outside a
    reference's reported top K."""
    tol = f"within logit tolerance {boundary['logit_tol']:g}"
    if k := boundary.get("reported_top"):
        return f"outside the reference's top {k} or at filter boundaries {tol}"
    return f"at filter boundaries {tol}"


def _boundary_fail_words(label: str, boundary: dict[str, Any]) -> str:
    n, most, p = boundary["excused"], boundary["at_most_expected"], boundary["pvalue"]
    if k := boundary.get("reported_top"):
        return (
            f"{label}: {n} tokens outside the reference's top {k} or at filter boundaries, more than the bound on "
            f"their mass allows (at most {most:.1f} expected; p = {p:.2g}): the engine puts mass where the "
            "target's law has too little"
        )
    return (
        f"{label}: {n} tokens at top-k/top-p/min-p boundaries, more than logit errors of at most "
        f"{boundary['logit_tol']:g} explain (at most {most:.1f} expected; p = {p:.2g}): the filters keep tokens "
        "they should drop"
    )


def _boundary_outcome(label: str, fam: TestFamily, boundary: dict[str, Any], n: int) -> CheckOutcome | None:
    """A FAIL when more tokens sit at ambiguous filter boundaries than logit errors within the
    tolerance explain (the engine keeps tokens its filters should drop)."""
    if boundary["pvalue"] > fam.alpha_fixed:
        return None
    return CheckOutcome(
        name=label,
        status=FAIL,
        kind="statistical",
        summary=_boundary_fail_words(label, boundary),
        pvalue=boundary["pvalue"],
        n=n,
        details={"boundary": boundary},
    )


# -- the audit --------------------------------------------------------------------------------------


def audit_lm(
    generate: Generate, target_model: torch.nn.Module, config: LMAuditConfig | None = None, /, **options: Any
) -> Verdict:
    """Audit ``generate`` against ``target_model`` (module docstring); ``options`` are fields of
    :class:`LMAuditConfig`. ``settings=()`` with ``greedy_check=True`` is a greedy-only audit."""
    cfg = _config(config, options)
    if cfg.prompts is None:
        cfg = dataclasses.replace(cfg, prompts=_default_prompts(_vocab(target_model), cfg.seed))
    return _run(lambda pair: generate, (LMPair(target=target_model),), cfg)


#: the logit tolerance of an audit against a reported law when none is given: the reference's
#: float32 log-probabilities, from a forward pass of another batch shape than the engine's
REPORTED_LOGIT_TOL = 1e-3


def audit_lm_reported(
    generate: Generate, reference: ReportedLaw, config: LMAuditConfig | None = None, /, **options: Any
) -> Verdict:
    """Audit ``generate`` against the target's law as ``reference`` (a non-speculative endpoint of
    the same model) reports it (:mod:`specverify.audit.sources.reported_law`): no local model.
    ``logit_tol`` 0 becomes :data:`REPORTED_LOGIT_TOL`; returned logprobs are checked only against a
    reference that reports every token."""
    cfg = _config(config, options)
    if cfg.prompts is None:
        cfg = dataclasses.replace(cfg, prompts=_default_prompts(reference.vocab_size, cfg.seed))
    if cfg.logit_tol <= 0:
        cfg = dataclasses.replace(cfg, logit_tol=REPORTED_LOGIT_TOL)
    if getattr(generate, "logprobs_mode", None) and not reference.complete:
        raise SpecVerifyError(
            "checking returned logprobs needs the whole law at each position; ask the reference for every token "
            "(top_logprobs=-1, --reference-logprobs -1) or drop the logprobs check"
        )
    pair = LMPair(target=None)  # type: ignore[arg-type]  # the law comes from the reference
    return _run(lambda _: generate, (pair,), cfg, law=reference)


def audit_lm_pairs(
    make_generate: Callable[[torch.nn.Module, torch.nn.Module], Generate],
    pairs: Sequence[LMPair] | None = None,
    config: LMAuditConfig | None = None,
    /,
    **options: Any,
) -> Verdict:
    """Audit the generator ``make_generate(target, draft)`` builds, on each pair (default
    :func:`lm_pairs`: low and high overlap; one target for both). Units are settings x pairs;
    the greedy check runs on the first pair."""
    pairs = tuple(pairs) if pairs is not None else lm_pairs()
    if not pairs or any(p.draft is None for p in pairs) or len({id(p.target) for p in pairs}) != 1:
        raise SpecVerifyError(
            "audit_lm_pairs needs pairs that share one target and each have a draft (lm_pairs() builds such pairs)"
        )
    cfg = _config(config, options)
    if cfg.prompts is None:
        cfg = dataclasses.replace(cfg, prompts=_default_prompts(_vocab(pairs[0].target), cfg.seed))
    return _run(lambda pair: make_generate(pair.target, pair.draft), pairs, cfg)  # type: ignore[arg-type]


def _vocab(model: torch.nn.Module) -> int:
    return int(model.get_output_embeddings().weight.shape[0])  # type: ignore[operator]


def _check_context(cfg: LMAuditConfig, target: torch.nn.Module) -> None:
    """A request must fit the target's positions: an engine cuts a longer one short (vLLM at
    max_model_len), which would read as a finding of the engine's."""
    mc = getattr(target, "config", None)
    positions = getattr(mc, "max_position_embeddings", None) or getattr(mc, "n_positions", None)
    prompt = max((len(p) for p in cfg.prompts or ()), default=0)
    asked = max(cfg.long_length, cfg.length or 0)
    if isinstance(positions, int) and prompt + asked > positions:
        raise SpecVerifyError(
            f"requests of {asked} tokens after prompts of up to {prompt} need {prompt + asked} positions, but the "
            f"target has {positions} (max_position_embeddings); pass long_length <= {positions - prompt} "
            "(--long-length; 0: no long unit) or shorter prompts"
        )


def _run(
    make: Callable[[LMPair], Generate], pairs: Sequence[LMPair], cfg: LMAuditConfig, law: ReportedLaw | None = None
) -> Verdict:
    """plan -> collect -> conclude -> verdict -> diagnosis, over the units of ``pairs``; the
    target's law computed from ``pairs[0].target`` in float64, or read from ``law``."""
    t0 = time.monotonic()
    if law is None:
        _check_context(cfg, pairs[0].target)
    aud: Any = _auditor(pairs[0].target) if law is None else law
    units = plan_lm(cfg, pairs)
    gens = [make(p) for p in pairs]
    fp = _fingerprint(cfg, pairs, gens[0]) if law is None else digest([_fingerprint(cfg, pairs, gens[0]), law.identity])
    samples = _resumed(cfg, fp, aud, units)
    save = _Saver(cfg.checkpoint, fp, samples)
    checks: list[CheckOutcome] = []
    finals = _final_checks(gens[0], pairs[0].target, aud, units, cfg, law)
    done: dict[int, CheckOutcome | None] = {}  # the final checks' outcomes, filled after the last unit
    with contextlib.closing(_collected(gens, aud, units, cfg, samples, save, t0, finals, done)) as collected:
        for u in collected:
            save(force=True)
            _drop(_unit_file(cfg.checkpoint, u.index))
            checks.append(dataclasses.replace(_conclude_sample(u, cfg, samples[u.index]), check_id=f"unit/{u.index}"))
            if cfg.fail_fast and checks[-1].status == FAIL:
                left = [(w.label, f"unit/{w.index}") for w in units[len(checks) :]]
                checks += fail_fast_skips(checks, left, "the greedy and seed checks")
                break
        else:
            checks += [c for c in (done[i] for i in range(len(finals))) if c is not None]
    v = make_verdict(
        checks, [c.summary for c in checks if c.status == FAIL], alpha=cfg.alpha, beta=cfg.beta, eps=cfg.eps,
        seed=cfg.seed, needed=_needed(checks, units, cfg), samples=sum(len(s.tokens) for s in samples.values()),
        seconds=time.monotonic() - t0, subject=cfg.name, lossy_by_design=cfg.lossy_by_design,
    )  # fmt: skip
    if cfg.checkpoint and v.status != INCONCLUSIVE:
        for path in (cfg.checkpoint, *(_unit_file(cfg.checkpoint, u.index) for u in units)):
            _drop(path)
    if v.status == FAIL and cfg.diagnose:
        v.diagnosis = _diagnosis_of(checks, aud, pairs, units, samples, cfg) if law is None else _NO_MODEL
    return v


def _collected(
    gens: Sequence[Generate], aud: Any, units: Sequence[LMUnit], cfg: LMAuditConfig, samples: dict[int, LMSample],
    save: _Saver, t0: float, finals: Sequence[FinalCheck], done: dict[int, CheckOutcome | None],
) -> Generator[LMUnit, None, None]:  # fmt: skip
    """Collect each unit's sample into ``samples`` and yield the units in plan order, then run the
    final checks into ``done`` (never, if the consumer stops first: fail-fast): in turn, or with
    ``cfg.workers > 1`` or ``cfg.isolate_units`` in forks of this process, that many at once (the
    final checks beside the last units). A unit's sample depends on its own seed stream alone, so
    both give the same samples (for a generator with a state across requests: forks, whatever their
    number); a fork checkpoints its unit to a file of its own (:func:`_unit_file`), merged into the
    checkpoint when the unit is yielded."""
    forked = _in_forks(cfg)

    def collect(u: LMUnit) -> LMSample:
        deadline = t0 + cfg.budget_s * (u.index + 1) / len(units)
        own = {u.index: samples[u.index]}
        on_batch = _Saver(_unit_file(cfg.checkpoint, u.index), save.fp, own) if forked else save
        _collect_with_looks(gens[u.pair_index], aud, u, cfg, samples[u.index], deadline=deadline, on_batch=on_batch)
        return samples[u.index]

    if not forked:
        for u in units:
            collect(u)
            yield u
        done.update((i, check.run()) for i, check in enumerate(finals))
        return
    save(force=True)  # a resume finds the checkpoint even if no unit ends before an interruption
    jobs: list[Callable[[], object]] = [functools.partial(collect, u) for u in units]
    jobs += [check.run for check in finals]
    n = len(units)
    what = [f"sampling unit {u.index}" for u in units] + [f"running the check '{c.name}'" for c in finals]
    with (
        _one_torch_thread(),
        contextlib.closing(forked_in_order(jobs, workers=cfg.workers, what=what.__getitem__)) as outs,
    ):
        for i, out in enumerate(outs):
            if i >= n:  # a final check; a fork that ended inside the implementation is its finding
                done[i - n] = finals[i - n].ended(out) if isinstance(out, ImplementationError) else out
            elif isinstance(out, ImplementationError):  # the generator ended the fork's process
                samples[units[i].index].error = f"{cfg.name}: {out}"
                yield units[i]
            else:
                samples[units[i].index] = out
                yield units[i]


class FinalCheck(NamedTuple):
    """A check run after the units (exact: the greedy check, the seed check)."""

    name: str
    check_id: str
    run: Callable[[], CheckOutcome | None]

    def ended(self, exc: ImplementationError) -> CheckOutcome:
        """The finding when the check's fork ended inside the implementation."""
        return CheckOutcome(
            name=self.name, status=FAIL, kind="exact", summary=str(exc), check_id=self.check_id, details=FINDING
        )


def _final_checks(
    generate: Generate, target: Any, aud: Any, units: Sequence[LMUnit], cfg: LMAuditConfig,
    law: ReportedLaw | None,
) -> list[FinalCheck]:  # fmt: skip
    """The greedy check (against the target, or the reference endpoint's greedy) and the seed check."""
    out = []
    if cfg.greedy_check:
        run = (
            functools.partial(_reported_greedy, generate, law, cfg)
            if law is not None
            else functools.partial(_greedy_check, generate, target, cfg)
        )
        out.append(FinalCheck(GREEDY_NAME, "exact/greedy", run))
    out.append(
        FinalCheck("seed independence", "exact/seeds", functools.partial(_seed_check, generate, aud, units, cfg))
    )
    return out


def _unforkable() -> str | None:
    """Why units cannot be sampled in forks of this process, or None."""
    if not hasattr(os, "fork"):
        return "which this platform lacks"
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return "and a fork cannot use the CUDA context this process holds"
    return None


def _in_forks(cfg: LMAuditConfig) -> bool:
    """Whether the units are sampled in forks (``isolate_units=None``: where forking is possible)."""
    if cfg.workers == 1 and not cfg.isolate_units:
        return cfg.isolate_units is None and _unforkable() is None
    if (why := _unforkable()) is not None:
        asked, fix = ("workers", "workers=1") if cfg.workers > 1 else ("isolate_units", "isolate_units=False")
        raise SpecVerifyError(
            f"{asked}={getattr(cfg, asked)} samples units in forked processes, {why}; pass {fix} (the units then "
            "run in turn here)"
        )
    return True


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Forks compute on one torch thread: a fork whose parent's OpenMP pool has run hangs at its first
    parallel op (tried: a 2000 x 2000 matmul), and with one thread there is none."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _unit_file(checkpoint: str | None, index: int) -> str | None:
    """Where a forked unit checkpoints its progress (None: no checkpoint)."""
    return f"{checkpoint}.unit{index}" if checkpoint else None


def _drop(path: str | None) -> None:
    if path:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


#: the diagnosis of an audit against a reported law: its classes replay the target's computation
_NO_MODEL = {
    "version": 1,
    "verdict": "unavailable",
    "lead": "",
    "facts": [],
    "error": "the target's law was read from a reference endpoint; the diagnosis replays the target and needs it "
    "locally (audit with --model to have the FAIL named)",
}


# -- checkpoints ------------------------------------------------------------------------------------

#: options that change neither the laws nor the plan: a checkpoint stays valid across them
_PLAN_INDEPENDENT = (
    "checkpoint", "resume", "budget_s", "diagnose", "fail_fast", "call_timeout", "target_greedy", "name", "workers",
    "isolate_units",
)  # fmt: skip


def _fingerprint(cfg: LMAuditConfig, pairs: Sequence[LMPair], generate: Generate) -> str:
    """What makes a checkpoint valid to resume: the options, the generator and the models' weights."""
    opts = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _PLAN_INDEPENDENT}
    who = f"{getattr(generate, '__module__', '')}.{getattr(generate, '__qualname__', type(generate).__name__)}"
    models = [_weights(m) for p in pairs for m in (p.target, p.draft) if m is not None]
    return digest({"options": opts, "generator": who, "models": models})


def _weights(model: torch.nn.Module) -> list[object]:
    """A cheap identity of a model's weights: names, shapes and the sum of each tensor's first values."""
    with torch.no_grad():
        return [(n, list(w.shape), float(w.flatten()[:256].double().sum())) for n, w in model.named_parameters()]


def _resumed(cfg: LMAuditConfig, fp: str, aud: CausalLM, units: Sequence[LMUnit]) -> dict[int, LMSample]:
    """Fresh samples, or those of the checkpoint with their laws recomputed from the stored ids."""
    fresh = {u.index: LMSample(rng=np.random.default_rng([cfg.seed, u.index, 1])) for u in units}
    if not cfg.resume:
        return fresh
    if not cfg.checkpoint or not os.path.exists(cfg.checkpoint):
        raise SpecVerifyError(
            f"resume=True needs the checkpoint file an interrupted audit wrote (checkpoint={cfg.checkpoint!r} "
            "does not exist); pass it, or resume=False to start afresh"
        )
    stored = load_json_checkpoint(cfg.checkpoint, fp)
    for u in units:  # a unit a fork was sampling when the audit stopped: its own file is newer
        if (path := _unit_file(cfg.checkpoint, u.index)) and os.path.exists(path):
            stored[str(u.index)] = load_json_checkpoint(path, fp)[str(u.index)]
        if (m := stored.get(str(u.index))) is None:
            continue
        s = fresh[u.index]
        s.rng.bit_generator.state = m["rng"]
        s.error, s.unsupported, s.looks_done = m["error"], m["unsupported"], m["looks_done"]
        if m["sequences"]:
            s.rows, s.marks = _laws(aud, m["prompts"], m["sequences"], u.settings, cfg.logit_tol)
            s.reported_top = _reported_top(aud)
            s.prompts, s.sequences = m["prompts"], m["sequences"]
            s.tokens = [t for q in s.sequences for t in q]
    return fresh


class _Saver:
    """Writes the checkpoint after a batch at most every ``every`` seconds (always when forced): the
    cadence is wall-clock, but what is written, and so the verdict, is not."""

    def __init__(self, path: str | None, fp: str, samples: dict[int, LMSample], every: float = 2.0) -> None:
        self.path, self.fp, self.samples, self.every, self.last = path, fp, samples, every, 0.0

    def __call__(self, *, force: bool = False) -> None:
        if not self.path or (not force and time.monotonic() - self.last < self.every):
            return
        units = {
            str(i): {
                "prompts": s.prompts,
                "sequences": s.sequences,
                "error": s.error,
                "unsupported": s.unsupported,
                "looks_done": s.looks_done,
                "rng": s.rng.bit_generator.state,
            }  # fmt: skip
            for i, s in self.samples.items()
        }
        save_json_checkpoint(self.path, self.fp, units)
        self.last = time.monotonic()


def _reported_greedy(generate: Generate, law: ReportedLaw, cfg: LMAuditConfig) -> CheckOutcome:
    """The greedy check against the reference endpoint's own greedy output; a divergence is
    excused where the reference's top-two log-probabilities are within the tie tolerance or twice
    the logit tolerance (either endpoint may flip such a tie)."""
    length = max(int(cfg.length or 0), cfg.long_length, 16)
    tie = max(cfg.tie_tol, 2 * cfg.logit_tol)
    out = _greedy_outcome(
        generate, [list(p) for p in (cfg.prompts or ())][:8], length, name=cfg.name, tie_tol=tie,
        call_timeout=call_timeout(cfg, length), want_of=lambda p: law.greedy(p, length), margin_of=law.top_two_margin,
        gap=lambda: f"reference {law.identity}",
    )  # fmt: skip
    return dataclasses.replace(out, check_id="exact/greedy")


def _greedy_check(generate: Generate, target: torch.nn.Module, cfg: LMAuditConfig) -> CheckOutcome:
    # greedy over the long unit's length too: a divergence that starts after a few hundred tokens counts
    length = max(int(cfg.length or 0), cfg.long_length, 16)
    out = greedy_equivalence(
        generate, target, prompts=[list(p) for p in (cfg.prompts or ())][:8], length=length,
        name=cfg.name, tie_tol=cfg.tie_tol, target_greedy=cfg.target_greedy, call_timeout=call_timeout(cfg, length),
    )  # fmt: skip
    return dataclasses.replace(out, check_id="exact/greedy")


#: requests of the seed check: one prompt, each with its own seed (and one repeat when seeded)
SEED_REQUESTS = 6
#: the details of a seed check that saw the randomness not follow the seeds (its diagnosis's signature)
_SEED_BUG = {"signature": "seed_not_honoured"}


def _seed_fail(text: str) -> CheckOutcome:
    """The seed check's FAIL: the randomness did not follow the seeds (its diagnosis's signature)."""
    return CheckOutcome(
        name="seed independence", status=FAIL, kind="exact", summary=text, check_id="exact/seeds", details=_SEED_BUG
    )


def _seed_check(generate: Generate, aud: CausalLM, units: Sequence[LMUnit], cfg: LMAuditConfig) -> CheckOutcome | None:
    """Different seeds, different samples; the same seed, the same sample where the generator
    declares ``seeded = True`` (NVIDIA/TensorRT-LLM#19487: requests sharing one RNG stream gave
    identical samples). Two independent requests coincide on a sequence x with probability P(x)^2,
    so a coincidence on any x with P(x) <= delta has probability at most delta per pair: the check
    FAILs on a repeat whose probability under the target law is at most a thousandth of alpha over
    the pairs (P(x) from the float64 law; the audit's false-fail budget is spent on its statistics)."""
    u = next(
        (u for u in units if u.role == "settings" and not u.settings.is_greedy and not _refused(aud, u.settings)), None
    )
    if u is None or not cfg.prompts:
        return None
    try:
        return _seed_outcome(generate, aud, u.settings, cfg)
    except UnsupportedSettingError:
        return None  # the setting is reported unsupported by its unit
    except ImplementationError as exc:
        return CheckOutcome(
            name="seed independence",
            status=FAIL,
            kind="exact",
            summary=str(exc),
            check_id="exact/seeds",
            details=FINDING,  # the implementation failed inside the check: a finding, not a seed bug
        )


def _seed_outcome(generate: Generate, aud: CausalLM, s: SamplingSettings, cfg: LMAuditConfig) -> CheckOutcome:
    """:func:`_seed_check` on one setting."""
    assert cfg.prompts
    rng = np.random.default_rng([cfg.seed, 9])
    seeds = [int(x) for x in rng.choice(2**31, SEED_REQUESTS, replace=False)]
    prompt, n = list(cfg.prompts[0]), max(int(cfg.length or 0), 32)
    outs = [o.ids for o in _call_batch(generate, [prompt] * len(seeds), n, seeds, s,
                                       timeout=call_timeout(cfg, n), name=cfg.name)]  # fmt: skip
    n_pairs, delta = len(seeds) * (len(seeds) - 1) // 2, cfg.alpha * 1e-3
    repeats = [(i, j) for i in range(len(outs)) for j in range(i) if outs[i] == outs[j]]
    for i, j in repeats:
        law = aud.batch_sequence_probs([prompt], [outs[i]], s)[0]
        p = float(np.prod(law[np.arange(len(outs[i])), outs[i]]))
        if p * n_pairs <= delta:
            who = (
                f"seeds {seeds[j]} and {seeds[i]} gave the same {len(outs[i])} tokens: the randomness does not follow "
                "the request's seed"
                if getattr(generate, "sends_seed", True)
                else f"two requests sent without a seed gave the same {len(outs[i])} tokens: unseeded requests share "
                "one random stream"
            )
            text = (
                f"{who} (that sequence has probability {p:.2g} under the target law; any repeat this "
                f"unlikely has probability at most {n_pairs * p:.2g})"
            )
            return _seed_fail(text)
    note = ""
    if getattr(generate, "seeded", False):
        again = _call_batch(generate, [prompt], n, seeds[:1], s, timeout=call_timeout(cfg, n), name=cfg.name)
        if again[0].ids != outs[0]:
            text = (
                f"seed {seeds[0]} gave two different outputs ({_clip(outs[0])}, then {_clip(again[0].ids)}), while "
                f"{cfg.name} declares seeded=True (the same seed reproduces a request)"
            )
            return _seed_fail(text)
        note = "; the same seed reproduced its request (seeded=True)"
    if getattr(generate, "batch_invariant", False) and hasattr(generate, "batch"):
        if (bad := _batch_variance(generate, s, cfg, prompt, seeds[0], n)) is not None:
            return bad
        note += "; alone and among concurrent requests alike (batch_invariant=True)"
    if getattr(generate, "seed_optional", False) and getattr(generate, "sends_seed", True):
        if (bad := _unseeded_after_seeded(generate, aud, s, cfg, prompt, seeds[0], n)) is not None:
            return bad
        note += "; two unseeded requests, each after a request with one seed, differed"
    summary = f"{len(seeds)} seeds, {len(set(map(tuple, outs)))} different samples from one prompt{note}"
    return CheckOutcome(name="seed independence", status=PASS, kind="exact", summary=summary, check_id="exact/seeds")


def _batch_variance(
    generate: Generate, s: SamplingSettings, cfg: LMAuditConfig, prompt: list[int], seed: int, n: int
) -> CheckOutcome | None:
    """A seeded request alone and among concurrent requests with other prompts and seeds must give
    the same tokens where the generator declares ``batch_invariant = True`` (vllm#17498: ranks and
    batches disagreeing on acceptance); the FAIL, or None."""
    assert cfg.prompts
    others = [list(p) for p in cfg.prompts[1:6]] or [prompt[::-1] or [0]]
    t = call_timeout(cfg, n)
    alone = parse_output(call_with_timeout(generate, list(prompt), n, seed, s, timeout=t, what=cfg.name), cfg.name).ids
    mixed = _call_batch(generate, [prompt, *others], n, [seed] + [seed + 1 + i for i in range(len(others))], s,
                        timeout=call_timeout(cfg, n), name=cfg.name)  # fmt: skip
    if mixed[0].ids == alone:
        return None
    text = (
        f"seed {seed} gave {_clip(alone)} alone and {_clip(mixed[0].ids)} among {len(others)} concurrent requests, "
        f"while {cfg.name} declares batch_invariant=True (a seeded request's tokens do not depend on its batch)"
    )
    return _seed_fail(text)


def _unseeded_after_seeded(
    generate: Generate, aud: CausalLM, s: SamplingSettings, cfg: LMAuditConfig, prompt: list[int], seed: int, n: int
) -> CheckOutcome | None:
    """Where the generator takes ``seed=None`` (``seed_optional = True``: a request sent without
    a seed), an unseeded request must not be determined by the seed of the request before it:
    sent one at a time, (seed, None, seed, None) must not repeat in the two unseeded requests
    unless that sequence is likely (abetlen/llama-cpp-python#1809: an unseeded request's seed is
    derived from the last seed set, so a client's seed fixes the next unseeded request of any
    other). The FAIL, or None."""
    t, outs = call_timeout(cfg, n), []
    for sd in (seed, None, seed, None):
        out = call_with_timeout(generate, list(prompt), n, sd, s, timeout=t, what=cfg.name)
        outs.append(parse_output(out, cfg.name).ids)
    if outs[1] != outs[3]:
        return None
    law = aud.batch_sequence_probs([prompt], [outs[1]], s)[0]
    p = float(np.prod(law[np.arange(len(outs[1])), outs[1]]))
    if p > cfg.alpha * 1e-3:
        return None
    return _seed_fail(
        f"two requests sent without a seed, each right after a request with seed {seed}, gave the same "
        f"{len(outs[1])} tokens ({_clip(outs[1])}): an unseeded request's randomness follows the seed of the "
        f"request before it (that sequence has probability {p:.2g} under the target law)"
    )


def _diagnosis_of(
    checks: list[CheckOutcome], aud: CausalLM, pairs: Sequence[LMPair], units: Sequence[LMUnit],
    samples: dict[int, LMSample], cfg: LMAuditConfig,
) -> dict[str, Any] | None:  # fmt: skip
    """A statistical FAIL is scored class by class (:func:`_diagnosis`), and where no class fits but
    an exact check found something, named by that finding's signature; an exact finding alone is
    named by its signature (the stop check, the ids, the logprobs, the seeds); a failed greedy
    check alone gets none (its summary gives the divergence; the sampled tokens did not deviate)."""
    from ...diagnosis import NOT_KNOWN, diagnose_request_finding, finding_explains_statistics

    failed = [c for c in checks if c.status == FAIL]
    signed = [(sig, c.name) for c in failed if (sig := (c.details or {}).get("signature"))]
    if any(c.kind == "statistical" for c in failed):  # the sampled tokens deviate: score them class by class
        d = _diagnosis(aud, pairs, units, samples, cfg)
        if signed and (d is None or d.get("verdict") in (NOT_KNOWN, "unavailable")):
            # no token-level class, but an exact finding (e.g. one random stream for every request:
            # each token follows its law, the samples repeat): the finding's class names the FAIL
            sampled = [(samples[u.index].prompts, samples[u.index].sequences) for u in units]
            return finding_explains_statistics(*signed[0], sampled).to_dict()
        return d
    return diagnose_request_finding(*signed[0]).to_dict() if signed else None


def _diagnosis(
    aud: CausalLM, pairs: Sequence[LMPair], units: Sequence[LMUnit], samples: dict[int, LMSample], cfg: LMAuditConfig
) -> dict[str, Any] | None:
    """The FAIL's diagnosis from the sequences the audit holds; its own failure is reported, never
    raised (the verdict stands on the statistics alone)."""
    from ...diagnosis import LMStreamUnit, diagnose_lm

    drafts = {i: _auditor(p.draft) if p.draft is not None else None for i, p in enumerate(pairs)}
    evidence = [
        LMStreamUnit(
            label=u.label,
            settings=u.settings,
            prompts=samples[u.index].prompts,
            sequences=samples[u.index].sequences,
            target=aud,
            draft=drafts[u.pair_index],
            gamma=cfg.gamma,
        )  # fmt: skip
        for u in units
        if samples[u.index].sequences and not u.settings.is_greedy
    ]
    try:
        d = diagnose_lm(evidence)
    except Exception as exc:  # noqa: BLE001 - the verdict must not depend on the diagnosis
        return {"version": 1, "verdict": "unavailable", "lead": "", "facts": [], "error": repr(exc)}
    return d.to_dict() if d is not None else None


def _needed(checks: list[CheckOutcome], units: Sequence[LMUnit], cfg: LMAuditConfig) -> dict[str, Any] | None:
    """What would settle an INCONCLUSIVE: the planned tokens per unit, in the caller's terms."""
    short = [c for c in checks if c.status == INCONCLUSIVE]
    if not short or not units:
        return None
    need, length = units[0].family.tokens_per_stratum(), int(cfg.length or 1)
    tested = sum(c.n or 0 for c in short)
    total = sum((c.n or 0) + (c.details or {}).get("boundary", {}).get("excused", 0) for c in short)
    per_seq = length * (tested / total if total and tested else 1.0)  # tokens at filter boundaries do not count
    head = f"{len(short)} setting(s) short of {need:,} tested tokens"
    tail = f"(sequences of {length} tokens; about {math.ceil(need / per_seq):,} per setting)"
    return {
        "statement": f"{head}: raise --budget or --rounds {tail}",
        "statement_python": f"{head}: raise budget_s or max_sequences {tail}",  # audit_lm's keywords
        "tokens_per_setting": need,
    }


def batched_vs_incremental_logit_gap(
    model: torch.nn.Module, prompt: list[int], continuation: list[int], rows: list[torch.Tensor] | None = None
) -> float:
    """max |logit| difference between one pass over prompt + continuation and a cached
    one-token-at-a-time pass: the numerical noise that can flip a near-tie. ``rows``: the cached
    pass's rows where the caller has them already (target-only greedy computed them)."""
    full = CausalLM(model).logits(list(prompt) + list(continuation))
    if rows is None:
        s = KVSession(model)
        rows = [s.extend(list(prompt))[-1]]
        for t in continuation[:-1]:
            rows.append(s.extend([t])[-1])
    inc = torch.stack(rows[: len(continuation)])
    return float((full[len(prompt) - 1 : len(prompt) - 1 + len(continuation)] - inc).abs().max())


def greedy_equivalence(
    generate: Generate, target_model: torch.nn.Module, *, prompts: Sequence[Sequence[int]], length: int = 16,
    name: str = "generator", tie_tol: float = 1e-4, target_greedy: Callable[[list[int], int], list[int]] | None = None,
    call_timeout: float | None = None,
) -> CheckOutcome:  # fmt: skip
    """Token-for-token comparison with target-only greedy, tie-aware (see the module docstring)."""
    from ...runners import target_only_generate

    lm = CausalLM(target_model)
    gaps: list[float] = []

    def want_of(prompt: list[int]) -> list[int]:
        rows: list[torch.Tensor] | None = None if target_greedy else []  # the cached pass's rows, kept
        want = (
            target_greedy(prompt, length)
            if target_greedy
            else target_only_generate(target_model, list(prompt), length, GREEDY, torch.Generator(), rows=rows).tokens
        )
        gaps.append(batched_vs_incremental_logit_gap(target_model, prompt, want, rows))
        return want

    def margin_of(prefix: list[int]) -> float:
        top2 = torch.topk(lm.logits(prefix)[-1].double(), 2).values
        return float(top2[0] - top2[1])

    return _greedy_outcome(
        generate, prompts, length, name=name, tie_tol=tie_tol, call_timeout=call_timeout, want_of=want_of,
        margin_of=margin_of, gap=lambda: f"batched-vs-incremental logit gap {max(gaps) if gaps else 0.0:.2g}",
    )  # fmt: skip


def _greedy_outcome(
    generate: Generate, prompts: Sequence[Sequence[int]], length: int, *, name: str, tie_tol: float,
    call_timeout: float | None, want_of: Callable[[list[int]], list[int]], margin_of: Callable[[list[int]], float],
    gap: Callable[[], str],
) -> CheckOutcome:  # fmt: skip
    """The greedy check against ``want_of(prompt)``: a divergence is excused where the reference's
    top-two margin ``margin_of(prefix)`` is within ``tie_tol``; ``gap()`` words the measured noise."""
    divergences, excused = [], 0
    for prompt in map(list, prompts):
        want = want_of(prompt)
        try:
            raw = call_with_timeout(generate, list(prompt), length, 0, GREEDY, timeout=call_timeout, what=name)
            got = parse_output(raw, name).ids[:length]
        except UnsupportedSettingError as exc:
            return CheckOutcome(name=GREEDY_NAME, status=UNSUPPORTED, kind="exact", summary=str(exc))
        except ImplementationError as exc:
            return CheckOutcome(name=GREEDY_NAME, status=FAIL, kind="exact", summary=str(exc))
        if got == want:
            continue
        j = next(i for i in range(length) if i >= len(got) or got[i] != want[i])
        margin = margin_of(list(prompt) + want[:j])
        if margin <= tie_tol:
            excused += 1
        else:
            divergences.append((prompt, j, got[j] if j < len(got) else None, want[j], margin))
    if divergences:
        p, j, g, w, m = divergences[0]
        return CheckOutcome(
            name=GREEDY_NAME,
            status=FAIL,
            kind="exact",
            summary=f"{len(divergences)} of {len(prompts)} prompts diverge from target-only greedy away from any tie; "
            f"first at token {j}: emitted {g}, target argmax {w}, top-2 logit margin {m:.3g} "
            f"(> tie tolerance {tie_tol:g}; measured {gap()})",
        )
    note = f"; {excused} divergence(s) at near-ties (margin <= {tie_tol:g})" if excused else ""
    return CheckOutcome(
        name=GREEDY_NAME,
        status=PASS,
        kind="exact",
        summary=f"{len(prompts)} prompts x {length} tokens equal to target-only greedy{note}; {gap()}",
    )
