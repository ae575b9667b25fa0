"""The verdict contract (DESIGN.md): PASS with its eps, FAIL with its evidence, or INCONCLUSIVE.

* FAIL: a deviation was detected with family-wise false-fail rate at most ``alpha``; ``evidence``
  says where (check, stratum, cells observed vs expected), how large (TV estimate with interval),
  and ``seed`` reproduces it.
* PASS: no deviation of total variation >= ``eps`` (on the stated projection) was found, where eps
  is what this many samples detect with false-pass rate at most ``beta``. Never without its eps.
* INCONCLUSIVE: the budget could not reach the requested eps; ``needed`` says what would.
* EXACT checks (enumeration, greedy equality, injected uniforms) are stated as exact, no rates.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from ._results import to_jsonable

__all__ = ["Verdict", "CheckOutcome", "PASS", "FAIL", "INCONCLUSIVE", "SCHEMA_VERSION"]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
SCHEMA_VERSION = "specverify.verdict/1"


@dataclasses.dataclass
class CheckOutcome:
    """One check of an audit (a statistical test family, or an exact check)."""

    name: str
    status: str
    kind: str  # 'statistical' or 'exact'
    summary: str
    pvalue: float | None = None  # family-wise adjusted, statistical checks only
    eps: float | None = None
    n: int | None = None
    details: Any = None
    lossy_by_design: bool = False


@dataclasses.dataclass
class Verdict:
    status: str
    alpha: float
    beta: float
    eps: float | None
    eps_requested: float | None
    seed: int
    checks: list[CheckOutcome]
    evidence: list[str] = dataclasses.field(default_factory=list)
    needed: dict | None = None
    samples: int = 0
    seconds: float = 0.0
    subject: str = ""
    lossy_by_design: bool = False

    def __post_init__(self):
        if self.status == PASS and (self.eps is None or not math.isfinite(self.eps)):
            raise ValueError("a PASS verdict must state the eps it could have detected")

    def headline(self) -> str:
        if self.status == PASS:
            return (f"PASS: no deviation of TV >= {self.eps:.4g} (false-pass <= {self.beta:g}); "
                    f"false-fail <= {self.alpha:g}; {self.samples:,} samples; seed {self.seed}")
        if self.status == FAIL:
            first = self.evidence[0] if self.evidence else ""
            tag = " [lossy by design]" if self.lossy_by_design else ""
            return f"FAIL{tag} (false-fail <= {self.alpha:g}, seed {self.seed}): {first}"
        return f"INCONCLUSIVE: budget reached eps {self.eps:.4g} > requested {self.eps_requested:g}; needed: {self.needed}"

    def to_dict(self) -> dict:
        d = to_jsonable(self)
        d["schema"] = SCHEMA_VERSION
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)
