"""The options of an audit and the test family of each unit, typed: what every stage of the pipeline
(plan, collect, checkpoint, conclude) is handed.

* :class:`AuditConfig`: the options of a table audit, one field each (the CLI maps its options to
  these fields one by one);
* :class:`TestFamily`: one unit's share of alpha, its strata, and the sample size they need.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

from ...dists import SamplingSettings
from ...stats import DEFAULT_BINS, DEFAULT_COMPONENTS, min_samples_for_tv

__all__ = [
    "AuditConfig",
    "LMAuditConfig",
    "TestFamily",
    "GreedyTies",
    "Context",
    "Harness",
    "StrataRule",
    "PairKind",
    "Rule",
]

#: the greedy reference on exact ties of the top logit: the lowest id (target-only greedy) or any tied token
GreedyTies = Literal["lowest-id", "any"]
#: the models round steps and generators are audited on
Context = Literal["tables", "transformers"]
#: which pairs an adapter is audited on: positional rows (kernels), order-1 Markov (the catalogue's
#: sequence samplers), whole prefixes on order-k, position-dependent pairs (round steps, generators)
Harness = Literal["kernel", "sequence", "context"]
#: how emitted tokens are stratified: by position in the round (tail under 5% pooled), first token of a
#: round against the rest, or not at all (a black box shows no rounds)
StrataRule = Literal["positions", "first-later", "pooled"]
#: a unit's model pair: the catalogue's tuned pair, or a low- / high-overlap pair
PairKind = Literal["default", "low", "high"]
#: with ``--logits``, the pairs of every setting after the first: one, alternating low and high, or both
ParityPairs = Literal["alternate", "both"]
#: a declared verification rule: 'full' (min(1, p/q), (p - q)+ residual) enables the white-box strata;
#: 'block' (block verification, Sun et al. ICLR 2025) enables the block rule's strata (specverify.stats._block)
Rule = Literal["full", "block"]


@dataclasses.dataclass(kw_only=True)
class AuditConfig:
    """Every option of a table audit (kernels, round steps, generators, the catalogue). The CLI sets
    each field explicitly (``specverify.audit.front.cli._config``); ``audit(adapter, **overrides)`` takes
    the field names as keywords, and an unknown one is a TypeError, never dropped."""

    alpha: float = 1e-6
    beta: float = 1e-3
    eps: float = 0.05
    budget_s: float = 600.0  # a cap: reaching it makes the verdict INCONCLUSIVE
    seed: int = 0
    gamma: int = 4
    vocab: int = 64
    # None: DEFAULT_SETTINGS, or PARITY_GRID for implementations given logits
    settings: tuple[SamplingSettings, ...] | None = None
    # implementations given logits: each setting after the first on one pair, alternating the kinds
    # (about half the time), or on both (every knob sees rejections and full acceptances)
    parity_pairs: ParityPairs = "alternate"
    target_alpha: float = 0.7  # acceptance of the catalogue's pair
    batch: int = 4000  # rounds per batch (sequences: batch // 16)
    # rounds (or sequences) per unit: fixed sizes instead of the plan (long units: AuditUnit.rounds_cap)
    rounds: int | None = None
    workers: int = 1
    # each batch in a fresh fork (always so with workers > 1): a state the implementation keeps
    # across calls cannot carry from one batch to another, so any workers and a resume give the
    # same samples (pipeline.collect); the CLI sets it wherever forking is safe
    isolate_batches: bool = False
    max_units: int | None = None
    checkpoint: str | None = None
    resume: bool = False
    progress: bool = False
    exact_checks: bool = True
    diagnose: bool = True  # rank root causes after a FAIL (seconds to a minute; never changes the verdict)
    # stop at the first unit that FAILs: the units after it and the exact checks are SKIPPED. The
    # status is the same (one FAIL fails the audit); the verdict lists fewer findings.
    fail_fast: bool = False
    greedy_ties: GreedyTies = "lowest-id"  # or 'any': a greedy output may take any exactly tied top token
    context: Context = "tables"  # round steps and generators: 'tables' (hashed order-2) or 'transformers' (tiny models)
    long_length: int = 512  # round steps and generators: one unit of sequences this long (0: none)
    # round steps: the stop unit's stop ids (made heavy); None: the last id of the vocabulary; (): no stop unit
    stop_token_ids: tuple[int, ...] | None = None

    @property
    def isolated(self) -> bool:
        """Whether each call into the implementation (a batch, an exact check, the diagnosis's
        repeat of one) runs in a fresh fork (:func:`specverify.harness.call_in_fork`)."""
        return self.workers > 1 or self.isolate_batches


@dataclasses.dataclass(frozen=True, kw_only=True)
class LMAuditConfig:
    """Every option of an audit against a language model's computed law (``audit_lm``,
    ``audit_lm_pairs``, endpoints): the rates, settings and budget mean what they mean in
    :class:`AuditConfig`; ``audit_lm(generate, model, **overrides)`` takes the field names as
    keywords, and an unknown one is an error, never dropped."""

    alpha: float = 1e-6
    beta: float = 1e-3
    eps: float = 0.05
    budget_s: float = 600.0  # a cap: reaching it makes the verdict INCONCLUSIVE
    seed: int = 0
    gamma: int = 4  # the largest gamma in use: sequences default to 4 (gamma + 1) tokens
    settings: tuple[SamplingSettings, ...] | None = None  # None: DEFAULT_SETTINGS
    prompts: tuple[tuple[int, ...], ...] | None = None  # None: 8 seeded prompts of 2 to 5 ids
    length: int | None = None  # tokens per sequence; None: 4 (gamma + 1)
    # the stop unit's stop ids: None, the EOS of pairs specverify builds (none for a given model); () no stop unit
    stop_token_ids: tuple[int, ...] | None = None
    long_length: int = 512  # tokens per sequence of the long unit (block boundaries crossed); 0: no long unit
    max_sequences: int | None = None  # sequences per unit at most: fixed sizes (the long unit: as many tokens)
    name: str = "generator"
    call_timeout: float | None = 60.0  # seconds per call (per sequence of a batch call)
    greedy_check: bool = True
    target_greedy: Callable[[list[int], int], list[int]] | None = None  # the reference greedy, when not target-only
    tie_tol: float = 1e-4  # top-2 logit margin under which a greedy divergence is a near-tie
    lossy_by_design: bool = False
    looks: tuple[float, ...] = (1.0,)  # fractions of the plan tested in turn (alpha split over them)
    logit_tol: float = 0.0  # bound on |engine logit - float64 logit| at filter boundaries
    logprob_tol: float = 1e-3  # nats: returned logprobs farther than this from the float64 law are a finding
    fail_fast: bool = False  # stop at the first unit that FAILs (AuditConfig.fail_fast)
    diagnose: bool = True  # rank root causes after a FAIL (never changes the verdict)
    checkpoint: str | None = None  # a file the collected ids are written to (and resumed from)
    resume: bool = False
    # units sampled at once, each in a fork of this process on one torch thread (CPU models; the same
    # samples as 1, which samples them in turn here)
    workers: int = 1
    # each unit (and each final check) in a fresh fork even with one worker: every one starts from the
    # state the generator had when the audit began, so a generator that keeps a state across requests
    # (a cache, an n-gram pool) gets the verdict of any number of workers; None: where this process
    # can fork (not with a CUDA context), as the CLI does
    isolate_units: bool | None = False


@dataclasses.dataclass(frozen=True)
class TestFamily:
    """One unit's test family: its share of alpha, its strata, and the sample size they need."""

    alpha: float  # this unit's family-wise false-fail rate (after Bonferroni across units)
    beta: float
    eps: float
    strata: int  # stream strata, pooled included
    whitebox: int = 0  # white-box strata in the same Holm family
    sequential: bool = True  # half of alpha goes to the e-process
    extra: int = 0  # FAIL-only tests in the same Holm family: a long unit's offset buckets, a stop unit's count
    serial: int = 0  # the consecutive-pairs test in the same Holm family (1 for every table unit)

    @property
    def alpha_fixed(self) -> float:
        return self.alpha / 2 if self.sequential else self.alpha

    @property
    def alpha_sequential(self) -> float:
        return self.alpha / 2 if self.sequential else 0.0

    @property
    def size(self) -> int:
        return self.strata + self.whitebox + self.extra + self.serial

    def tokens_per_stratum(self) -> int:
        """Tokens each stratum needs so that TV >= eps is detected w.p. >= 1 - beta (first Holm step)."""
        per_test = self.alpha_fixed / self.size / DEFAULT_COMPONENTS
        return int(min_samples_for_tv(self.eps, df=DEFAULT_BINS - 1, alpha=per_test, beta=self.beta))
