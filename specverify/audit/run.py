"""The audit run: plan, collect, conclude (one module per stage; this one strings them together).

* :mod:`specverify.audit.plan`: units (setting x model pair) and each one's test family and size;
* :mod:`specverify.audit.collect`: seeded batches per unit, early stopping, time cap, workers;
* :mod:`specverify.audit.checkpoint`: what was collected, keyed on implementation and options;
* :mod:`specverify.audit.conclude`: the tests, each unit's outcome, the verdict.

The verdict is a function of the implementation, the seed and the options: sampling stops at the
plan (or at ``rounds``), never at a time; ``budget_s`` is a cap that, when it cuts sampling short,
makes the verdict INCONCLUSIVE with a statement of the rounds and time that would settle it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dists import SamplingSettings
from ..errors import ImplementationError, SpecVerifyError
from ..stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, Verdict
from .adapters import Adapter
from .checkpoint import fingerprint, load_checkpoint, save_checkpoint
from .collect import UnitSample, WorkerPool, collect_unit, smallest_stratum
from .conclude import SKIPPED, conclude_unit, make_verdict
from .exact_checks import EXACT_CHECKS
from .plan import DEFAULT_SETTINGS, PARITY_GRID, AuditPlan, AuditUnit, plan_audit

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["AuditConfig", "audit", "DEFAULT_SETTINGS", "PARITY_GRID"]


@dataclasses.dataclass
class AuditConfig:
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
    greedy_ties: str = "lowest-id"  # or 'any': a greedy output may take any exactly tied top token
    context: str = "tables"  # round steps and generators: 'tables' (hashed order-2) or 'transformers' (tiny models)


def audit(adapter: Adapter, config: AuditConfig | None = None, **overrides: Any) -> Verdict:
    """Audit ``adapter``; keyword overrides set fields of :class:`AuditConfig`."""
    cfg = dataclasses.replace(config or AuditConfig(), **overrides)
    t0 = time.monotonic()
    plan = plan_audit(adapter, cfg)
    fp = fingerprint(adapter, cfg)
    samples = _resume(cfg, fp)
    pairs = {u.index: u.make_pair(adapter.harness, cfg) for u in plan.units}
    checks, evidence = _collect_all(adapter, cfg, plan, pairs, samples, fp, deadline=t0 + cfg.budget_s)
    checks += _exact(adapter, cfg, plan, pairs)
    checks += [
        CheckOutcome(name=f"plan: {why.split(':')[0]}", status=SKIPPED, kind="exact", summary=why)
        for why in plan.skipped
    ]
    evidence += [
        f"{c.name}: {c.summary}" if not c.summary.startswith(c.name) else c.summary
        for c in checks
        if c.status == FAIL and c.kind == "exact"
    ]
    needed = _needed(plan, samples, cfg, time.monotonic() - t0)
    v = make_verdict(
        checks,
        _first_by_holm(checks, evidence),
        alpha=cfg.alpha,
        beta=cfg.beta,
        eps=cfg.eps,
        seed=cfg.seed,
        needed=needed,
        samples=sum(len(s.gen.tokens) for s in samples.values()),
        seconds=time.monotonic() - t0,
        subject=adapter.name,
        lossy_by_design=getattr(adapter, "lossy_by_design", False),
    )
    if cfg.checkpoint and Path(cfg.checkpoint).exists() and v.status != INCONCLUSIVE:
        Path(cfg.checkpoint).unlink()
    if v.status == FAIL and cfg.diagnose:
        v.diagnosis = _diagnosis(adapter, cfg, plan, pairs, samples, checks)
    return v


def _diagnosis(
    adapter: Adapter,
    cfg: AuditConfig,
    plan: AuditPlan,
    pairs: dict[int, Any],
    samples: dict[int, UnitSample],
    checks: list[CheckOutcome],
) -> dict[str, Any] | None:
    """The FAIL's diagnosis; a failure of the diagnosis itself is reported, never raised (the
    verdict stands on the statistics alone)."""
    from ..diagnosis import diagnose_audit

    try:
        d = diagnose_audit(adapter, cfg, plan, pairs, samples, checks)
    except Exception as exc:  # noqa: BLE001 - the verdict must not depend on the diagnosis
        return {"version": 1, "verdict": "unavailable", "lead": "", "facts": [], "error": repr(exc)}
    return d.to_dict() if d is not None else None


def _resume(cfg: AuditConfig, fp: str) -> dict[int, UnitSample]:
    if not cfg.resume:
        return {}
    if not cfg.checkpoint:
        raise SpecVerifyError(
            "resume=True needs a checkpoint file; pass --checkpoint FILE (the one the interrupted audit wrote)"
        )
    return load_checkpoint(cfg.checkpoint, fp) if Path(cfg.checkpoint).exists() else {}


def _collect_all(
    adapter: Adapter,
    cfg: AuditConfig,
    plan: AuditPlan,
    pairs: dict[int, Any],
    samples: dict[int, UnitSample],
    fp: str,
    *,
    deadline: float,
) -> tuple[list[CheckOutcome], list[str]]:
    checks: list[CheckOutcome] = []
    evidence: list[str] = []
    pool = WorkerPool(cfg.workers, adapter, pairs)
    prog = _progress(cfg)

    def on_batch(sample: UnitSample, unit: AuditUnit, task: TaskID | None) -> None:
        if prog and task is not None:
            prog.update(task, completed=min(smallest_stratum(sample.gen.position, unit.strata_rule), plan.need(unit)))
        if cfg.checkpoint:
            save_checkpoint(cfg.checkpoint, fp, samples)

    try:
        for unit in plan.units:
            s = samples.setdefault(unit.index, UnitSample())
            task = prog.add_task(unit.label, total=plan.need(unit)) if prog else None
            collect_unit(
                unit,
                pairs[unit.index],
                cfg,
                plan.need(unit),
                s,
                pool,
                deadline=deadline,
                on_batch=lambda smp, u=unit, t=task: on_batch(smp, u, t),
            )
            if cfg.checkpoint:
                save_checkpoint(cfg.checkpoint, fp, samples)
            c = conclude_unit(adapter, unit, pairs[unit.index], s, cfg)
            checks.append(c)
            if c.status == FAIL:
                evidence.append(c.summary)
    finally:
        pool.close()
        if prog:
            prog.stop()
    return checks, evidence


def _exact(adapter: Adapter, cfg: AuditConfig, plan: AuditPlan, pairs: dict[int, Any]) -> list[CheckOutcome]:
    out: list[CheckOutcome] = []
    dev = getattr(getattr(adapter, "sampler", None), "exact_deviation", None)
    if dev is not None and plan.units:
        u0 = plan.units[0]
        mean_tv, max_tv = dev(pairs[u0.index], u0.settings)
        lossy = getattr(adapter, "lossy_by_design", False)
        label = "lossy by design" if lossy else ("exact by construction" if mean_tv < 1e-12 else "inexact")
        out.append(
            CheckOutcome(
                name="deviation of the rule, computed exactly",
                status=PASS if mean_tv < 1e-12 else FAIL,
                kind="exact",
                summary=f"{label}: TV between the first emitted token's law and the target's, computed by enumeration: "
                f"mean {mean_tv:.4g}, max {max_tv:.4g} over contexts",
                lossy_by_design=lossy,
            )
        )
    if cfg.exact_checks:
        for fn in EXACT_CHECKS:
            try:
                c = fn(adapter, cfg, plan=plan, pairs=pairs)
            except ImplementationError as exc:
                c = CheckOutcome(name=fn.__name__.replace("_", " "), status=FAIL, kind="exact", summary=str(exc))
            if c is not None:
                out.append(c)
    return out


def _first_by_holm(checks: list[CheckOutcome], evidence: list[str]) -> list[str]:
    """Evidence ordered so that the headline names the failing check with the smallest adjusted p."""
    stat = sorted(
        [c for c in checks if c.status == FAIL and c.kind == "statistical"],
        key=lambda c: c.pvalue if c.pvalue is not None else 0.0,
    )
    exact = [e for e in evidence if not any(e == c.summary for c in stat)]
    return [c.summary for c in stat] + exact


def _needed(plan: AuditPlan, samples: dict[int, UnitSample], cfg: AuditConfig, elapsed: float) -> dict[str, Any] | None:
    """For units that did not reach eps: rounds that would, and the time at the measured rate."""
    rows: list[dict[str, Any]] = []
    extra_units, spent_units = 0.0, 0
    for u in plan.units:
        s = samples.get(u.index)
        if s is None or s.error or s.unsupported:
            continue
        spent_units += s.units
        have = smallest_stratum(s.gen.position, u.strata_rule)
        if s.complete and not cfg.rounds or s.stopped_early:
            continue
        need = plan.need(u)
        want = math.ceil(s.units * need / have) if have else None
        if want is None or want > s.units or (cfg.rounds and want > cfg.rounds):
            rows.append(
                {
                    "unit": u.label,
                    "collected": s.units,
                    "needed": want,
                    "smallest_stratum_tokens": have,
                    "tokens_per_stratum_needed": need,
                }
            )
            extra_units += (want or 0) - s.units
    if not rows:
        return None
    rate = spent_units / elapsed if elapsed > 0 else 0.0
    est = elapsed + (extra_units / rate if rate else math.inf)
    per = max((r["needed"] or 0) for r in rows)
    # nothing collected in the time measured (a cap reached at once): no rate to estimate the budget from
    budget = f"of at least {math.ceil(est)} s" if math.isfinite(est) else "larger than this run's"
    sentence = (
        f"{len(rows)} unit(s) short of the plan; about {per:,} rounds (or sequences) per unit would reach eps "
        f"{cfg.eps:g}: run with --rounds {per} and a --budget {budget} (estimated from the "
        f"measured {rate:,.0f} per second; --workers N divides it), or accept a larger --eps"
    )
    return {"statement": sentence, "units": rows, "rounds_per_unit": per, "estimated_seconds": round(est, 1)}


def _progress(cfg: AuditConfig) -> Progress | None:
    if not cfg.progress:
        return None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    p = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} tokens"),
        TimeElapsedColumn(),
    )
    p.start()
    return p
