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

import copy
import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import torch
from scipy.stats import poisson_binom

from ...dists import GREEDY, SamplingSettings
from ...errors import ImplementationError, MalformedOutputError, SpecVerifyError, UnsupportedSettingError
from ...harness import as_token_ids
from ...lm.transformers_lm import CausalLM, KVSession
from ...stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, StreamLaw, Verdict, default_stream_test
from ..pipeline.checkpoint import digest, load_json_checkpoint, save_json_checkpoint
from ..pipeline.conclude import FINDING, UNSUPPORTED, failed_outcome, failure_of, make_verdict
from ..pipeline.config import LMAuditConfig, TestFamily
from ..pipeline.plan import DEFAULT_SETTINGS
from .adapters import call_with_timeout

__all__ = [
    "LMAuditConfig",
    "LMPair",
    "audit_lm",
    "audit_lm_pairs",
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
    if logit_tol <= 0 or s.is_greedy:
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


def lm_pairs(vocab: int = 256, *, seed: int = 0) -> tuple[LMPair, LMPair]:
    """A low- and a high-overlap pair of seeded tiny Llama models (2 layers, hidden 32), built from
    configs: the high draft is the target plus 5% relative weight noise, the low draft an
    independently seeded model of the same shape (as :func:`specverify.harness.make_model_pair`)."""
    from ...lm.transformers_lm import build_model, perturbed_copy

    def model(s: int) -> torch.nn.Module:
        m: torch.nn.Module = build_model("llama", vocab=vocab, hidden=32, layers=2, heads=2, seed=s, lm_head_scale=6.0)
        return m

    target = model(seed)
    return (
        LMPair(target=target, draft=model(seed + 7919), kind="low"),
        LMPair(target=target, draft=perturbed_copy(target, eps=0.05, seed=seed + 1), kind="high"),
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

    @property
    def label(self) -> str:
        pair = "" if self.kind == "given" else f" / {self.kind}-overlap pair"
        return f"settings[{self.setting_index}] {self.settings.short()}{pair}"


def plan_lm(cfg: LMAuditConfig, pairs: Sequence[LMPair]) -> tuple[LMUnit, ...]:
    """Units = settings x pairs; alpha split over units, looks, and the boundary test (union bound)."""
    settings = cfg.settings if cfg.settings is not None else DEFAULT_SETTINGS
    cells = [(i, s, j, p.kind) for i, s in enumerate(settings) for j, p in enumerate(pairs)]
    tests = max(len(cells), 1) * len(cfg.looks) * (2 if cfg.logit_tol > 0 else 1)
    fam = TestFamily(cfg.alpha / tests, cfg.beta, cfg.eps, strata=1, sequential=False)
    return tuple(
        LMUnit(index=u, setting_index=i, settings=s, pair_index=j, kind=k, family=fam)
        for u, (i, s, j, k) in enumerate(cells)
    )


def _validated(cfg: LMAuditConfig) -> LMAuditConfig:
    looks = tuple(cfg.looks)
    if not looks or looks[-1] != 1.0 or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] <= 0:
        raise ValueError(
            f"looks={looks!r}: fractions of the planned sample, increasing, ending at 1.0 (e.g. (0.25, 0.5, 1.0))"
        )
    if not (np.isfinite(cfg.logit_tol) and cfg.logit_tol >= 0):
        raise ValueError(f"logit_tol={cfg.logit_tol!r}: a bound on |engine logit - float64 logit|, finite and >= 0")
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
    if "settings" in overrides and overrides["settings"] is not None:
        overrides = {**overrides, "settings": tuple(overrides["settings"])}
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
    complete: bool = False
    early: CheckOutcome | None = None  # a FAIL at a look before the last
    looks_done: int = 0  # looks concluded without a FAIL (a resumed unit goes on from the next)
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
    length, s, prompts = int(cfg.length or 0), unit.settings, cfg.prompts or ()
    size = max(1, int(getattr(generate, "batch_size", 1)))
    while (short := need - sample.tested) > 0:
        i = len(sample.sequences)
        if (time.monotonic() > deadline and sample.tokens) or (cfg.max_sequences and i >= cfg.max_sequences):
            return
        k = min(size, -(-short // length), (cfg.max_sequences - i) if cfg.max_sequences else size)
        batch = [list(prompts[(i + j) % len(prompts)]) for j in range(k)]
        seeds = [int(sample.rng.integers(2**31)) for _ in range(k)]
        try:
            seqs = _call_batch(generate, batch, length, seeds, s, timeout=cfg.call_timeout, name=cfg.name)
        except UnsupportedSettingError as exc:
            sample.unsupported = str(exc)
            return
        except ImplementationError as exc:
            sample.error = str(exc)
            return
        seqs = [[int(t) for t in seq[:length]] for seq in seqs]
        if bad := next((q for q in seqs if len(q) < length or any(t < 0 or t >= aud.vocab_size for t in q)), None):
            sample.error = f"{cfg.name} returned {bad}; expected {length} ids in [0, {aud.vocab_size})"
            return
        laws, marks = _laws(aud, batch, seqs, s, cfg.logit_tol)
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


def _call_batch(
    generate: Generate, prompts: list[list[int]], length: int, seeds: list[int], s: SamplingSettings, *,
    timeout: float | None, name: str,
) -> list[list[int]]:  # fmt: skip
    """``len(prompts)`` sequences: one ``generate.batch`` call when the generator has one (engines
    that schedule requests together; the call gets ``timeout`` per sequence), else one call each."""
    if hasattr(generate, "batch"):
        t = timeout * len(prompts) if timeout else None
        out = call_with_timeout(generate.batch, [list(p) for p in prompts], length, seeds, s, timeout=t, what=name)
        if len(out) != len(prompts):
            raise MalformedOutputError(f"{name}.batch returned {len(out)} sequences for {len(prompts)} prompts")
        return [as_token_ids(x, f"{name}.batch").tolist() for x in out]
    return [
        as_token_ids(call_with_timeout(generate, list(p), length, sd, s, timeout=timeout, what=name), name).tolist()
        for p, sd in zip(prompts, seeds, strict=False)
    ]


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


def _conclude_sample(unit: LMUnit, cfg: LMAuditConfig, sample: LMSample) -> CheckOutcome:
    """The unit's check: unsupported, an implementation failure (exact), the FAIL of an earlier
    look, or the stream test. With ``logit_tol``, tokens at ambiguous filter boundaries are left
    out of the stream test (their positions' laws are already restricted to the sure tokens) and
    counted against their bound instead."""
    label, fam = unit.label, unit.family
    if sample.unsupported:
        return CheckOutcome(
            name=f"{label}: implementation", status=UNSUPPORTED, kind="exact", summary=sample.unsupported
        )
    if sample.error:
        return CheckOutcome(
            name=f"{label}: implementation", status=FAIL, kind="exact", summary=sample.error, details=FINDING
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
        if (c := _boundary_outcome(label, fam, boundary, len(toks))) is not None:
            return c
    res = default_stream_test(
        StreamLaw(np.concatenate(sample.rows)[keep]),
        toks[keep],
        np.arange(int(keep.sum())),
        rng=np.random.default_rng([cfg.seed, unit.index]),
        alpha=fam.alpha_fixed,
        beta=fam.beta,
        stratum="all generated tokens",
    )
    detail: dict[str, Any] = {
        "setting": f"settings[{unit.setting_index}] {unit.settings.short()}",
        "pair_kind": unit.kind,
        "components": [c.record() for c in res.components],
        "sequences": len(sample.sequences),
        "length": cfg.length,
    }
    note = ""
    if boundary is not None:
        detail["boundary"] = boundary
        if boundary["excused"]:
            note = (
                f"; {boundary['excused']} more at filter boundaries within logit tolerance "
                f"{cfg.logit_tol:g} left out (at most {boundary['at_most_expected']:.1f} expected)"
            )
    return _stream_outcome(label, fam, res, int(keep.sum()), sample.complete, cfg.eps, detail, note)


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
    summary = (
        f"not reached: eps {res.min_detectable_tv:.4f} > {eps:g} after "
        f"{n_tok:,} tokens ({fam.tokens_per_stratum():,} planned); no deviation found"
    )
    return CheckOutcome(name=label, status=INCONCLUSIVE, summary=summary + note, **common)


def _boundary_outcome(label: str, fam: TestFamily, boundary: dict[str, Any], n: int) -> CheckOutcome | None:
    """A FAIL when more tokens sit at ambiguous filter boundaries than logit errors within the
    tolerance explain (the engine keeps tokens its filters should drop)."""
    if boundary["pvalue"] > fam.alpha_fixed:
        return None
    return CheckOutcome(
        name=label,
        status=FAIL,
        kind="statistical",
        summary=f"{label}: {boundary['excused']} tokens at top-k/top-p/min-p boundaries, more than logit errors "
        f"of at most {boundary['logit_tol']:g} explain (at most {boundary['at_most_expected']:.1f} expected; "
        f"p = {boundary['pvalue']:.2g}): the filters keep tokens they should drop",
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


def _run(make: Callable[[LMPair], Generate], pairs: Sequence[LMPair], cfg: LMAuditConfig) -> Verdict:
    """plan -> collect -> conclude -> verdict -> diagnosis, over the units of ``pairs``."""
    t0 = time.monotonic()
    aud = _auditor(pairs[0].target)
    units = plan_lm(cfg, pairs)
    gens = [make(p) for p in pairs]
    fp = _fingerprint(cfg, pairs, gens[0])
    samples = _resumed(cfg, fp, aud, units)
    save = _Saver(cfg.checkpoint, fp, samples)
    checks = []
    for u in units:
        deadline = t0 + cfg.budget_s * (u.index + 1) / len(units)
        _collect_with_looks(gens[u.pair_index], aud, u, cfg, samples[u.index], deadline=deadline, on_batch=save)
        save(force=True)
        checks.append(dataclasses.replace(_conclude_sample(u, cfg, samples[u.index]), check_id=f"unit/{u.index}"))
    if cfg.greedy_check:
        checks.append(_greedy_check(gens[0], pairs[0].target, cfg))
    v = make_verdict(
        checks, [c.summary for c in checks if c.status == FAIL], alpha=cfg.alpha, beta=cfg.beta, eps=cfg.eps,
        seed=cfg.seed, needed=_needed(checks, units, cfg), samples=sum(len(s.tokens) for s in samples.values()),
        seconds=time.monotonic() - t0, subject=cfg.name, lossy_by_design=cfg.lossy_by_design,
    )  # fmt: skip
    if cfg.checkpoint and os.path.exists(cfg.checkpoint) and v.status != INCONCLUSIVE:
        os.remove(cfg.checkpoint)
    if v.status == FAIL and cfg.diagnose and any(c.status == FAIL and c.details != FINDING for c in checks):
        v.diagnosis = _diagnosis(aud, pairs, units, samples, cfg)
    return v


# -- checkpoints ------------------------------------------------------------------------------------

#: options that change neither the laws nor the plan: a checkpoint stays valid across them
_PLAN_INDEPENDENT = ("checkpoint", "resume", "budget_s", "diagnose", "call_timeout", "target_greedy", "name")


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
    for u in units:
        if (m := stored.get(str(u.index))) is None:
            continue
        s = fresh[u.index]
        s.rng.bit_generator.state = m["rng"]
        s.error, s.unsupported, s.looks_done = m["error"], m["unsupported"], m["looks_done"]
        if m["sequences"]:
            s.rows, s.marks = _laws(aud, m["prompts"], m["sequences"], u.settings, cfg.logit_tol)
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


def _greedy_check(generate: Generate, target: torch.nn.Module, cfg: LMAuditConfig) -> CheckOutcome:
    out = greedy_equivalence(
        generate, target, prompts=[list(p) for p in (cfg.prompts or ())][:8], length=max(int(cfg.length or 0), 16),
        name=cfg.name, tie_tol=cfg.tie_tol, target_greedy=cfg.target_greedy, call_timeout=cfg.call_timeout,
    )  # fmt: skip
    return dataclasses.replace(out, check_id="exact/greedy")


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


def batched_vs_incremental_logit_gap(model: torch.nn.Module, prompt: list[int], continuation: list[int]) -> float:
    """max |logit| difference between one pass over prompt + continuation and a cached
    one-token-at-a-time pass: the numerical noise that can flip a near-tie."""
    full = CausalLM(model).logits(list(prompt) + list(continuation))
    s = KVSession(model)
    rows = [s.extend(list(prompt))[-1]]
    for t in continuation[:-1]:
        rows.append(s.extend([t])[-1])
    inc = torch.stack(rows)
    return float((full[len(prompt) - 1 : len(prompt) - 1 + len(continuation)] - inc).abs().max())


def greedy_equivalence(
    generate: Generate, target_model: torch.nn.Module, *, prompts: Sequence[Sequence[int]], length: int = 16,
    name: str = "generator", tie_tol: float = 1e-4, target_greedy: Callable[[list[int], int], list[int]] | None = None,
    call_timeout: float | None = None,
) -> CheckOutcome:  # fmt: skip
    """Token-for-token comparison with target-only greedy, tie-aware (see the module docstring)."""
    from ...runners import target_only_generate

    lm = CausalLM(target_model)
    divergences, gaps, excused = [], [], 0
    for prompt in map(list, prompts):
        want = (
            target_greedy(prompt, length)
            if target_greedy
            else target_only_generate(target_model, list(prompt), length, GREEDY, torch.Generator()).tokens
        )
        try:
            raw = call_with_timeout(generate, list(prompt), length, 0, GREEDY, timeout=call_timeout, what=name)
            got = as_token_ids(raw, name).tolist()[:length]
        except UnsupportedSettingError as exc:
            return CheckOutcome(name=GREEDY_NAME, status=UNSUPPORTED, kind="exact", summary=str(exc))
        except ImplementationError as exc:
            return CheckOutcome(name=GREEDY_NAME, status=FAIL, kind="exact", summary=str(exc))
        gaps.append(batched_vs_incremental_logit_gap(target_model, prompt, want))
        if got == want:
            continue
        j = next(i for i in range(length) if i >= len(got) or got[i] != want[i])
        lg = lm.logits(list(prompt) + want[:j])[-1]
        top2 = torch.topk(lg.double(), 2).values
        margin = float(top2[0] - top2[1])
        if margin <= tie_tol:
            excused += 1
        else:
            divergences.append((prompt, j, got[j] if j < len(got) else None, want[j], margin))
    gap = max(gaps) if gaps else 0.0
    if divergences:
        p, j, g, w, m = divergences[0]
        return CheckOutcome(
            name=GREEDY_NAME,
            status=FAIL,
            kind="exact",
            summary=f"{len(divergences)} of {len(prompts)} prompts diverge from target-only greedy away from any tie; "
            f"first at token {j}: emitted {g}, target argmax {w}, top-2 logit margin {m:.3g} "
            f"(> tie tolerance {tie_tol:g}; measured batched-vs-incremental logit gap {gap:.2g})",
        )
    note = f"; {excused} divergence(s) at near-ties (margin <= {tie_tol:g})" if excused else ""
    return CheckOutcome(
        name=GREEDY_NAME,
        status=PASS,
        kind="exact",
        summary=f"{len(prompts)} prompts x {length} tokens equal to target-only greedy{note}; "
        f"batched-vs-incremental logit gap {gap:.2g}",
    )
