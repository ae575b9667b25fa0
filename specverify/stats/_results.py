"""Result objects (scipy.stats style: named fields, printable, JSON-serialisable)."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

__all__ = ["GofResult", "Cell", "to_jsonable"]


def to_jsonable(x: Any):
    if isinstance(x, enum.Enum):  # statuses: their string value
        return to_jsonable(x.value)
    if dataclasses.is_dataclass(x):
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


@dataclasses.dataclass
class GofResult:
    """Outcome of one goodness-of-fit test.

    ``tv_estimate`` is the total variation between the observed and expected cell frequencies
    (on the test's cells), with a (1 - delta) confidence interval ``tv_interval``;
    ``min_detectable_tv`` is the smallest TV on these cells this n detects with probability
    1 - beta at the test's alpha (set by the caller through :func:`with_power`).
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
    observed: list | None = None  # all cells, for plots
    expected: list | None = None
    labels: list | None = None

    def __str__(self) -> str:
        worst = ", ".join(f"{c.label}: {c.observed:.0f} vs {c.expected:.1f}" for c in self.worst_cells[:3])
        mde = f", detects TV >= {self.min_detectable_tv:.4f}" if self.min_detectable_tv else ""
        return (
            f"{self.test}: stat={self.statistic:.4g}, df={self.df}, p={self.pvalue:.3g}, n={self.n}, "
            f"TV={self.tv_estimate:.4f} [{self.tv_interval[0]:.4f}, {self.tv_interval[1]:.4f}]{mde}; worst: {worst}"
        )
