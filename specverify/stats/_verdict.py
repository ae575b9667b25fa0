"""The verdict contract (docs/verdict.md): PASS with its eps, FAIL with its evidence, or INCONCLUSIVE.

* FAIL: a deviation was detected with family-wise false-fail rate at most ``alpha``; ``evidence``
  says where (check, stratum, cells observed vs expected), how large (TV estimate with interval),
  and ``seed`` reproduces it.
* PASS: no deviation of total variation >= ``eps`` (on the stated projection) was found, where eps
  is what this many samples detect with false-pass rate at most ``beta``. Never without its eps.
* INCONCLUSIVE: the budget could not reach the requested eps; ``needed`` says what would.
* UNSUPPORTED: the implementation declined (NotImplementedError) every setting the audit would have
  tested; nothing was tested. Declined settings in a PASS or INCONCLUSIVE are listed as such.
* EXACT checks (enumeration, greedy equality, injected uniforms) are stated as exact, no rates.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

from ._results import to_jsonable

__all__ = [
    "Verdict",
    "CheckOutcome",
    "Status",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "SKIPPED",
    "UNSUPPORTED",
    "SCHEMA_VERSION",
]


class Status(str, enum.Enum):
    """The status of a verdict or of one check. A ``str``: it compares equal to its name
    (``Status.PASS == "PASS"``), formats and prints as the bare name, and serialises to it in JSON."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    SKIPPED = "SKIPPED"  # a setting the plan leaves out, with the reason (checks only)
    UNSUPPORTED = "UNSUPPORTED"  # the implementation declined a setting: reported, never a FAIL (checks only)

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


PASS, FAIL, INCONCLUSIVE = Status.PASS, Status.FAIL, Status.INCONCLUSIVE
SKIPPED, UNSUPPORTED = Status.SKIPPED, Status.UNSUPPORTED
SCHEMA_VERSION = "specverify.verdict/2"  # /2: the `diagnosis` field of a FAIL


@dataclasses.dataclass(kw_only=True, frozen=True)
class CheckOutcome:
    """One check of an audit (a statistical test family, or an exact check)."""

    name: str
    status: str
    kind: str  # 'statistical' or 'exact'
    summary: str
    pvalue: float | None = None  # family-wise adjusted, statistical checks only
    eps: float | None = None
    n: int | None = None
    details: dict[str, Any] | None = None  # the check's facts as data (JSON-able)
    lossy_by_design: bool = False
    #: which check this is, as data: 'unit/<index>' (a sampled unit), 'exact/<check>' ('greedy',
    #: 'boundary', 'differential', 'reproducibility', 'deviation'), 'plan/skipped', 'lm/...', 'endpoint/...'
    check_id: str = ""
    #: a FAIL's first failing stratum ('position 2', 'white-box ...'), None for checks without strata
    stratum: str | None = None
    #: a FAIL's finding: what was seen, without the "name, stratum: " the summary puts before it
    finding: str | None = None
    #: the failing stratum's cells furthest from expected: [{label, observed, expected}]
    cells: list[dict[str, Any]] | None = None
    #: when the first failing stratum is a white-box one (a declared full rule's): its own name
    whitebox: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # frozen: the one normalisation


@dataclasses.dataclass(kw_only=True)
class Verdict:
    status: str
    alpha: float
    beta: float
    eps: float | None
    eps_requested: float | None
    seed: int
    checks: list[CheckOutcome]
    evidence: list[str] = dataclasses.field(default_factory=list)
    needed: dict[str, Any] | None = None
    samples: int = 0
    seconds: float = 0.0
    subject: str = ""
    lossy_by_design: bool = False
    #: a FAIL's diagnosis (specverify.diagnosis.Diagnosis.to_dict(): versioned; None otherwise)
    diagnosis: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.status == PASS and (self.eps is None or not math.isfinite(self.eps)):
            raise ValueError("a PASS verdict must state the eps it could have detected")

    def first_failure(self) -> tuple[CheckOutcome, str | None, str] | None:
        """(check, stratum or None, what was seen) of the failed check that comes first by Holm order:
        the smallest family-wise adjusted p-value, exact failures (no p-value: certain) before all."""
        failed = sorted(
            (c for c in self.checks if c.status == FAIL), key=lambda c: c.pvalue if c.pvalue is not None else -1.0
        )
        for c in failed:  # the facts are fields of the outcome: nothing is parsed back out of its text
            return c, c.stratum, c.finding if c.finding is not None else c.summary
        return None

    def diagnosis_lead(self) -> list[str]:
        """The lines that lead a diagnosed FAIL (before the statistics headline): the most likely
        class and what to check, then the structural facts; [] without a diagnosis."""
        d = self.diagnosis or {}
        if not d.get("lead"):
            return []
        return [d["lead"]] + [f"  - {f}" for f in d.get("facts", [])]

    def _unsupported_note(self) -> str:
        """'; N check(s) UNSUPPORTED (...)': what a PASS or INCONCLUSIVE did not cover, in its own words."""
        rows = [c for c in self.checks if c.status == UNSUPPORTED]
        if not rows:
            return ""
        out = ""
        for who in ("implementation", "reference"):  # who refused: the audited code, or a reported law's source
            mine = [c for c in rows if c.name.endswith(": reference") == (who == "reference")]
            if mine:
                names = ", ".join(c.name.removesuffix(f": {who}") for c in mine[:4]) + (
                    ", ..." if len(mine) > 4 else ""
                )
                out += f"; {len(mine)} UNSUPPORTED by the {who}, not covered: {names}"
        return out

    def headline(self, terms: str = "cli") -> str:
        """One line, the same in the terminal, the JSON (``headline``) and the HTML report. ``terms``:
        'cli' (advice names options such as --rounds) or 'python' (keyword arguments such as rounds=)."""
        if self.status == PASS:
            if self.checks and all(c.kind == "exact" for c in self.checks if c.status not in (SKIPPED, UNSUPPORTED)):
                names = ", ".join(c.name for c in self.checks if c.status == PASS)
                return (
                    f"PASS (exact checks only, no sampling error): {names}; seed {self.seed}{self._unsupported_note()}"
                )
            return (
                f"PASS: no deviation of TV >= {self.eps:.4g} (false-pass <= {self.beta:g}); "
                f"false-fail <= {self.alpha:g}; {self.samples:,} samples; seed {self.seed}{self._unsupported_note()}"
            )
        if self.status == UNSUPPORTED:
            rows = [c for c in self.checks if c.status == UNSUPPORTED]
            return (
                f"UNSUPPORTED: the implementation declined every setting audited ({len(rows)}), so nothing was "
                f"tested; first: {rows[0].summary}; audit settings it supports"
                + (" (--temperature, --top-k, --top-p, --min-p)" if terms == "cli" else " (settings=...)")
            )
        if self.status == FAIL:
            tag = " [lossy by design]" if self.lossy_by_design else ""
            first = self.first_failure()
            if first is None:
                return (
                    f"FAIL{tag}: {self.evidence[0] if self.evidence else ''} (false-fail "
                    f"<= {self.alpha:g}; seed {self.seed})"
                )
            c, stratum, body = first
            what = (
                "exact check"
                if c.kind == "exact"
                else ("white-box test" if c.whitebox is not None else "distribution test")
            )
            where = f"{what} '{c.name}'" + (f", stratum '{stratum}'" if stratum else "")
            more = sum(x.status == FAIL for x in self.checks) - 1
            tail = f"; {more} more check{'s' if more > 1 else ''} failed" if more else ""
            return f"FAIL{tag} in {where}: {body} (false-fail <= {self.alpha:g}; seed {self.seed}{tail})"
        return self._inconclusive(terms)

    def _inconclusive(self, terms: str) -> str:
        """The headline of an INCONCLUSIVE: what did not settle, and what would, in the caller's terms."""
        nd = self.needed or {}
        if terms == "python" and isinstance(nd.get("statement_python"), str):
            needed = nd["statement_python"]
        elif isinstance(nd.get("statement"), str):
            needed = nd["statement"]
        else:
            needed = ", ".join(
                f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) else f"{k.replace('_', ' ')} {v}"
                for k, v in nd.items()
                if isinstance(v, (int, float, str))
            )
        unsettled = [c for c in self.checks if c.status == INCONCLUSIVE]
        if unsettled and all(c.kind == "exact" for c in unsettled):  # the statistics reached eps: say what did not
            c = unsettled[0]
            return (
                f"INCONCLUSIVE: no deviation found, but the exact check '{c.name}' is not settled: {c.summary}"
                + self._unsupported_note()
            )
        # eps reached, but a unit stopped short of its plan (the cap or the budget): say that, not "above"
        if self.eps is not None and self.eps_requested is not None and self.eps <= self.eps_requested:
            reach = f"a unit stopped short of its planned samples (requested TV {self.eps_requested:g})"
        elif self.eps is not None and self.eps < 1:
            reach = f"the samples collected detect TV >= {self.eps:.4g}, above the requested {self.eps_requested:g}"
        else:
            reach = f"too few samples to detect any deviation (requested TV {self.eps_requested:g})"
        return f"INCONCLUSIVE: {reach}" + (f"; needed: {needed}" if needed else "") + self._unsupported_note()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = to_jsonable(self)
        d["headline"] = self.headline()
        d["schema"] = SCHEMA_VERSION
        return d

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)
