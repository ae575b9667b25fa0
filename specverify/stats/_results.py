"""Result objects (scipy.stats style: named fields, printable, JSON-serialisable)."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

__all__ = ["GofResult", "Cell", "to_jsonable", "EXACT_FAILURE", "TV_INTERVAL_DELTA"]


def to_jsonable(x: Any) -> Any:
    if isinstance(x, enum.Enum):  # statuses: their string value
        return to_jsonable(x.value)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(x).items()}
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return to_jsonable(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


@dataclasses.dataclass
class Cell:
    """One (pooled) cell of a goodness-of-fit table."""

    label: str
    observed: float
    expected: float

    @property
    def residual(self) -> float:
        return (self.observed - self.expected) / math.sqrt(self.expected) if self.expected > 0 else math.inf


EXACT_FAILURE = "exact failure: "  # how an exact failure's note begins (conclude.py reads it)
#: the error rate of :func:`tv_interval` (a p-value below it rejects TV = 0 more strictly than the interval)
TV_INTERVAL_DELTA = 1e-3


@dataclasses.dataclass(kw_only=True)
class GofResult:
    """Outcome of one goodness-of-fit test.

    ``tv_estimate`` is the total variation between the observed and expected cell frequencies
    (on the test's cells), with a (1 - delta) confidence interval ``tv_interval``;
    ``min_detectable_tv`` is the smallest TV on these cells this n detects with probability
    1 - beta at the test's alpha (set by the caller: ``default_stream_test`` fills it in).

    Built with keywords; the two recurring degenerate cases have their own constructors:
    :meth:`exact_failure` (a certain deviation, p-value 0) and :meth:`empty` (nothing to test, p-value 1).
    """

    test: str
    statistic: float
    pvalue: float
    df: int
    n: int
    cells: int
    tv_estimate: float
    tv_interval: tuple[float, float]
    worst_cells: list[Cell]
    pooled_groups: int = 0
    note: str = ""
    min_detectable_tv: float | None = None
    power_alpha: float | None = None
    power_beta: float | None = None
    observed: list[float] | None = None  # all cells, for plots
    expected: list[float] | None = None
    labels: list[str] | None = None
    members: list[list[int]] | None = None  # the projection's cells (0-based) each tested cell pools
    exact: bool = False  # a certain deviation (no p-value needed): set by :meth:`exact_failure`

    @classmethod
    def exact_failure(
        cls,
        test: str,
        *,
        n: int,
        why: str,
        tv_estimate: float = 1.0,
        tv_interval: tuple[float, float] = (0.0, 1.0),
        worst_cells: list[Cell] | None = None,
        cells: int = 0,
    ) -> GofResult:
        """A deviation no correct sampler can show (e.g. a token of probability 0 was emitted): statistic
        inf, p-value 0, note ``"exact failure: <why>"``."""
        return cls(
            test=test,
            statistic=math.inf,
            pvalue=0.0,
            df=0,
            n=n,
            cells=cells,
            tv_estimate=tv_estimate,
            tv_interval=tv_interval,
            worst_cells=list(worst_cells or []),
            note=EXACT_FAILURE + why,
            exact=True,
        )

    @classmethod
    def empty(
        cls, test: str, *, why: str, n: int = 0, cells: int = 0, df: int = 0, pooled_groups: int = 0
    ) -> GofResult:
        """Nothing to test (no tokens, fewer than two cells): statistic 0, p-value 1, ``note`` says why."""
        return cls(
            test=test,
            statistic=0.0,
            pvalue=1.0,
            df=df,
            n=n,
            cells=cells,
            tv_estimate=0.0,
            tv_interval=(0.0, 1.0),
            worst_cells=[],
            pooled_groups=pooled_groups,
            note=why,
        )

    @property
    def is_exact_failure(self) -> bool:
        return self.exact

    def record(self) -> dict[str, object]:
        """The result as data for a verdict's details (JSON): what the reports read, and its text."""
        return {
            "test": self.test,
            "statistic": self.statistic if math.isfinite(self.statistic) else None,
            "pvalue": self.pvalue,
            "df": self.df,
            "n": self.n,
            "exact_failure": self.exact,
            "why": self.note[len(EXACT_FAILURE) :] if self.exact else self.note,
            "worst_cells": [
                {"label": c.label, "observed": c.observed, "expected": c.expected} for c in self.worst_cells
            ],
            "text": str(self),
        }

    def tv_text(self) -> str:
        """The TV estimate with as much of its interval as agrees with the test: none where no interval
        was computed (the placeholder (0, 1)); only the upper end where the test rejected TV = 0 at the
        interval's own rate while the interval (a looser, simultaneous bound) still reaches 0."""
        lo, hi = self.tv_interval
        if (lo, hi) == (0.0, 1.0):
            return f"{self.tv_estimate:.4f}"
        if lo <= 0 and self.pvalue < TV_INTERVAL_DELTA:
            return f"{self.tv_estimate:.4f} (at most {hi:.4f}; the test, not this looser bound, shows it is above 0)"
        return f"{self.tv_estimate:.4f} [{lo:.4f}, {hi:.4f}]"

    def __str__(self) -> str:
        worst = ", ".join(f"{c.label}: {c.observed:.0f} vs {c.expected:.1f}" for c in self.worst_cells[:3])
        worst = f"; worst: {worst}" if worst else ""
        if self.is_exact_failure:  # no statistic, no TV: the note says what cannot happen
            return f"{self.test}: {self.note}{worst}"
        mde = f", detects TV >= {self.min_detectable_tv:.4f}" if self.min_detectable_tv else ""
        tv = f", TV={self.tv_text()}" if self.cells else ""  # a test without cells has no TV on them
        return f"{self.test}: stat={self.statistic:.4g}, df={self.df}, p={self.pvalue:.3g}, n={self.n}{tv}{mde}{worst}"
