"""A count of events against probabilities predicted one at a time (stops against P(stop)).

Event i happens with probability p_i given everything before it (p_i may depend on the past, and
so may how many events are watched: a stop ends its sequence). For a fixed lambda,

    M_lambda = exp(lambda S - sum_i log(1 - p_i + p_i e^lambda)),   S = number of events,

is a test martingale (each factor has conditional mean one), so P(M_lambda >= 1/a) <= a by
Ville's inequality whatever the stopping. A union bound over a fixed grid of lambdas of both signs
tests too many and too few events at once: p = |grid| / max_lambda M_lambda, capped at one. The grid
costs log |grid| nats and no assumption on the number of events.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["EventCountResult", "event_count_test"]

#: lambdas of the union (both signs): 0.005 .. 2 geometric, 24 per sign
LAMBDA_GRID = tuple(float(x) for x in np.geomspace(0.005, 2.0, 24))


@dataclasses.dataclass(frozen=True)
class EventCountResult:
    """Observed events, the number the predictions expect, and the union-bound p-value."""

    observed: int
    expected: float
    sd: float  # sqrt(sum p (1 - p))
    pvalue: float

    @property
    def direction(self) -> str:
        return "more" if self.observed > self.expected else "fewer"


def event_count_test(events: ArrayLike, probs: ArrayLike) -> EventCountResult:
    """Whether 0/1 ``events`` [n] are as frequent as their predicted ``probs`` [n] say (module
    docstring); valid when each probability holds given what came before it."""
    x = np.asarray(events, dtype=np.float64).reshape(-1)
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(-1), 0.0, 1.0)
    if x.shape != p.shape:
        raise ValueError(f"events {x.shape} and probs {p.shape} must have one entry per position")
    if not np.isin(x, (0.0, 1.0)).all():
        raise ValueError("events must be 0 or 1")
    s = float(x.sum())
    lam = np.concatenate([np.asarray(LAMBDA_GRID), -np.asarray(LAMBDA_GRID)])[:, None]  # [G, 1]
    log_m = lam[:, 0] * s - np.log1p(p[None, :] * np.expm1(lam)).sum(axis=1)  # [G]
    pvalue = float(min(1.0, len(lam) * np.exp(-max(float(log_m.max()), 0.0))))
    return EventCountResult(
        observed=int(s), expected=float(p.sum()), sd=float(np.sqrt((p * (1 - p)).sum())), pvalue=pvalue
    )
