"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025).

Notation as in :mod:`.chain_reference`: drafts x_1..x_gamma with x_i ~ q_i = q(. | x_<i), target
rows p_1..p_{gamma+1} from one pass (p_i = p(. | x_<i)), uniforms u_1..u_gamma, u_final ~ U[0, 1).

Weights (a prefix's capped likelihood ratio, kept as a running product):

    w_0 = 1,   w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i))
              = min over j <= i of prod_{j < k <= i} p_k(x_k) / q_k(x_k)

Residual after keeping i drafts, and its mass:

    R_i(y) = max(w_i p_{i+1}(y) - q_{i+1}(y), 0),   r_i = sum_y R_i(y)        (i < gamma)

Stopping thresholds: h_gamma = w_gamma and, for 1 <= i < gamma, h_i = r_i / (1 - w_i + r_i).
The verifier scans from the END of the block: tau = the largest i in 1..gamma with u_i < h_i, or 0
if none (h_0 = 1). It emits x_1..x_tau and then y ~ p_{gamma+1} (tau = gamma, the bonus) or
y ~ R_tau / r_tau (tau < gamma). At tau = 0 that residual is (p_1 - q_1)+, the chain rule's.

Why the law is the target's. Write Q(x^i) = prod_{k <= i} q_k(x_k). Two facts, each one line:

    sum_x q_{i+1}(x) w_{i+1}(x^i x) = sum_x min(q_{i+1}(x), w_i p_{i+1}(x)) = w_i - r_i     (1)
    P(tau < i | x^gamma) = prod_{i <= j <= gamma} (1 - h_j)                               (2)

By backward induction on i, averaging (2) over x_{i+1}..x_gamma ~ q gives P(tau >= i | x^i) = w_i:
at i = gamma it is h_gamma = w_gamma; below, 1 - (1 - h_i)(1 - (w_i - r_i)) = w_i by (1) and the
choice of h_i. Hence P(tau = i, x^i) = Q(x^i) (w_i - (w_i - r_i)) = Q(x^i) r_i, and

    P(emit x^i then y, and go on past x^i y) = Q(x^i) q_{i+1}(y) w_{i+1} = Q(x^i) min(q_{i+1}(y), w_i p_{i+1}(y))
    P(emit x^i then y, and stop)             = Q(x^i) R_i(y)

which sum to Q(x^i) w_i p_{i+1}(y): given that the output continues past x^i (probability
Q(x^i) w_i), its next token is p_{i+1}-distributed, at every depth. That is exactly the target law
of the generated sequence, round after round. The expected number of kept drafts is
sum_{i >= 1} E[w_i], and w_i >= prod_{k <= i} min(1, p_k(x_k) / q_k(x_k)) pathwise (the chain
rule's acceptance of the first i drafts), so block verification keeps at least as many tokens as
the token-wise rule in expectation (the paper proves it optimal among verifiers).

If 1 - w_i + r_i is 0 (w_i = 1 and p_{i+1} <= q_{i+1} everywhere: p = q) the position is never
reached in exact arithmetic; h_i = 1 is used there. If a residual vanishes (rounding only) the draw
falls back to p_{tau+1}, as the chain reference does.

The uniform contract matches the chain rule's: u_accept[i - 1] is u_i (compared with h_i), u_final
draws the last token. Forms: :func:`verify_block` (scalar, the executable specification),
:func:`verify_block_batch` (numpy, vectorised over rounds; the same tokens for the same uniforms,
every sum taken in index order), :func:`block_kernel_law` (exact law of one call for fixed drafts,
Fractions or floats), :func:`block_round_law` and :func:`block_first_tokens_law` (drafts drawn from
a prefix-dependent draft model; the law of the generated tokens over rounds).

:data:`BLOCK_VARIANTS` holds deliberately wrong variants (negative controls, and the catalogue's
mutants, :mod:`specverify.catalogue.block`): the threshold replaced by the weight itself (u_i < w_i,
a token-wise reading of the weights), or the residual left as the chain rule's (p_{tau+1} -
q_{tau+1})+, or both (vllm-project/vllm-ascend#7807, fixed in #7808); the thresholds' residual
mass taken one position early (h_i from r_{i-1}: in vllm-project/vllm#46781's notation h_i =
Z_{i+1} / (Z_{i+1} + 1 - p_i) read with Z_i, an index off by one); the final
position never tested (the scan starts at gamma - 1: no draft block is kept whole, no bonus); and
traversal verification's wrong parent update on a chain, h_i = min(1, r_i / (1 - q_{i+1}(x_{i+1}))).
:func:`block_tau_law` and :func:`block_stop_rows` give, batched over rounds, the law of tau given
the drafts and the row the last token is drawn from (the audit's white-box strata, the diagnosis).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from ..dists import inverse_cdf_sample, inverse_cdf_sample_scalar
from ..errors import InvalidDraftError
from .chain_numpy import ChainResult, _emit, _floats, _gather, _shapes
from .exact_law import Model, Tokens

__all__ = [
    "BlockVariant",
    "BLOCK",
    "BLOCK_VARIANTS",
    "block_weights",
    "block_thresholds",
    "verify_block",
    "verify_block_batch",
    "block_kernel_law",
    "block_round_law",
    "block_first_tokens_law",
    "rounds_first_tokens_law",
    "expected_accepted",
    "block_tau_law",
    "block_stop_rows",
]

#: a probability or weight: a Fraction (exact arithmetic) or a float, whichever the rows hold
Weight = Any
Row = Sequence[Weight]
KernelLaw = dict[tuple[int, int], Weight]
_K = TypeVar("_K")

# Rounds per chunk of the batch form: keeps its [chunk, gamma, V] float64 temporaries within a few MiB.
_CHUNK_BYTES = 1 << 22


@dataclasses.dataclass(frozen=True)
class BlockVariant:
    """Which parts of the rule are the paper's: the stopping thresholds h_i and the residual R_i."""

    name: str
    adjusted_test: bool = True  # False: stop at the largest i with u_i < w_i
    adjusted_residual: bool = True  # False: residual (p_{tau+1} - q_{tau+1})+
    threshold_off_by_one: bool = False  # True: h_i from r_{i-1} (= Z_i) instead of r_i (= Z_{i+1})
    test_final: bool = True  # False: position gamma is never tested (h_gamma = 0: no bonus)
    remaining_mass: bool = False  # True: h_i = min(1, r_i / (1 - q_{i+1}(x_{i+1}))) (traversal's wrong update)

    @property
    def exact(self) -> bool:
        return (
            self.adjusted_test
            and self.adjusted_residual
            and self.test_final
            and not (self.threshold_off_by_one or self.remaining_mass)
        )


BLOCK = BlockVariant("block")
BLOCK_VARIANTS = (
    BLOCK,
    BlockVariant("weight_test_unadjusted_residual", adjusted_test=False, adjusted_residual=False),
    BlockVariant("weight_test", adjusted_test=False),
    BlockVariant("unadjusted_residual", adjusted_residual=False),
    BlockVariant("threshold_off_by_one", threshold_off_by_one=True),
    BlockVariant("final_position_untested", test_final=False),
    BlockVariant("remaining_mass_threshold", remaining_mass=True),
)


def _one(like: Weight) -> Weight:
    return like * 0 + 1  # 1 in the rows' number type (Fraction stays Fraction)


def capped_ratio(w: Weight, px: Weight, qx: Weight) -> Weight:
    """min(1, w px / qx) for qx > 0, without forming w px / qx when it is >= 1 (it may overflow)."""
    if w * px >= qx:
        return _one(qx)
    return w * px / qx


def residual(w: Weight, p: Row, q: Row) -> list[Weight]:
    """max(w p(y) - q(y), 0) for every y, in the rows' number type."""
    zero = p[0] * 0
    return [max(w * pv - qv, zero) for pv, qv in zip(p, q)]


def row_sum(row: Row) -> Weight:
    """Sequential sum in index order (numpy's cumsum takes the same order: the batch form agrees)."""
    total = row[0] * 0
    for v in row:
        total += v
    return total


def block_weights(p_rows: Sequence[Row], q_rows: Sequence[Row], draft: Sequence[int]) -> list[Weight]:
    """w_0..w_gamma (module docstring). Raises InvalidDraftError for a draft token with q = 0."""
    w = [_one(p_rows[0][0])]
    for i, x in enumerate(draft):
        if q_rows[i][x] <= 0:
            raise InvalidDraftError(
                f"draft token {x} at position {i} has draft probability q = {q_rows[i][x]}; a token with "
                "q = 0 cannot have been sampled from q. Report the distribution the draft was actually drawn from"
            )
        w.append(capped_ratio(w[-1], p_rows[i][x], q_rows[i][x]))
    return w


def block_thresholds(
    p_rows: Sequence[Row], q_rows: Sequence[Row], draft: Sequence[int], variant: BlockVariant = BLOCK
) -> tuple[list[Weight], list[Weight]]:
    """(w_0..w_gamma, h_0..h_gamma): the weights and the stopping thresholds (h_0 = 1)."""
    w = block_weights(p_rows, q_rows, draft)
    gamma = len(draft)
    h = [w[0]] + [w[i] for i in range(1, gamma + 1)]
    if variant.adjusted_test:
        for i in range(1, gamma):
            at = i - 1 if variant.threshold_off_by_one else i
            r = row_sum(residual(w[at], p_rows[at], q_rows[at]))
            if variant.remaining_mass:
                left = 1 - q_rows[i][draft[i]]
                h[i] = capped_ratio(_one(r), r, left) if left > 0 else _one(r)
                continue
            den = (1 - w[i]) + r
            h[i] = r / den if den > 0 else _one(r)  # den = 0 is unreachable but through rounding
    if not variant.test_final and gamma:
        h[gamma] = h[gamma] * 0
    return w, h


def stop_row(
    p_rows: Sequence[Row], q_rows: Sequence[Row], w: Sequence[Weight], tau: int, variant: BlockVariant = BLOCK
) -> list[Weight]:
    """Unnormalised weights of the last token when tau drafts are kept (bonus row at tau = gamma)."""
    p = p_rows[tau]
    if tau == len(q_rows):
        return list(p)
    res = residual(w[tau] if variant.adjusted_residual else _one(w[tau]), p, q_rows[tau])
    if not any(v > 0 for v in res):  # rounding only: fall back to p, as the chain reference does
        return list(p)
    return res


def verify_block(
    p_rows: Sequence[Row],
    q_rows: Sequence[Row],
    draft: Sequence[int],
    u_accept: Sequence[float],
    u_final: float,
    variant: BlockVariant = BLOCK,
) -> list[int]:
    """One round of block verification. p_rows: gamma + 1 rows; q_rows, draft, u_accept: gamma each."""
    p_rows = [[float(v) for v in row] for row in p_rows]  # float64 arithmetic, as the batch form
    q_rows = [[float(v) for v in row] for row in q_rows]
    w, h = block_thresholds(p_rows, q_rows, draft, variant)
    tau = 0
    for i in range(len(draft), 0, -1):  # from the end of the block: the longest prefix that passes
        if u_accept[i - 1] < h[i]:
            tau = i
            break
    return list(draft[:tau]) + [inverse_cdf_sample_scalar(stop_row(p_rows, q_rows, w, tau, variant), u_final)]


def _batch_weights(px: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """w [B, gamma + 1] from px, qx [B, gamma] (the scalar's capped_ratio, elementwise)."""
    b, g = px.shape
    w = np.ones((b, g + 1))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(g):
            num = w[:, i] * px[:, i]
            w[:, i + 1] = np.where(num >= qx[:, i], 1.0, num / qx[:, i])
    return w


def _batch_thresholds(
    p: np.ndarray, q: np.ndarray, x: np.ndarray, w: np.ndarray, variant: BlockVariant = BLOCK
) -> np.ndarray:
    """h_1..h_gamma [c, g] of one chunk: p [c or 1, g + 1, V], q [c or 1, g, V] float64; w [c, g + 1].
    The scalar's operations, elementwise (block_thresholds)."""
    c, g = x.shape
    h: np.ndarray = w[:, 1:].copy()  # h_gamma = w_gamma; h_i for i < gamma replaced below
    if variant.adjusted_test and g > 1:
        lo = 0 if variant.threshold_off_by_one else 1
        t = w[:, lo : lo + g - 1, None] * p[:, lo : lo + g - 1] - q[:, lo : lo + g - 1]  # [c, g - 1, V]: R_i
        np.maximum(t, 0.0, out=t)
        r = np.cumsum(t, axis=-1)[..., -1]  # sequential sums, as row_sum
        with np.errstate(divide="ignore", invalid="ignore"):
            if variant.remaining_mass:
                left = 1.0 - _gather(q[:, 1:g], x[:, 1:], c)
                h[:, : g - 1] = np.where(left > 0, np.where(r >= left, 1.0, r / left), 1.0)
            else:
                den = (1.0 - w[:, 1:g]) + r
                h[:, : g - 1] = np.where(den > 0, r / den, 1.0)
    if not variant.test_final and g:
        h[:, g - 1] = 0.0
    return h


def _batch_chunk(
    p: np.ndarray, q: np.ndarray, x: np.ndarray, w: np.ndarray, u: np.ndarray, variant: BlockVariant = BLOCK
) -> np.ndarray:
    """tau for one chunk of rounds. p [c or 1, g + 1, V], q [c or 1, g, V] float64; w [c, g + 1]; u [c, g]."""
    c, g = x.shape
    if g == 0:  # nothing drafted: the bonus
        return np.zeros(c, dtype=np.int64)
    passed = u < _batch_thresholds(p, q, x, w, variant)  # [c, g]
    last = g - np.argmax(passed[:, ::-1], axis=1)  # the largest passing i (1-based)
    return np.asarray(np.where(passed.any(axis=1), last, 0), dtype=np.int64)


def _stop_rows(
    p: np.ndarray, q: np.ndarray, w: np.ndarray, tau: np.ndarray, variant: BlockVariant = BLOCK
) -> np.ndarray:
    """[c, V] unnormalised rows the last token of each round is drawn from (residual at tau < gamma,
    bonus row at tau = gamma; a residual without mass, rounding only, falls back to p)."""
    c = len(tau)
    g = q.shape[1]
    bi = np.arange(c) if p.shape[0] != 1 else np.zeros(c, dtype=np.int64)
    rows: np.ndarray = p[bi, tau].copy()  # [c, V]
    stopped = np.nonzero(tau < g)[0]
    if len(stopped):
        qi = bi[stopped] if q.shape[0] != 1 else np.zeros(len(stopped), dtype=np.int64)
        scale = w[stopped, tau[stopped], None] if variant.adjusted_residual else 1.0
        res = scale * rows[stopped] - q[qi, tau[stopped]]
        np.maximum(res, 0.0, out=res)
        keep = res.any(axis=1)  # else rounding only: fall back to p, as the reference does
        rows[stopped[keep]] = res[keep]
    return rows


def _batch_final(
    p: np.ndarray, q: np.ndarray, w: np.ndarray, tau: np.ndarray, u: np.ndarray, variant: BlockVariant = BLOCK
) -> np.ndarray:
    """The last token of each round of a chunk (residual at tau < gamma, bonus at tau = gamma)."""
    out: np.ndarray = inverse_cdf_sample(_stop_rows(p, q, w, tau, variant), u)
    return out


def verify_block_batch(
    draft_tokens: ArrayLike,
    q: ArrayLike,
    p: ArrayLike,
    u_accept: ArrayLike,
    u_final: ArrayLike,
    variant: BlockVariant = BLOCK,
) -> ChainResult:
    """B rounds of block verification, the same argument order and shapes as ``verify_chain_batch``:

    draft_tokens [B, gamma] int; q [B, gamma, V]; p [B, gamma + 1, V] (leading dim 1 broadcasts);
    u_accept [B, gamma]; u_final [B]  ->  ChainResult (tokens [B, gamma + 1], num_accepted = tau [B]).
    Every row is read (the thresholds need each position's residual mass): O(B gamma V) work.
    ``variant``: one of :data:`BLOCK_VARIANTS` (the catalogue's mutants); the default is the rule.
    """
    p, q = _floats(p), _floats(q)
    x, b, g, v = _shapes(draft_tokens, p, q)
    px = _gather(p[:, :g], x, b)  # [B, g]
    qx = _gather(q, x, b)  # [B, g]
    if (qx <= 0).any():
        i, j = np.argwhere(qx <= 0)[0]
        raise InvalidDraftError(
            f"draft token {x[i, j]} (round {i}, position {j}) has q = 0; it cannot have been drawn "
            "from q. Pass the distribution the draft was actually sampled from"
        )
    w = _batch_weights(px, qx)
    ua = np.asarray(u_accept, dtype=np.float64).reshape(b, g)
    uf = np.asarray(u_final, dtype=np.float64).reshape(b)
    tau = np.empty(b, dtype=np.int64)
    final = np.empty(b, dtype=np.int64)
    for s, e, pc, qc in _chunks(p, q, b, g, v):
        tau[s:e] = _batch_chunk(pc, qc, x[s:e], w[s:e], ua[s:e], variant)
        final[s:e] = _batch_final(pc, qc, w[s:e], tau[s:e], uf[s:e], variant)
    return ChainResult(_emit(x, tau, final), tau)


def _chunks(p: np.ndarray, q: np.ndarray, b: int, g: int, v: int) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(start, end, p rows, q rows) of each chunk of rounds, float64 (float32 upcast exactly)."""
    chunk = max(1, _CHUNK_BYTES // (8 * max(1, g) * v))
    for s in range(0, b, chunk):
        e = min(b, s + chunk)
        pc = np.asarray(p[s:e] if p.shape[0] != 1 else p, dtype=np.float64)
        qc = np.asarray(q[s:e] if q.shape[0] != 1 else q, dtype=np.float64)
        yield s, e, pc, qc


def block_tau_law(
    p: ArrayLike, q: ArrayLike, draft_tokens: ArrayLike, variant: BlockVariant = BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """(w [B, g + 1], law [B, g + 1]): the weights and P(tau = i | the drafts) of B rounds (shapes of
    :func:`verify_block_batch`), P(tau = i) = h_i prod_{j > i} (1 - h_j) with h_0 = 1, in float64.
    Drafts with q = 0 are not refused here (a diagnosis scores what it is given)."""
    p, q = _floats(p), _floats(q)
    x, b, g, v = _shapes(draft_tokens, p, q)
    w = _batch_weights(_gather(p[:, :g], x, b), _gather(q, x, b))
    law = np.zeros((b, g + 1))
    for s, e, pc, qc in _chunks(p, q, b, g, v):
        h = _batch_thresholds(pc, qc, x[s:e], w[s:e], variant)  # [c, g]: h_1..h_g
        after = np.ones((e - s, g + 1))  # after[:, i] = prod_{j > i} (1 - h_j)
        if g:
            after[:, :g] = np.cumprod((1.0 - h)[:, ::-1], axis=1)[:, ::-1]
        law[s:e, 0] = after[:, 0]
        law[s:e, 1:] = h * after[:, 1:]
    return w, law


def block_stop_rows(
    p: ArrayLike, q: ArrayLike, w: np.ndarray, tau: ArrayLike, variant: BlockVariant = BLOCK
) -> np.ndarray:
    """[B, V] the normalised law of each round's last token given tau (w from :func:`block_tau_law`)."""
    rows = _stop_rows(_floats(p).astype(np.float64), _floats(q).astype(np.float64), w, np.asarray(tau), variant)
    out: np.ndarray = rows / rows.sum(axis=1, keepdims=True)
    return out


def _add(law: dict[_K, Weight], key: _K, w: Weight) -> None:
    if w != 0:
        law[key] = law.get(key, 0) + w


def block_kernel_law(
    p_rows: Sequence[Row], q_rows: Sequence[Row], draft: Sequence[int], variant: BlockVariant = BLOCK
) -> KernelLaw:
    """Exact law of (tau, y) for fixed drafts, the shape of ``exact_law.kernel_output_law``.

    P(tau = i) = h_i prod_{j > i} (1 - h_j) (h_0 = 1), then y from the stop row, normalised.
    """
    w, h = block_thresholds(p_rows, q_rows, draft, variant)
    law: KernelLaw = {}
    reach = _one(w[0])  # P(no stop at a position after i)
    for i in range(len(draft), -1, -1):
        stop = h[i] if i > 0 else _one(reach)
        here = reach * stop
        if here != 0:
            row = stop_row(p_rows, q_rows, w, i, variant)
            mass = row_sum(row)
            for y, v in enumerate(row):
                _add(law, (i, y), here * v / mass)
        reach = reach * (1 - stop)
        if reach == 0:
            break
    return law


Verifier = Callable[[Sequence[Row], Sequence[Row], Sequence[int]], Mapping[tuple[int, int], Weight]]


def block_round_law(
    target: Model, draft: Model, prefix: Sequence[int], gamma: int, verifier: Verifier = block_kernel_law
) -> dict[Tokens, Weight]:
    """Law of the block one round emits from ``prefix``: drafts x_i ~ draft(prefix + x_<i), then
    ``verifier`` (block verification by default; pass any kernel law, e.g. the chain rule's)."""
    prefix = tuple(prefix)
    law: dict[Tokens, Weight] = {}

    def walk(xs: Tokens, weight: Weight, p_rows: list[Row], q_rows: list[Row]) -> None:
        ctx = prefix + xs
        p = target(ctx)
        if len(xs) == gamma:
            for (k, y), v in verifier(p_rows + [p], q_rows, xs).items():
                _add(law, xs[:k] + (y,), weight * v)
            return
        q = draft(ctx)
        for x, qx in enumerate(q):
            if qx != 0:
                walk(xs + (x,), weight * qx, p_rows + [p], q_rows + [q])

    walk((), 1, [], [])
    return law


def rounds_first_tokens_law(
    round_law: Callable[[Tokens], Mapping[Tokens, Weight]], prefix: Sequence[int], length: int
) -> dict[Tokens, Weight]:
    """Law of the first ``length`` tokens generated by repeated rounds, each with law round_law(ctx)."""
    memo: dict[tuple[Tokens, int], dict[Tokens, Weight]] = {}

    def law_from(ctx: Tokens, need: int) -> dict[Tokens, Weight]:
        if (ctx, need) in memo:
            return memo[(ctx, need)]
        out: dict[Tokens, Weight] = {}
        for block, w in round_law(ctx).items():
            if len(block) >= need:
                _add(out, block[:need], w)
            else:
                for rest, w2 in law_from(ctx + block, need - len(block)).items():
                    _add(out, block + rest, w * w2)
        memo[(ctx, need)] = out
        return out

    return law_from(tuple(prefix), length)


def block_first_tokens_law(
    target: Model,
    draft: Model,
    prefix: Sequence[int],
    gamma: int,
    length: int,
    verifier: Verifier = block_kernel_law,
) -> dict[Tokens, Weight]:
    """Law of the first ``length`` tokens over rounds of block verification (compare ``target_law``)."""
    return rounds_first_tokens_law(lambda ctx: block_round_law(target, draft, ctx, gamma, verifier), prefix, length)


def expected_accepted(round_law: Mapping[Tokens, Weight]) -> Weight:
    """E[kept drafts] = E[len(block)] - 1 of a round law."""
    return sum(w * len(b) for b, w in round_law.items()) - 1
