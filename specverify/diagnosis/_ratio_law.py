"""The acceptance test as a generalised ratio, fitted on a grid: min(1, C p(x)^a / q(x)^b).

The rule keeps a draft with probability min(1, p(x)/q(x)): a = b = C = 1. Bugs in the test change
the ratio's form in ways the one-parameter members of ``_fitted`` (a scale C, a power a = b) each
cover one of: a square root taken (a = b = 1/2), the draft's own probability read as the
acceptance (a = 0, b = -1), a coin that is a random bit (a = b = 0, C = 1/2: the ratio never
read), two coins that must both pass (a = b = 2), no draft ever kept (C = 0: a count or mask
that marks every test failed). A member here fits (a, b, C) together on the grid

    a in {0, 1/2, 1, 2},  b in {-1, 0, 1/2, 1, 2},  log C in [-3, 3] in steps of 0.05, or C = 0

to the acceptance events pooled over the units (the first ``FIT_ROUNDS`` usable rounds of each) and
pays log(grid size) = log(2,440) = 7.8 nats, twice a one-parameter member's price: where one of
those fits exactly, it is preferred. A draft the target gives no mass is never kept (p(x)^0 is read
as 1 only where p(x) > 0), as under the rule.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._mechanism import SelfFitted
from ._models import Chunk

__all__ = ["GeneralisedRatio"]

_A = (0.0, 0.5, 1.0, 2.0)
_B = (-1.0, 0.0, 0.5, 1.0, 2.0)
#: log C: a grid of scales, and C = 0 (no draft ever kept: a count or mask that marks every test failed)
_LOG_C = np.r_[-np.inf, np.round(np.arange(-3.0, 3.0 + 1e-9, 0.05), 2)]
_TINY = 1e-300


def _acceptance(px: np.ndarray, qx: np.ndarray, a: float, b: float, log_c: np.ndarray) -> np.ndarray:
    """[..., len(log_c)] min(1, C p^a / q^b) for every C (0 where p(x) = 0; 1 where q(x) = 0 < p(x))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_r = a * np.log(np.maximum(px, _TINY)) - b * np.log(np.maximum(qx, _TINY))
    with np.errstate(invalid="ignore"):  # -inf + inf where q(x) = 0: that case is set below
        out = np.exp(np.minimum(log_r[..., None] + np.asarray(log_c), 0.0))
    out = np.where((qx <= 0)[..., None] & (b > 0), 1.0, out)
    return np.where((px <= 0)[..., None], 0.0, out)


class GeneralisedRatio(SelfFitted):
    """min(1, C p(x)^a / q(x)^b), (a, b, C) fitted on the grid (module docstring)."""

    check = (
        "the acceptance test: u < min(1, p(x) / q(x)) with p and q the drafted token's probabilities, the ratio "
        "as written"
    )

    def __init__(self) -> None:
        self.a, self.b, self.log_c = 1.0, 1.0, 0.0
        self._events: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._set_words()

    @property
    def price(self) -> float:
        return math.log(len(_A) * len(_B) * len(_LOG_C))

    def collect(self, c: Chunk, y: np.ndarray) -> None:
        """Keep a chunk's reached tests (p(x), q(x), kept) for the fit (``_score.fit_on_grid``)."""
        g = c.X.shape[1]
        pos = np.arange(g)[None, :]
        reached = pos <= np.minimum(c.k, g - 1)[:, None]
        kept = pos < c.k[:, None]
        self._events.append((c.at(c.P)[reached], c.at(c.Qr)[reached], kept[reached]))

    def solve(self) -> None:
        """The grid point under which the collected tests are likeliest (the rule where there are none)."""
        if self._events:
            px, qx, kept = (np.concatenate(x) for x in zip(*self._events))
            best = (-math.inf, 1.0, 1.0, 0.0)
            for a, b in itertools.product(_A, _B):
                acc = np.clip(_acceptance(px, qx, a, b, _LOG_C), 1e-9, 1 - 1e-9)
                ll = np.where(kept[:, None], np.log(acc), np.log1p(-acc)).sum(0)
                i = int(np.argmax(ll))
                if ll[i] > best[0]:
                    best = (float(ll[i]), a, b, float(_LOG_C[i]))
            _, self.a, self.b, self.log_c = best
        self._events = []
        self._set_words()

    def _set_words(self) -> None:
        if self.log_c == -math.inf:
            self.name = "ratio_generalised(never)"
            self.words = "a draft is never kept: every round ends at its first draft, with a draw from (p - q)+"
            self.check = (
                "the count of kept drafts and the accept mask it is read from (a mask that marks every position "
                "rejected), then the acceptance test"
            )
            return
        self.check = type(self).check
        c = math.exp(self.log_c)
        self.name = f"ratio_generalised(a={self.a:g},b={self.b:g},C={c:.2g})"
        num = "" if self.a == 0 else "p(x)" if self.a == 1 else f"p(x)^{self.a:g}"
        den = "" if self.b == 0 else "q(x)" if self.b == 1 else f"q(x)^{self.b:g}"
        if self.b < 0:
            num, den = (f"{num} " if num else "") + ("q(x)" if self.b == -1 else f"q(x)^{-self.b:g}"), ""
        ratio = (num or "1") + (f" / {den}" if den else "")
        scaled = ratio if abs(self.log_c) < 1e-9 else f"{c:.2g} {ratio}" if ratio != "1" else f"{c:.2g}"
        law = f"{min(c, 1.0):.2g} wherever p(x) > 0 (the ratio is not read)" if ratio == "1" else f"min(1, {scaled})"
        self.words = (
            f"a draft is kept with probability {law}, the form fitted on a grid of powers and scales (the rule: "
            "min(1, p(x) / q(x)))"
        )

    def accept(self, c: Chunk) -> np.ndarray:
        out: np.ndarray = _acceptance(c.at(c.P), c.at(c.Qr), self.a, self.b, np.array([self.log_c]))[..., 0]
        return out
