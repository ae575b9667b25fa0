"""The audit run: plan, collect, conclude (one module per stage; this one strings them together).

* :mod:`specverify.audit.pipeline.plan`: units (setting x model pair) and each one's test family and size;
* :mod:`specverify.audit.pipeline.collect`: seeded batches per unit, early stopping, time cap, workers;
* :mod:`specverify.audit.pipeline.checkpoint`: what was collected, keyed on implementation and options;
* :mod:`specverify.audit.pipeline.conclude`: the tests, each unit's outcome, the verdict.

The verdict is a function of the implementation, the seed and the options: sampling stops at the
plan (or at ``rounds``), never at a time; ``budget_s`` is a cap that, when it cuts sampling short,
makes the verdict INCONCLUSIVE with a statement of the rounds and time that would settle it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ImplementationError, SpecVerifyError, UnsupportedSettingError
from ...harness import call_in_fork
from ...stats import FAIL, INCONCLUSIVE, PASS, UNSUPPORTED, CheckOutcome, Verdict
from ..sources.adapters import Adapter
from .checkpoint import fingerprint, load_checkpoint, save_checkpoint
from .collect import UnitSample, WorkerPool, collect_unit, first_batches
from .conclude import FINDING, SKIPPED, conclude_unit, fail_fast_skips, make_verdict
from .config import AuditConfig
from .exact_checks import EXACT_CHECKS, ExactCheck
from .plan import DEFAULT_SETTINGS, PARITY_GRID, AuditPlan, AuditUnit, plan_audit, smallest_stratum

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["AuditConfig", "audit", "DEFAULT_SETTINGS", "PARITY_GRID"]


def audit(adapter: Adapter, config: AuditConfig | None = None, **overrides: Any) -> Verdict:
    """Audit ``adapter``; keyword overrides set fields of :class:`AuditConfig` (an unknown one is an error)."""
    fields = {f.name for f in dataclasses.fields(AuditConfig)}
    if unknown := sorted(set(overrides) - fields):
        raise SpecVerifyError(
            f"audit() got the unknown option(s) {', '.join(unknown)}; the options are AuditConfig's fields: "
            f"{', '.join(sorted(fields))}"
        )
    cfg = dataclasses.replace(config or AuditConfig(), **overrides)
    t0 = time.monotonic()
    plan = plan_audit(adapter, cfg)
    fp = fingerprint(adapter, cfg)
    samples = _resume(cfg, fp)
    pairs = {u.index: u.make_pair(adapter.harness, cfg) for u in plan.units}
    checks, evidence = _collect_all(adapter, cfg, plan, pairs, samples, fp, deadline=t0 + cfg.budget_s)
    stopped = cfg.fail_fast and any(c.status == FAIL for c in checks)
    checks += _fail_fast_skips(plan, checks) if stopped else _exact(adapter, cfg, plan, pairs, samples)
    checks += [
        CheckOutcome(name=f"plan: {sk.what}", status=SKIPPED, kind="exact", summary=str(sk), check_id="plan/skipped")
        for sk in plan.skipped
    ]
    evidence += [f"{c.name}: {c.summary}" for c in checks if c.status == FAIL and c.kind == "exact"]
    needed = None if stopped else _needed(plan, samples, cfg, time.monotonic() - t0)
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
    if v.status == FAIL and cfg.diagnose and any(c.status == FAIL and c.details != FINDING for c in checks):
        v.diagnosis = _diagnosis(adapter, cfg, plan, pairs, samples, checks)
    return v


def unit_id(unit: AuditUnit) -> str:
    """A sampled unit's check id."""
    return f"unit/{unit.index}"


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
    from ...diagnosis import AuditRecord, diagnose_audit

    try:
        d = diagnose_audit(
            AuditRecord(adapter=adapter, cfg=cfg, plan=plan, pairs=pairs, samples=samples, checks=checks)
        )
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
    if not Path(cfg.checkpoint).exists():
        raise SpecVerifyError(
            f"resume=True: no checkpoint at {cfg.checkpoint!r}; pass the file the interrupted audit wrote, or "
            "resume=False to start afresh"
        )
    return load_checkpoint(cfg.checkpoint, fp)


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
    pool = WorkerPool(cfg.workers, adapter, pairs, isolate=cfg.isolate_batches)
    prog = _progress(cfg)
    concluded = _Conclusions(adapter, cfg, pairs)

    def on_batch(sample: UnitSample, *, unit: AuditUnit, task: TaskID | None) -> None:
        if prog and task is not None:
            prog.update(task, completed=min(smallest_stratum(sample.gen.position, unit.strata_rule), plan.need(unit)))
        if cfg.checkpoint:
            save_checkpoint(cfg.checkpoint, fp, samples)

    try:
        for i, unit in enumerate(plan.units):
            s = samples.setdefault(unit.index, UnitSample())
            fresh = [u for u in plan.units[i + 1 : i + 3] if u.index not in samples]
            task = prog.add_task(unit.label, total=plan.need(unit)) if prog else None
            collect_unit(
                unit,
                pairs[unit.index],
                cfg,
                plan.need(unit),
                s,
                pool,
                deadline=deadline,
                on_batch=functools.partial(on_batch, unit=unit, task=task),
                ahead=first_batches(fresh, cfg, pool.workers),
            )
            if cfg.checkpoint:
                save_checkpoint(cfg.checkpoint, fp, samples)
            concluded.add(unit, s)
            if cfg.fail_fast and concluded.failed:
                break
        checks = concluded.wait()
    finally:
        concluded.close()
        pool.close()
        if prog:
            prog.stop()
    return checks, [c.summary for c in checks if c.status == FAIL]


class _Conclusions:
    """Each collected unit's tests, in unit order. With worker processes (and no ``fail_fast``, which
    needs each unit's outcome before the next) a unit is concluded in a thread of the parent while
    the workers collect the next one; the outcomes are the same either way, only sooner."""

    def __init__(self, adapter: Adapter, cfg: AuditConfig, pairs: dict[int, Any]) -> None:
        self.adapter, self.cfg, self.pairs = adapter, cfg, pairs
        overlap = cfg.isolated and not cfg.fail_fast
        self.ex = concurrent.futures.ThreadPoolExecutor(1) if overlap else None
        self.outcomes: list[concurrent.futures.Future[CheckOutcome] | CheckOutcome] = []

    def _conclude(self, unit: AuditUnit, sample: UnitSample) -> CheckOutcome:
        c = conclude_unit(self.adapter, unit, self.pairs[unit.index], sample, self.cfg)
        return dataclasses.replace(c, check_id=unit_id(unit))

    def add(self, unit: AuditUnit, sample: UnitSample) -> None:
        self.outcomes.append(self.ex.submit(self._conclude, unit, sample) if self.ex else self._conclude(unit, sample))

    @property
    def failed(self) -> bool:
        return any(isinstance(c, CheckOutcome) and c.status == FAIL for c in self.outcomes)

    def wait(self) -> list[CheckOutcome]:
        return [c.result() if isinstance(c, concurrent.futures.Future) else c for c in self.outcomes]

    def close(self) -> None:
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)


def _exact(
    adapter: Adapter, cfg: AuditConfig, plan: AuditPlan, pairs: dict[int, Any], samples: dict[int, UnitSample]
) -> list[CheckOutcome]:
    out: list[CheckOutcome] = []
    # the exact checks that run a sampled setting take one the implementation accepted
    supported = tuple(u for u in plan.units if not samples[u.index].unsupported)
    plan = dataclasses.replace(plan, units=supported)
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
                check_id="exact/deviation",
            )
        )
    if cfg.exact_checks:
        out += [c for check in EXACT_CHECKS if (c := _exact_check(check, adapter, cfg, plan, pairs, cfg.isolated))]
    return out


def _exact_check(
    check: ExactCheck, adapter: Adapter, cfg: AuditConfig, plan: AuditPlan, pairs: dict[int, Any], isolated: bool
) -> CheckOutcome | None:
    """One exact check's outcome (None: it does not apply); ``isolated``: in a fresh fork."""
    try:
        if isolated:
            what = f"running the exact check '{check.name}'"
            c = call_in_fork(check.fn, adapter, cfg, plan=plan, pairs=pairs, what=what)
        else:
            c = check.fn(adapter, cfg, plan=plan, pairs=pairs)
    except UnsupportedSettingError as exc:  # a setting declined (greedy is one): never a FAIL
        c = CheckOutcome(name=check.name, status=UNSUPPORTED, kind="exact", summary=str(exc))
    except ImplementationError as exc:
        c = CheckOutcome(name=check.name, status=FAIL, kind="exact", summary=str(exc), details=FINDING)
    return None if c is None else dataclasses.replace(c, check_id=check.check_id)


def _fail_fast_skips(plan: AuditPlan, checks: list[CheckOutcome]) -> list[CheckOutcome]:
    """What ``fail_fast`` left out: the units not sampled and the exact checks."""
    done = {c.check_id for c in checks}
    left = [(u.label, unit_id(u)) for u in plan.units if unit_id(u) not in done]
    return fail_fast_skips(checks, left, "the exact checks")


def _first_by_holm(checks: list[CheckOutcome], evidence: list[str]) -> list[str]:
    """Evidence ordered so that the headline names the failing check with the smallest adjusted p."""
    stat = sorted(
        [c for c in checks if c.status == FAIL and c.kind == "statistical"],
        key=lambda c: c.pvalue if c.pvalue is not None else 0.0,
    )
    exact = [e for e in evidence if not any(e == c.summary for c in stat)]
    return [c.summary for c in stat] + exact


def _needed(plan: AuditPlan, samples: dict[int, UnitSample], cfg: AuditConfig, elapsed: float) -> dict[str, Any] | None:
    """For units that did not reach eps: the rounds that would, and the time at the measured rate. A
    unit the cap left unsampled is estimated from the others' tokens per round (never 0 rounds)."""
    short = [u for u in plan.units if _short_of_plan(u, samples.get(u.index), cfg, plan.need(u))]
    if not short:
        return None
    ok = [samples[u.index] for u in plan.units if samples.get(u.index) and not samples[u.index].unsupported]
    ratios = [s.units / t for s in ok if (t := smallest_stratum(s.gen.position, plan.units[0].strata_rule)) > 0]
    units_per_token = max(ratios) if ratios else None
    rows: list[dict[str, Any]] = []
    for u in short:
        s = samples.get(u.index) or UnitSample()
        have, need = smallest_stratum(s.gen.position, u.strata_rule), plan.need(u)
        want = math.ceil(s.units * need / have) if have else None
        if not have and units_per_token:  # not sampled: as many rounds per token as the thinnest sampled unit
            want = math.ceil(need * units_per_token)
        if want is not None:
            want = max(want, s.units + 1, u.rounds_cap(cfg.rounds) or 0)
        rows.append(
            {
                "unit": u.label,
                "collected": s.units,
                "needed": want,
                "smallest_stratum_tokens": have,
                "tokens_per_stratum_needed": need,
            }
        )
    spent = sum(s.units for s in ok)
    rate = spent / elapsed if elapsed > 0 else 0.0
    extra = sum((r["needed"] or 0) - r["collected"] for r in rows)
    est = elapsed + (extra / rate if rate else math.inf)
    # the advice is in --rounds, which a long unit counts in sequences of LONG_UNIT_BASE tokens
    wants = [u.as_rounds(r["needed"]) for u, r in zip(short, rows) if r["needed"] is not None]
    per = max(wants) if len(wants) == len(rows) else None
    out: dict[str, Any] = {"units": rows, "rounds_per_unit": per, "estimated_seconds": round(est, 1) if per else None}
    out["statement"] = _needed_sentence(len(rows), per, est, rate, cfg, "cli")
    out["statement_python"] = _needed_sentence(len(rows), per, est, rate, cfg, "python")
    return out


def _short_of_plan(u: AuditUnit, s: UnitSample | None, cfg: AuditConfig, need: int) -> bool:
    """Whether unit ``u`` ended without its planned tokens (cut by the cap, or --rounds too few)."""
    if s is not None and (s.error or s.unsupported or s.stopped_early):
        return False
    if s is None or not s.units:
        return True
    if not s.complete:
        return True  # the time cap cut it
    return smallest_stratum(s.gen.position, u.strata_rule) < need and bool(cfg.rounds)


#: how the advice of an INCONCLUSIVE names each option, for a CLI user and for a Python caller
_TERMS = {
    "cli": {"rounds": "--rounds {}", "budget": "a --budget {}", "workers": "--workers N", "eps": "a larger --eps"},
    "python": {"rounds": "rounds={}", "budget": "budget_s {}", "workers": "workers=N", "eps": "a larger eps="},
}


def _needed_sentence(n_units: int, per: int | None, est: float, rate: float, cfg: AuditConfig, terms: str) -> str:
    """What would settle an INCONCLUSIVE, in the caller's terms (CLI options or keyword arguments)."""
    t = _TERMS[terms]
    if per is None:
        return (
            f"{n_units} unit(s) were not sampled before the time cap and no unit was measured to estimate their "
            f"rounds from: run with {t['budget'].format(f'above {cfg.budget_s:g} s')}"
        )
    budget = f"of at least {math.ceil(est)} s" if math.isfinite(est) else "larger than this run's"
    if terms == "python":
        budget = f">= {math.ceil(est)}" if math.isfinite(est) else f"> {cfg.budget_s:g}"
    return (
        f"{n_units} unit(s) short of the plan; about {per:,} rounds (or sequences) per unit would reach eps "
        f"{cfg.eps:g}: run with {t['rounds'].format(per)} and {t['budget'].format(budget)} (estimated from the "
        f"measured {rate:,.0f} per second; {t['workers']} divides it), or accept {t['eps']}"
    )


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
