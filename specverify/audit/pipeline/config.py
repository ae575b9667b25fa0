"""The options of an audit and the test family of each unit, typed: what every stage of the pipeline
(plan, collect, checkpoint, conclude) is handed.

* :class:`AuditConfig`: the options of a table audit, one field each (the CLI maps its options to
  these fields one by one);
* :class:`TestFamily`: one unit's share of alpha, its strata, and the sample size they need.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ...dists import SamplingSettings
from ...stats import DEFAULT_BINS, DEFAULT_COMPONENTS, min_samples_for_tv

__all__ = ["AuditConfig", "TestFamily", "GreedyTies", "Context", "Harness", "StrataRule", "PairKind", "Rule"]

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
#: a declared verification rule: 'full' (min(1, p/q), (p - q)+ residual) enables the white-box strata
Rule = Literal["full"]


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
    target_alpha: float = 0.7  # acceptance of the catalogue's pair
    batch: int = 4000  # rounds per batch (sequences: batch // 16)
    rounds: int | None = None  # rounds (or sequences) per unit: fixed sizes instead of the plan
    workers: int = 1
    max_units: int | None = None
    checkpoint: str | None = None
    resume: bool = False
    progress: bool = False
    exact_checks: bool = True
    diagnose: bool = True  # rank root causes after a FAIL (seconds to a minute; never changes the verdict)
    greedy_ties: GreedyTies = "lowest-id"  # or 'any': a greedy output may take any exactly tied top token
    context: Context = "tables"  # round steps and generators: 'tables' (hashed order-2) or 'transformers' (tiny models)


@dataclasses.dataclass(frozen=True)
class TestFamily:
    """One unit's test family: its share of alpha, its strata, and the sample size they need."""

    alpha: float  # this unit's family-wise false-fail rate (after Bonferroni across units)
    beta: float
    eps: float
    strata: int  # stream strata, pooled included
    whitebox: int = 0  # white-box strata in the same Holm family
    sequential: bool = True  # half of alpha goes to the e-process

    @property
    def alpha_fixed(self) -> float:
        return self.alpha / 2 if self.sequential else self.alpha

    @property
    def alpha_sequential(self) -> float:
        return self.alpha / 2 if self.sequential else 0.0

    @property
    def size(self) -> int:
        return self.strata + self.whitebox

    def tokens_per_stratum(self) -> int:
        """Tokens each stratum needs so that TV >= eps is detected w.p. >= 1 - beta (first Holm step)."""
        per_test = self.alpha_fixed / self.size / DEFAULT_COMPONENTS
        return int(min_samples_for_tv(self.eps, df=DEFAULT_BINS - 1, alpha=per_test, beta=self.beta))
