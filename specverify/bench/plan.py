"""``specverify bench plan``: the samples each default audit unit draws, against what its guarantee needs.

Every unit of a default plan certifies, in each of its strata, that a deviation of total variation
>= eps on the stratum's cells (32 sorted-mass bins) is detected with probability >= 1 - beta, at a
family-wise false-fail rate alpha for the whole audit. For each unit of the default plans of a kernel
and a round step (each plain and with ``--logits``), a correct implementation is sampled exactly as
an audit samples it, until the plan is met, and the table prints, in tokens (machine-independent):

* ``need``: per stratum, what the plan asks (chi-square power at the first Holm step, alpha split
  over units, the e-process, strata and the stream test's components);
* ``chi2``: the same chi-square with the audit's whole alpha on one stratum (what the splits cost);
* ``vllm``: vLLM's per-position rule (Pearson, reject when X^2 > df + 10 sqrt(2 df)) at the same eps
  and beta on the same cells; its own false-fail rate is printed below the table;
* ``floor``: Le Cam's two-point floor (:func:`specverify.stats.samples_any_test_needs_for_tv`): no
  test of any kind does with fewer, whatever its cells;
* ``drawn``: the tokens the unit drew in all strata (a rarely reached position costs the most);

and the ratios ``need / floor`` (the test's cost) and ``drawn / (strata x floor)`` (the test's and
the allocation's). The white-box strata of a declared full rule share the stream strata's tokens,
so they enter the Holm split but not the token count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import optimize, stats

from ..algorithms.chain_numpy import verify_chain_batch
from ..audit.pipeline.collect import UnitSample, WorkerPool, collect_unit
from ..audit.pipeline.config import AuditConfig
from ..audit.pipeline.plan import plan_audit, smallest_stratum, strata_of
from ..audit.sources.adapters import Adapter, KernelAdapter, RoundAdapter
from ..dists import probs_from_logits
from ..stats import DEFAULT_BINS, min_samples_for_tv, samples_any_test_needs_for_tv

__all__ = ["PlanRow", "plan_rows", "vllm_rule_samples_for_tv", "main"]


@dataclasses.dataclass(frozen=True)
class PlanRow:
    shape: str
    unit: str
    strata: int  # stream strata with tokens of their own (pooled included)
    holm: int  # tests in the unit's Holm family (stream and white-box strata)
    need: int
    chi2: int
    vllm: int
    floor: int
    drawn: int

    @property
    def need_ratio(self) -> float:
        return self.need / self.floor

    @property
    def drawn_ratio(self) -> float:
        return self.drawn / (self.strata * self.floor)


def vllm_rule_samples_for_tv(eps: float, *, beta: float, cells: int = DEFAULT_BINS) -> tuple[int, float]:
    """(tokens, false-fail rate) of vLLM's rule X^2 > df + 10 sqrt(2 df) on ``cells`` cells: the tokens
    at which a deviation of TV ``eps`` of the worst shape (Cohen's w = 2 eps) is detected w.p. 1 - beta."""
    df = cells - 1
    crit = df + 10 * math.sqrt(2 * df)

    def short(lam: float) -> float:
        return float(stats.ncx2.sf(crit, df, lam)) - (1 - beta)

    lam = optimize.brentq(short, 1e-9, 1e6, xtol=1e-9)
    return math.ceil(lam / (4 * eps * eps)), float(stats.chi2.sf(crit, df))


def _kernel(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: np.random.Generator) -> Any:
    """The full rule, vectorised: a correct kernel whose positions are what any correct one's are."""
    b, g = np.shape(draft_tokens)
    res = verify_chain_batch(draft_tokens, draft_probs, target_probs, generator.random((b, g)), generator.random(b))
    return res.tokens


def _kernel_logits(draft_tokens: Any, draft_logits: Any, target_logits: Any, settings: Any, generator: Any) -> Any:
    q, p = (probs_from_logits(np.asarray(x, dtype=np.float64), settings) for x in (draft_logits, target_logits))
    return _kernel(draft_tokens, q, p, generator)


def _step(prefix: Sequence[int], draft: Callable[..., Any], target: Callable[..., Any], gamma: int, rng: Any) -> Any:
    """A correct round step (the README's): the plan's positions do not depend on which one."""
    return _round(list(prefix), draft, target, gamma, rng, lambda rows, _history: np.asarray(rows, np.float64))


def _step_logits(prefix: Any, draft: Any, target: Any, gamma: int, rng: Any, settings: Any) -> Any:
    def process(rows: Any, history: list[int]) -> Any:
        v = np.shape(rows)[-1]
        seen = np.bincount(np.asarray(history, dtype=np.int64), minlength=v).astype(np.float64)
        out = np.bincount(np.asarray(history[settings.prompt_len :], dtype=np.int64), minlength=v).astype(np.float64)
        return probs_from_logits(np.asarray(rows, np.float64), settings, seen_counts=seen, output_counts=out)

    return _round(list(prefix), draft, target, gamma, rng, process)


def _round(prefix: list[int], draft: Any, target: Any, gamma: int, rng: Any, process: Any) -> list[int]:
    xs: list[int] = []
    qs = []
    for _ in range(gamma):
        q = process(draft(prefix + xs), prefix + xs)
        xs.append(int(rng.choice(len(q), p=q / q.sum())))
        qs.append(q)
    rows = np.asarray(target(prefix, xs))
    ps = [process(rows[j], prefix + xs[:j]) for j in range(gamma + 1)]
    res = verify_chain_batch([xs], np.array([qs]), np.array([ps]), rng.random((1, gamma)), rng.random(1))
    return [int(t) for t in res.tokens[0] if t >= 0]


#: the shapes the table covers: (name, the adapter of a correct implementation)
SHAPES: dict[str, Callable[[], Adapter]] = {
    "kernel": lambda: KernelAdapter(_kernel, name="kernel"),
    "kernel --logits": lambda: KernelAdapter(_kernel_logits, name="kernel --logits", logits=True),
    "round step": lambda: RoundAdapter(_step, name="round step"),
    "round step --logits": lambda: RoundAdapter(_step_logits, name="round step --logits", logits=True),
}


def plan_rows(shape: str, cfg: AuditConfig | None = None) -> list[PlanRow]:
    """One row per unit of ``shape``'s default plan, its tokens drawn by a correct implementation."""
    cfg = cfg or AuditConfig()
    adapter = SHAPES[shape]()
    plan = plan_audit(adapter, cfg)
    pairs = {u.index: u.make_pair(adapter.harness, cfg) for u in plan.units}
    pool = WorkerPool(1, adapter, pairs)
    chi2 = min_samples_for_tv(cfg.eps, df=DEFAULT_BINS - 1, alpha=cfg.alpha, beta=cfg.beta)
    vllm, _ = vllm_rule_samples_for_tv(cfg.eps, beta=cfg.beta)
    floor = math.ceil(samples_any_test_needs_for_tv(cfg.eps, alpha=cfg.alpha, beta=cfg.beta))
    rows = []
    try:
        for u in plan.units:
            need = plan.need(u)
            sample = collect_unit(u, pairs[u.index], cfg, need, UnitSample(), pool, deadline=math.inf)
            held = np.bincount(strata_of(sample.gen.position, u.strata_rule))  # tokens per stratum
            assert smallest_stratum(sample.gen.position, u.strata_rule) >= need, "the plan was not met"
            rows.append(
                PlanRow(
                    shape,
                    u.label,
                    int((held > 0).sum()),
                    u.family.size,
                    need,
                    chi2,
                    vllm,
                    floor,
                    len(sample.gen.tokens),
                )
            )
    finally:
        pool.close()
    return rows


def main(*, shapes: Sequence[str] = tuple(SHAPES), printer: Callable[[str], object] = print) -> list[PlanRow]:
    cfg = AuditConfig()
    printer(f"tokens per unit at the default plan: alpha {cfg.alpha:g}, beta {cfg.beta:g}, eps {cfg.eps:g}")
    head = f"{'shape / unit':58s} {'strata':>6s} {'need':>7s} {'chi2':>7s} {'vllm':>7s} {'floor':>6s}"
    printer(f"{head} {'drawn':>9s} {'need/floor':>10s} {'drawn/(S*floor)':>15s}")
    out = []
    for shape in shapes:
        for r in plan_rows(shape, cfg):
            out.append(r)
            name = f"{shape}: {r.unit}"[:58]
            printer(
                f"{name:58s} {r.strata:6d} {r.need:7d} {r.chi2:7d} {r.vllm:7d} {r.floor:6d} {r.drawn:9d} "
                f"{r.need_ratio:10.2f} {r.drawn_ratio:15.2f}"
            )
    _, rate = vllm_rule_samples_for_tv(cfg.eps, beta=cfg.beta)
    printer(
        f"vllm: its threshold's false-fail rate on 32 cells is {rate:.1e} per position; floor: no test does with "
        "fewer (Le Cam's two-point bound); strata: stream strata with tokens (white-box strata share them)"
    )
    return out
