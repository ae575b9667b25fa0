"""Token-by-token scoring shared by the scorers without round tables (:mod:`._penalty`, :mod:`._stream`).

Each unit gives, for its first n tokens, the law of every token under each class ([n, V] rows,
"target" among them), the observed ids and a cell of every (token, id) pair. The score of a class
is its summed log-probability of the observed ids (floored at EPS) minus the nats its fitted
parameters pay, and its G statistic on the cells; candidates are ranked against "target" as in
:mod:`._diagnose`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ._diagnose import Candidate, chi2_sf
from ._models import EPS
from ._score import g_statistic

if TYPE_CHECKING:  # annotations only
    from ..dists import SamplingSettings
    from ..harness import Generation

    #: what a token-by-token scorer takes of one unit: (Generation, pair (duck-typed), settings, label)
    TokenUnit = tuple[Generation, Any, SamplingSettings, str]

__all__ = ["TokenScores"]


@dataclasses.dataclass
class TokenScores:
    n_cells: int
    kind: str  # the event kind the candidates' llr_by_kind names
    ll: dict[str, float] = dataclasses.field(default_factory=dict)
    by_unit: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    G_by_unit: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    params: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)  # class -> {unit: fitted parameter}
    df: int = 0
    tokens: int = 0

    def add_unit(
        self,
        label: str,
        laws: Mapping[str, np.ndarray],
        y: np.ndarray,
        cell: np.ndarray,
        pay: Mapping[str, float] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> None:
        """Score one unit: ``laws`` {class: [n, V]}, ids ``y`` [n], ``cell`` [n, V]."""
        n = len(y)
        obs = np.bincount(cell[np.arange(n), y], minlength=self.n_cells).astype(float)
        for name, law in laws.items():
            v = float(np.log(np.maximum(law[np.arange(n), y], EPS)).sum()) - (pay or {}).get(name, 0.0)
            self.ll[name] = self.ll.get(name, 0.0) + v
            self.by_unit.setdefault(name, {})[label] = v
            exp = np.bincount(cell.ravel(), weights=law.ravel(), minlength=self.n_cells)
            self.G_by_unit.setdefault(name, {})[label] = g_statistic(obs, exp)
        for name, value in (params or {}).items():
            self.params.setdefault(name, {})[label] = value
        self.df += max(int((obs > 0).sum()) - 1, 1)
        self.tokens += n

    def _g(self, name: str) -> float:
        """A class's G over every unit; a unit without the class's law is the target's there (a
        settings class whose knob a unit leaves off predicts exactly the target's law)."""
        ref = self.G_by_unit["target"]
        return sum(self.G_by_unit[name].get(u, g) for u, g in ref.items())

    def ranked(self) -> list[Candidate]:
        g_ref = self._g("target")
        out = []
        for name in self.ll:
            if name == "target":
                continue
            # against the target on the units where the class has a law (elsewhere it is the target's)
            per_unit = {u: self.by_unit[name][u] - self.by_unit["target"][u] for u in self.by_unit[name]}
            llr = sum(per_unit.values())
            g_name = self._g(name)
            expl = (g_ref - g_name) / max(g_ref - self.df, 1e-9) if g_ref > self.df else 0.0
            par = "; ".join(f"{u}: {v}" for u, v in self.params.get(name, {}).items())
            fit = chi2_sf(g_name, self.df)
            out.append(Candidate(name, llr, float(expl), {self.kind: llr}, [], per_unit, par, fit))
        return sorted(out, key=lambda c: -c.llr_vs_target)
