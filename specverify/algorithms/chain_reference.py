"""Chain speculative decoding, the executable specification (scalar, one round, plain Python).

Notation (Leviathan et al. 2023): p = target, q = draft, gamma = number of drafted tokens.

Full rule (speculative sampling). Given drafts x_1..x_gamma with x_i ~ q_i, target rows
p_1..p_{gamma+1} from one pass, and fresh uniforms u_1..u_gamma, u_final ~ U[0, 1):

    for i in 1..gamma:
        if u_i < p_i(x_i) / q_i(x_i):  emit x_i                       (accept)
        else: emit y ~ (p_i - q_i)+ / sum (p_i - q_i)+, using u_final   (replace) and stop
    emit y ~ p_{gamma+1}, using u_final                                (bonus)

    P(emit x at position i | prefix) = min(p, q)(x) + (p(x) - min(p, q)(x)) = p(x).

If (p_i - q_i)+ is identically zero after a rejection (possible only through rounding, when p_i and
q_i differ by less than float precision) the replacement is drawn from p_i.

Greedy rule: accept x_i iff x_i == argmax p_i; at the first mismatch emit argmax p_i; if all match,
emit argmax p_{gamma+1}. argmax ties go to the lowest token id (numpy's and torch's convention).

Sample-and-match (llama.cpp, MLX, transformers' prompt lookup): the target draws y_i ~ p_i with
u_i for every position; x_i is kept while x_i == y_i; the first y_i != x_i, or y_{gamma+1}, is
emitted. Exact for any proposal, acceptance sum_x q(x) p(x).

One-hot (vLLM with draft_probs=None, EAGLE-2): accept x_i iff u_i < p_i(x_i); otherwise emit
y ~ p_i with x_i removed and renormalised, using u_final. Same law as sample-and-match.

The uniform contract above is shared by the numpy and torch forms, which therefore emit the same
tokens given the same uniforms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..dists import inverse_cdf_sample_scalar
from ..errors import InvalidDraftError

__all__ = [
    "verify_chain",
    "verify_greedy",
    "verify_sample_and_match",
    "verify_one_hot",
    "speculative_step",
    "greedy_step",
    "argmax_lowest",
]

Row = Sequence[float]


def argmax_lowest(row: Row) -> int:
    """Index of the maximum, the lowest index among ties."""
    best = 0
    for i in range(1, len(row)):
        if row[i] > row[best]:
            best = i
    return best


def verify_chain(
    p_rows: Sequence[Row], q_rows: Sequence[Row], draft: Sequence[int], u_accept: Sequence[float], u_final: float
) -> list[int]:
    """One round of the full rule. p_rows: gamma + 1 rows; q_rows, draft, u_accept: gamma each."""
    out: list[int] = []
    for i, x in enumerate(draft):
        p, q = p_rows[i], q_rows[i]
        if q[x] <= 0:
            raise InvalidDraftError(
                f"draft token {x} at position {i} has draft probability q = {q[x]}; a token with "
                "q = 0 cannot have been sampled from q. Report the distribution the draft was "
                "actually drawn from (after temperature / top-k / top-p)"
            )
        with np.errstate(over="ignore"):  # q(x) near underflow: the ratio is +inf, accept
            ratio = p[x] / q[x]
        if u_accept[i] < ratio:
            out.append(x)
            continue
        residual = [max(0.0, pv - qv) for pv, qv in zip(p, q)]
        if sum(residual) <= 0:
            residual = list(p)
        out.append(inverse_cdf_sample_scalar(residual, u_final))
        return out
    out.append(inverse_cdf_sample_scalar(p_rows[len(draft)], u_final))
    return out


def verify_greedy(p_rows: Sequence[Row], draft: Sequence[int]) -> list[int]:
    """One round of greedy verification (no randomness)."""
    out: list[int] = []
    for i, x in enumerate(draft):
        best = argmax_lowest(p_rows[i])
        out.append(best)
        if x != best:
            return out
    out.append(argmax_lowest(p_rows[len(draft)]))
    return out


def verify_sample_and_match(p_rows: Sequence[Row], draft: Sequence[int], u_target: Sequence[float]) -> list[int]:
    """One round of sample-and-match; u_target has gamma + 1 uniforms, one per target row."""
    out: list[int] = []
    for i, x in enumerate(draft):
        y = inverse_cdf_sample_scalar(p_rows[i], u_target[i])
        out.append(y)
        if y != x:
            return out
    out.append(inverse_cdf_sample_scalar(p_rows[len(draft)], u_target[len(draft)]))
    return out


def verify_one_hot(p_rows: Sequence[Row], draft: Sequence[int], u_accept: Sequence[float], u_final: float) -> list[int]:
    """One round of the one-hot rule (the draft treated as a point mass)."""
    out: list[int] = []
    for i, x in enumerate(draft):
        p = p_rows[i]
        if u_accept[i] < p[x]:
            out.append(x)
            continue
        without_x = [0.0 if j == x else pv for j, pv in enumerate(p)]
        out.append(inverse_cdf_sample_scalar(without_x, u_final))
        return out
    out.append(inverse_cdf_sample_scalar(p_rows[len(draft)], u_final))
    return out


Draft = Callable[[list[int]], Row]
Target = Callable[[list[int], list[int]], Sequence[Row]]


def speculative_step(
    prefix: Sequence[int], draft: Draft, target: Target, gamma: int, rng: np.random.Generator
) -> list[int]:
    """The seed article's ``speculativeStep``: draft gamma tokens, one target call, verify.

    ``draft(prefix)`` returns q(. | prefix); ``target(prefix, proposed)`` returns the gamma + 1
    target rows of one pass. All randomness comes from ``rng``: gamma draft uniforms, then gamma
    acceptance uniforms, then u_final.
    """
    prefix = list(prefix)
    proposed: list[int] = []
    qs: list[Row] = []
    u_draft = rng.random(gamma)
    for i in range(gamma):
        q = draft(prefix + proposed)
        qs.append(q)
        proposed.append(inverse_cdf_sample_scalar(q, u_draft[i]))
    ps = target(prefix, proposed)
    u_accept = rng.random(gamma)
    u_final = rng.random()
    return verify_chain(ps, qs, proposed, u_accept.tolist(), u_final)


def greedy_step(prefix: Sequence[int], draft: Draft, target: Target, gamma: int) -> list[int]:
    """Greedy round: the draft proposes its argmax gamma times, the target verifies greedily."""
    prefix = list(prefix)
    proposed: list[int] = []
    for _ in range(gamma):
        proposed.append(argmax_lowest(draft(prefix + proposed)))
    return verify_greedy(target(prefix, proposed), proposed)
