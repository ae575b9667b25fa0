"""Conclude: test what a unit collected, and turn the units and exact checks into a verdict.

Per unit, the stratified default stream test (Holm across strata, the white-box strata of a
declared full rule in the same family) and the e-process decide: FAIL with the first failing
stratum by Holm order; PASS only when the unit's plan was met (or its ``rounds`` collected) and
its eps is at most the requested one; otherwise INCONCLUSIVE, saying which eps was reached. The
verdict is FAIL if any check fails, INCONCLUSIVE if any is inconclusive, else PASS.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...stats import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SERIAL_STRATUM,
    SKIPPED,
    UNSUPPORTED,
    Cell,
    CheckOutcome,
    StreamLaw,
    Verdict,
    holm,
    pit_values,
    stratified_stream_test,
    whitebox_context_tests,
    whitebox_round_tests,
)
from ...theory import accepted_length_law_position_dependent, expected_tokens_position_dependent
from .block_strata import block_whitebox
from .collect import UnitSample
from .plan import strata_of
from .request_strata import RequestTest, request_tests, serial_tests

if TYPE_CHECKING:
    from ...dists import SamplingSettings
    from ...harness import Generation
    from ...stats import GofResult, StratumResult, StreamTestResult
    from ..sources.adapters import Adapter
    from .config import AuditConfig
    from .plan import AuditUnit

#: details of a check whose FAIL is the implementation's own doing (it raised, hung or returned malformed
#: output): explicit already, so the diagnosis does not rank root causes for it
FINDING = {"finding": "implementation"}

__all__ = [
    "FINDING",
    "StratumFailure",
    "failure_of",
    "failed_outcome",
    "conclude_unit",
    "decide",
    "failure_message",
    "make_verdict",
    "UNSUPPORTED",
    "SKIPPED",
    "fail_fast_skips",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StratumFailure:
    """A failing stream stratum as data: where, what was seen (text), on which cells."""

    stratum: str
    text: str  # what was seen, without the "label, stratum: " that a summary puts before it
    cells: tuple[Cell, ...] = ()
    whitebox: str | None = None  # a white-box stratum's own name (``stratum`` is its display name)


def fail_fast_skips(checks: list[CheckOutcome], units: list[tuple[str, str]], exact: str) -> list[CheckOutcome]:
    """SKIPPED rows for what ``fail_fast`` left out after the first FAIL in ``checks``: the statistical
    ``units`` not sampled, (name, check id) each, then one row for the ``exact`` checks not run."""
    first = next(c for c in checks if c.status == FAIL)
    why = f"not run: --fail-fast stopped at the first FAIL ({first.name})"
    rows = [CheckOutcome(name=n, status=SKIPPED, kind="statistical", summary=why, check_id=i) for n, i in units]
    return [*rows, CheckOutcome(name=exact, status=SKIPPED, kind="exact", summary=why, check_id="exact/fail-fast")]


def failure_of(stratum: str, test: GofResult, adjusted: float) -> StratumFailure:
    """A failing stream stratum: which test, how far, on which cells. An exact failure (tokens the
    target gives probability 0) says so first: no p-value is needed for it."""
    merged: dict[str, tuple[float, float]] = {}  # a cell named twice (one token seen in several places) is counted once
    for c in test.worst_cells:
        o, e = merged.get(c.label, (0.0, 0.0))
        merged[c.label] = (o + c.observed, e + c.expected)
    top = tuple(Cell(label=k, observed=o, expected=e) for k, (o, e) in list(merged.items())[:3])
    cells = "; ".join(f"{c.label}: observed {c.observed:.0f}, expected {c.expected:.1f}" for c in top)
    if test.is_exact_failure:
        text = f"{test.note} ({cells})"
    elif not test.cells:  # a test without cells (the log-likelihood score) says how far in its note
        text = f"{test.test} p={test.pvalue:.3g} (Holm-adjusted {adjusted:.3g}); {test.note}"
    else:
        text = (
            f"{test.test} p={test.pvalue:.3g} (Holm-adjusted {adjusted:.3g}); TV on its cells {test.tv_text()}; {cells}"
        )
    return StratumFailure(stratum=stratum, text=text, cells=top)


def failure_message(label: str, stratum: str, test: GofResult, adjusted: float) -> str:
    """One line for a failing stream stratum (:func:`failure_of` as text)."""
    f = failure_of(stratum, test, adjusted)
    return f"{label}, {f.stratum}: {f.text}"


def failed_outcome(label: str, f: StratumFailure, suffix: str = "", **fields: Any) -> CheckOutcome:
    """The FAIL of a check whose first failing stratum is ``f``: the facts as fields, the text made from them."""
    return CheckOutcome(
        name=label,
        status=FAIL,
        summary=f"{label}, {f.stratum}: {f.text}{suffix}",
        stratum=f.stratum,
        finding=f.text + suffix,
        cells=[dataclasses.asdict(c) for c in f.cells],
        whitebox=f.whitebox,
        **fields,
    )


def _law(unit: AuditUnit, pair: Any, gen: Generation) -> tuple[StreamLaw, np.ndarray]:
    """(StreamLaw, rows): the table of the pair, or the per-token laws of history-dependent settings."""
    if gen.law is not None:
        return StreamLaw(gen.law), gen.row
    return StreamLaw(pair.target_table(unit.settings)), gen.row


def _whitebox(adapter: Adapter, unit: AuditUnit, pair: Any, gen: Generation, cfg: AuditConfig) -> list[StratumResult]:
    """The white-box strata of a declared full (or block) rule (none for laws that depend on the history)."""
    if unit.family.whitebox == 0 or gen.law is not None:
        return []
    s = unit.settings
    rng = np.random.default_rng([cfg.seed, unit.index, 3])
    if getattr(adapter, "rule", None) == "block":  # block verification's own strata
        return block_whitebox(unit, pair, gen, cfg, rng)
    if gen.draft_rows is not None and gen.drafts is not None:  # context runs record both
        return whitebox_context_tests(
            gen.tokens,
            gen.row,
            gen.position,
            gen.rounds_of_tokens,
            gen.num_accepted,
            pair.target_table(s),
            pair.draft_table(s),
            drafts=gen.drafts,
            draft_rows=gen.draft_rows,
            rng=rng,
        )
    return whitebox_round_tests(
        gen.tokens,
        gen.position,
        gen.sequence,
        gen.num_accepted,
        pair.target_table(s)[: cfg.gamma + 1],
        pair.draft_table(s)[: cfg.gamma],
        drafts=gen.drafts,
        drafts_from_implementation=gen.drafts_from_implementation,
        rng=rng,
    )


# long: one unit's outcome in order: the early outcomes, the tests, then FAIL, PASS or INCONCLUSIVE
def conclude_unit(adapter: Adapter, unit: AuditUnit, pair: Any, sample: UnitSample, cfg: AuditConfig) -> CheckOutcome:
    """The unit's CheckOutcome (module docstring)."""
    label = unit.label  # short, for tables; the pair's description ends each summary
    about = f" [pair: {pair.label()}]" if hasattr(pair, "label") else ""
    if sample.unsupported:
        return CheckOutcome(
            name=f"{unit.label}: implementation", status=UNSUPPORTED, kind="exact", summary=sample.unsupported
        )
    if sample.error:
        return CheckOutcome(
            name=f"{unit.label}: implementation", status=FAIL, kind="exact", summary=sample.error, details=FINDING
        )
    gen, fam = sample.gen, unit.family
    if not len(gen.tokens):
        return CheckOutcome(
            name=label,
            status=INCONCLUSIVE,
            kind="statistical",
            summary="not sampled: the time cap (--budget) was reached before this unit started",
            pvalue=None,
            eps=math.inf,
            n=0,
            details={"pair": unit.pair_kind},
        )
    law, rows = _law(unit, pair, gen)
    wb = _whitebox(adapter, unit, pair, gen, cfg)
    extras = request_tests(unit, law, rows, gen, cfg) + serial_tests(unit, law, rows, gen, cfg)
    results, adj = stratified_stream_test(
        law,
        gen.tokens,
        rows,
        strata_of(gen.position, unit.strata_rule),
        rng=np.random.default_rng([cfg.seed, unit.index, 1]),
        alpha=fam.alpha_fixed,
        beta=fam.beta,
        extra_family=len(wb) + len(extras),
    )
    adj, failing = _failing_strata(results, adj, wb, extras, fam.alpha_fixed)
    eps_here = max(r.min_detectable_tv for r in results)
    detail = _detail(unit, pair, gen, sample, law, rows, results, adj, wb, cfg)
    detail.update({k: v for x in extras for k, v in x.facts.items()})
    ep_fail = sample.eprocess.rejects(fam.alpha_sequential) if fam.sequential else False
    if failing:
        p, f = failing[0]
        return failed_outcome(
            label, f, about, kind="statistical", pvalue=p, eps=eps_here, n=len(gen.tokens), details=detail
        )
    if ep_fail:
        e = math.exp(min(sample.eprocess.max_log_e, 700))
        finding = (
            "stopped early on decisive evidence: a sequential test of each context's tokens against "
            f"that context's own law (an e-process on sorted-mass bins) reached a likelihood ratio of {e:.3g} to 1 "
            f"against the target's law after {sample.eprocess.t:,} tokens (the bar, 1/alpha: "
            f"{1 / fam.alpha_sequential:.3g}); pooled over contexts the bins furthest from expected: "
            f"{_moved_most(detail)}{about}"
        )
        return CheckOutcome(
            name=label,
            status=FAIL,
            kind="statistical",
            summary=f"{label}: {finding}",
            finding=finding,
            pvalue=None,
            eps=eps_here,
            n=len(gen.tokens),
            details=detail,
        )
    worst = int(np.argmin(adj))
    if sample.complete and eps_here <= cfg.eps * (1 + 1e-9):
        return CheckOutcome(
            name=label,
            status=PASS,
            kind="statistical",
            summary=f"no deviation of TV >= {eps_here:.4f} in any of {len(results)} strata "
            f"(sorted-mass projection; pooled {results[0].min_detectable_tv:.4f}){about}",
            pvalue=float(adj[worst]),
            eps=eps_here,
            n=len(gen.tokens),
            details=detail,
        )
    why = "the time cap stopped sampling" if not sample.complete else "the rounds given by --rounds were not enough"
    return CheckOutcome(
        name=label,
        status=INCONCLUSIVE,
        kind="statistical",
        summary=f"not reached: eps {eps_here:.4f} > {cfg.eps:g} ({why}); no "
        f"deviation found in {len(gen.tokens):,} tokens{about}",
        pvalue=float(adj[worst]),
        eps=eps_here,
        n=len(gen.tokens),
        details=detail,
    )


def _failing_strata(
    results: list[StreamTestResult],
    adj: np.ndarray,
    wb: list[StratumResult],
    extras: list[RequestTest],
    alpha: float,
) -> tuple[np.ndarray, list[tuple[float, StratumFailure]]]:
    """Holm across the stream strata, the white-box strata and the FAIL-only tests: the strata's
    adjusted p-values (the white-box ones are set on them) and every failing stratum as (adjusted p,
    its failure), the smallest p leading. On a tie the narrower request-level stratum (an offset
    bucket) leads, as it says more about where, and the consecutive pairs come last: a token law
    that is wrong is the plainer finding (both are often p = 0)."""
    extra_failing: list[tuple[float, StratumFailure]] = []
    if wb or extras:
        adj_all = holm([r.pvalue for r in results] + [w.result.pvalue for w in wb] + [x.pvalue for x in extras])
        adj = adj_all[: len(results)]
        for w, a in zip(wb, adj_all[len(results) : len(results) + len(wb)]):
            w.adjusted_pvalue = float(a)
        after = adj_all[len(results) + len(wb) :]
        extra_failing = [(float(a), _request_failure(x, float(a))) for x, a in zip(extras, after) if a <= alpha]
    failing = sorted(
        extra_failing
        + [(float(a), failure_of(r.stratum, r.worst, float(a))) for r, a in zip(results, adj) if a <= alpha]
        + [
            (
                w.adjusted_pvalue,
                StratumFailure(stratum=f"white-box {w.stratum}", text=_whitebox_text(w), whitebox=w.stratum),
            )
            for w in wb
            if w.adjusted_pvalue <= alpha
        ],
        key=lambda x: (x[0], x[1].stratum == SERIAL_STRATUM),
    )
    return adj, failing


def _request_failure(x: RequestTest, adjusted: float) -> StratumFailure:
    """A failing offset bucket reads as any failing stream stratum; the stop count says what it counted."""
    if x.stream is not None:
        return failure_of(x.stratum, x.stream.worst, adjusted)
    if x.gof is not None:
        return failure_of(x.stratum, x.gof, adjusted)
    return StratumFailure(stratum=x.stratum, text=f"{x.text} (Holm-adjusted {adjusted:.3g})")


def _whitebox_text(w: StratumResult) -> str:
    return f"{w.result} (Holm-adjusted {w.adjusted_pvalue:.3g})"


def _moved_most(detail: dict[str, Any], k: int = 3) -> str:
    """The ``k`` bins of the worst stratum furthest from expected (standardised residual), as text."""
    b = detail["worst_stratum_bins"]
    o, e = np.asarray(b["observed"], float), np.asarray(b["expected"], float)
    z = (o - e) / np.sqrt(np.maximum(e, 1e-12))
    top = np.argsort(-np.abs(z), kind="stable")[:k]
    return "; ".join(f"{b['labels'][i]}: observed {o[i]:.0f}, expected {e[i]:.1f}" for i in top)


def _detail(
    unit: AuditUnit,
    pair: Any,
    gen: Generation,
    sample: UnitSample,
    law: StreamLaw,
    rows: np.ndarray,
    results: list[StreamTestResult],
    adj: np.ndarray,
    wb: list[StratumResult],
    cfg: AuditConfig,
) -> dict[str, Any]:
    worst = int(np.argmin(adj))
    u = pit_values(law, gen.tokens, rows, np.random.default_rng([cfg.seed, unit.index, 2]))
    sm = results[worst].components[0]
    return {
        "setting": f"settings[{unit.setting_index}] {unit.settings.short()}",
        "pair_kind": unit.pair_kind,
        "pair": pair.label() if hasattr(pair, "label") else unit.pair_kind,
        "rounds_or_sequences": sample.units,
        "pit_hist": np.bincount(np.minimum((u * 20).astype(int), 19), minlength=20).tolist(),
        "worst_stratum": results[worst].stratum,
        "worst_stratum_bins": {
            "observed": sm.observed,
            "expected": sm.expected,
            "labels": sm.labels,
            "members": sm.members,
        },
        "strata": [
            {
                "stratum": r.stratum,
                "n": r.n,
                "pvalue_holm": float(a),
                "min_detectable_tv": r.min_detectable_tv,
                "components": [c.record() for c in r.components],
            }
            for r, a in zip(results, adj)
        ],
        "tokens_per_position": np.bincount(gen.position).tolist() if len(gen.position) else [],
        "eprocess_max_log_e": sample.eprocess.max_log_e,
        "stopped_early": sample.stopped_early,
        "whitebox": [
            {"stratum": w.stratum, "family": w.family, "pvalue_holm": w.adjusted_pvalue, "result": w.result.record()}
            for w in wb
        ],
        "acceptance": _acceptance(pair, unit.settings, gen, cfg.gamma),
    }


def _acceptance(pair: Any, s: SamplingSettings, gen: Generation, gamma: int) -> dict[str, Any]:
    """Measured accepted drafts per round against the full rule's product-form prediction."""
    acc = gen.num_accepted
    out = {
        "rounds": int(len(acc)),
        "mean_accepted": float(acc.mean()) if len(acc) else None,
        "accepted_hist": np.bincount(acc, minlength=gamma + 1).tolist() if len(acc) else [],
    }
    if hasattr(pair, "gamma") and len(acc):
        p, q = pair.target_table(s), pair.draft_table(s)
        a = [float(np.minimum(p[j], q[j]).sum()) for j in range(gamma)]
        out["predicted_mean_accepted_full_rule"] = float(expected_tokens_position_dependent(a) - 1)
        out["predicted_accepted_law_full_rule"] = [float(x) for x in accepted_length_law_position_dependent(a)]
        out["per_position_alpha"] = a
    return out


def decide(checks: list[CheckOutcome]) -> str:
    """FAIL if any check fails; UNSUPPORTED if the implementation declined everything that would have
    been tested; INCONCLUSIVE if any check is inconclusive (or nothing was tested); else PASS."""
    statuses = {c.status for c in checks}
    if FAIL in statuses:
        return FAIL
    if UNSUPPORTED in statuses and all(c.status in (SKIPPED, UNSUPPORTED) for c in checks):
        return UNSUPPORTED
    if INCONCLUSIVE in statuses or not any(c.status == PASS for c in checks):
        return INCONCLUSIVE
    return PASS


def make_verdict(
    checks: list[CheckOutcome],
    evidence: list[str],
    *,
    alpha: float,
    beta: float,
    eps: float,
    seed: int,
    needed: dict[str, Any] | None,
    samples: int,
    seconds: float,
    subject: str,
    lossy_by_design: bool = False,
) -> Verdict:
    """The verdict of table, LM and endpoint audits alike: :func:`decide`, and the eps that covers
    every statistical check (the largest of theirs; 0 when only exact checks ran)."""
    status = decide(checks)
    reached = [c.eps for c in checks if c.kind == "statistical" and c.eps is not None]
    eps_reached = max(reached) if reached else (0.0 if status == PASS else math.inf)
    return Verdict(
        status=status,
        alpha=alpha,
        beta=beta,
        eps=eps_reached,
        eps_requested=eps,
        seed=seed,
        checks=checks,
        evidence=evidence,
        needed=needed if status == INCONCLUSIVE else None,
        samples=samples,
        seconds=seconds,
        subject=subject,
        lossy_by_design=lossy_by_design,
    )
