"""Theory of chain speculative decoding: acceptance, expected length, speedup.

With acceptance probability a per drafted token, independent across positions (Leviathan et al.),
the number of drafts accepted in a round, K, is a geometric variable truncated at gamma:

    P(K = k) = (1 - a) a^k  for k < gamma,    P(K = gamma) = a^gamma,

and a round emits K + 1 tokens (the replacement or the bonus), so

    E[tokens per round] = sum_{k=0}^{gamma} a^k = (1 - a^(gamma + 1)) / (1 - a)   (gamma + 1 at a = 1).

When acceptance depends on the position, a_1..a_gamma, the same sum becomes the product form
E = 1 + a_1 + a_1 a_2 + ... + a_1...a_gamma. A round costs gamma c + 1 target steps when one draft
step costs c target steps, so the walltime speedup is E / (gamma c + 1).

Per-token acceptance a for the exact rules:
    full rule         sum_x min(p(x), q(x)) = 1 - TV(p, q)
    one-hot, sample-and-match   sum_x q(x) p(x)
    greedy            1[argmax q == argmax p]

All functions accept floats or ``fractions.Fraction`` (exact) where that makes sense.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .dists import check_same_vocab, validate_probs

__all__ = [
    "acceptance_rate",
    "expected_tokens_per_round",
    "expected_tokens_position_dependent",
    "accepted_length_law",
    "accepted_length_law_position_dependent",
    "expected_speedup",
    "optimal_gamma",
    "rejection_mass",
]


def acceptance_rate(p: npt.ArrayLike, q: npt.ArrayLike, *, rule: str = "full") -> float:
    """Per-token acceptance probability of ``rule`` for target row p and draft row q."""
    p = validate_probs(p, name="p", ndim=1)
    q = validate_probs(q, name="q", ndim=1)
    check_same_vocab(p, q)
    if rule == "full":
        return float(np.minimum(p, q).sum())
    if rule in ("one_hot", "sample_and_match"):
        return float((p * q).sum())
    if rule == "greedy":
        return float(np.argmax(p) == np.argmax(q))
    raise ValueError(f"unknown rule {rule!r}; use 'full', 'one_hot', 'sample_and_match' or 'greedy'")


def rejection_mass(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """sum_x max(0, p(x) - q(x)), which equals 1 - acceptance_rate(p, q) (the residual's constant)."""
    p = validate_probs(p, name="p", ndim=1)
    q = validate_probs(q, name="q", ndim=1)
    return float(np.maximum(p - q, 0.0).sum())


@overload
def expected_tokens_per_round(alpha: Fraction, gamma: int) -> Fraction: ...
@overload
def expected_tokens_per_round(alpha: float, gamma: int) -> float: ...
@overload
def expected_tokens_per_round(alpha: npt.ArrayLike, gamma: int) -> npt.NDArray[np.float64]: ...


def expected_tokens_per_round(
    alpha: Fraction | npt.ArrayLike, gamma: int
) -> Fraction | float | npt.NDArray[np.float64]:
    """(1 - a^(gamma+1)) / (1 - a), with the a -> 1 limit gamma + 1. Vectorised over ``alpha``."""
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if hasattr(alpha, "denominator"):  # int or Fraction: exact
        exact: Any = alpha  # any rational (int, Fraction, numpy integer), kept in its own arithmetic
        tokens: Fraction | float = exact * 0 + gamma + 1 if exact == 1 else (1 - exact ** (gamma + 1)) / (1 - exact)
        return tokens
    if isinstance(alpha, float):
        return float(expected_tokens_per_round(np.array([alpha]), gamma)[0])
    a = np.asarray(alpha, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = (1 - a ** (gamma + 1)) / (1 - a)
    # Near a = 1 the closed form loses precision; the power sum is exact there.
    near = np.abs(1 - a) < 1e-6
    if near.any():
        val = np.where(near, sum(a**k for k in range(gamma + 1)), val)
    return val


def expected_tokens_position_dependent(alphas: Iterable[Any]) -> Any:
    """1 + a_1 + a_1 a_2 + ... + a_1 ... a_gamma for position-dependent acceptance a_1..a_gamma."""
    total, prod = 1, 1
    for a in alphas:
        prod = prod * a
        total = total + prod
    return total


def accepted_length_law(alpha: Any, gamma: int) -> list[Any]:
    """[P(K = 0), ..., P(K = gamma)]: the truncated geometric law of accepted drafts per round."""
    return accepted_length_law_position_dependent([alpha] * gamma)


def accepted_length_law_position_dependent(alphas: Iterable[Any]) -> list[Any]:
    """P(K = k) = a_1 ... a_k (1 - a_{k+1}) for k < gamma, and a_1 ... a_gamma for k = gamma."""
    law: list[Any] = []
    prod: Any = 1
    for a in alphas:
        law.append(prod * (1 - a))
        prod = prod * a
    law.append(prod)
    return law


@overload
def expected_speedup(alpha: Fraction, gamma: int, c: float) -> Fraction | float: ...
@overload
def expected_speedup(alpha: float, gamma: int, c: float) -> float: ...
@overload
def expected_speedup(alpha: npt.ArrayLike, gamma: int, c: float) -> npt.NDArray[np.float64]: ...


def expected_speedup(
    alpha: Fraction | npt.ArrayLike, gamma: int, c: float
) -> Fraction | float | npt.NDArray[np.float64]:
    """Expected walltime speedup E[tokens per round] / (gamma c + 1), c = draft / target step cost."""
    if c < 0:
        raise ValueError(f"draft cost ratio c must be >= 0, got {c}")
    return expected_tokens_per_round(alpha, gamma) / (gamma * c + 1)


def optimal_gamma(alpha: float, c: float, *, max_gamma: int = 128) -> tuple[int, float]:
    """The gamma in 0..max_gamma maximising expected_speedup, and that speedup (gamma 0: no drafting)."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    best = (0, 1.0)
    for g in range(1, max_gamma + 1):
        s = float(expected_speedup(alpha, g, c))
        if s > best[1] + 1e-15:
            best = (g, s)
    return best
