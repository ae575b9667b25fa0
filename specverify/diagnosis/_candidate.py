"""A ranked candidate class of a diagnosis: its likelihood ratio against the target law, how much of
the deviation it explains, and the split of its evidence (by event kind, position and unit)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ._classes import CLASSES

__all__ = ["Candidate", "NOT_KNOWN", "FIT_P"]

NOT_KNOWN = "not a known class"
#: a class whose own G statistic on the cells has chi-square p at least this leaves nothing unexplained
FIT_P = 1e-3


@dataclasses.dataclass
class Candidate:
    name: str
    llr_vs_target: float  # nats: log P(evidence | class) - log P(evidence | target law)
    explained: float  # share of the target's excess deviance on the cells this class removes
    llr_by_kind: dict[str, float]  # nats per event kind
    llr_by_position: list[float]  # nats per position in the round
    llr_by_unit: dict[str, float]  # nats per unit label
    parameter: str = ""
    cells_fit_p: float = float("nan")  # chi-square p of the class's own G statistic on the cells

    @property
    def fits_cells(self) -> bool:
        """The class leaves no significant deviation on the cells (p >= FIT_P)."""
        return bool(self.cells_fit_p >= FIT_P)

    def qualifies(self, min_llr: float, min_explained: float) -> bool:
        """Named when it beats the target law by ``min_llr`` nats and either removes
        ``min_explained`` of the target's excess deviance or leaves none significant (the cells
        may miss a deviation the likelihood sees, e.g. drafts from rounded logits)."""
        return self.llr_vs_target >= min_llr and (self.explained >= min_explained or self.fits_cells)

    def to_dict(self) -> dict[str, Any]:
        c = CLASSES.get(self.name)
        return {
            "class": self.name,
            "log_likelihood_ratio_vs_target": round(self.llr_vs_target, 2),
            "explained_share": round(self.explained, 3),
            "cells_fit_p": None if self.cells_fit_p != self.cells_fit_p else float(f"{self.cells_fit_p:.3g}"),
            "by_kind": {k: round(v, 2) for k, v in self.llr_by_kind.items()},
            "by_position": [round(v, 2) for v in self.llr_by_position],
            "by_unit": {k: round(v, 2) for k, v in self.llr_by_unit.items()},
            "parameter": self.parameter,
            "mechanism": c.mechanism if c else "",
            "check": c.check if c else "",
            "sources": list(c.sources) if c else [],
        }
