"""``specverify bench sampler``: rounds per second of the verification forms, as ratios.

Forms measured on the same inputs (float32 rows, one distinct set of rows per round, as an engine
would hand them over):

* ``literal loop``: the seed article's ``speculativeStep`` verification transcribed literally to
  Python, one round at a time, over Python lists (the baseline);
* ``scalar reference``: :func:`specverify.algorithms.verify_chain`, one round at a time;
* ``numpy batch`` and ``torch batch``: all B rounds in one call. The numpy form's final draw runs
  as one compiled pass per round (numba, :mod:`specverify.algorithms._fused`); ``numpy batch, no
  numba`` is the same call on the pure-numpy fallback.

Next to them, the memory-bandwidth bound: a round must read at least the target row and the draft
row at its stopping position (2 V itemsize bytes; the gamma accept tests read scalars), so no
implementation can beat bytes / copy bandwidth, with the copy bandwidth measured here.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..algorithms import fused_kernel_available, numpy_fallback, verify_chain, verify_chain_batch


def literal_article_round(
    ps: list[list[float]], qs: list[list[float]], proposed: list[int], rand: Callable[[], float]
) -> list[int]:
    """The article's loop, line for line (ps, qs: lists of Python lists)."""

    def sample(d: list[float], u: float) -> int:
        acc = 0.0
        for i in range(len(d)):
            acc += d[i]
            if acc > u:
                return i
        return len(d) - 1

    out: list[int] = []
    gamma = len(proposed)
    for i in range(gamma):
        x = proposed[i]
        p, q = ps[i][x], qs[i][x]
        if rand() < min(1, p / q):
            out.append(x)
            continue
        residual = [max(0.0, pi - qs[i][j]) for j, pi in enumerate(ps[i])]
        z = sum(residual)
        out.append(sample([r / z for r in residual], rand()))
        return out
    out.append(sample(ps[gamma], rand()))
    return out


@dataclasses.dataclass
class BenchRow:
    vocab: int
    gamma: int
    batch: int
    form: str
    rounds_per_s: float
    vs_literal: float
    vs_bound: float  # time per round / bandwidth-bound time per round


def copy_bandwidth(nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Bytes moved (read + write) per second by a large numpy copy; best of ``repeats``."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * nbytes / best


def _inputs(
    rng: np.random.Generator, b: int, g: int, v: int, alpha_mix: float = 0.6
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    # Draft rows close to target rows so that rounds stop at varied positions.
    p = rng.random((b, g + 1, v), dtype=np.float32)
    p **= 4  # peaked-ish
    p /= p.sum(-1, keepdims=True)
    q = p[:, :g] * alpha_mix + (1 - alpha_mix) / v
    q = q.astype(np.float32)
    q /= q.sum(-1, keepdims=True)
    cq = np.cumsum(q[:, :, :], axis=-1)
    x = (cq < rng.random((b, g, 1), dtype=np.float32) * cq[..., -1:]).sum(-1)
    x = np.minimum(x, v - 1)
    return p, q, x.astype(np.int64)


def _time(fn: Callable[[], object], min_time: float = 0.5) -> float:
    fn()  # warm-up
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= min_time:
            return el / n


def run(
    vocabs: Sequence[int] = (32_768, 131_072),
    gammas: Sequence[int] = (4, 8),
    batch: int = 1024,
    *,
    slow_rounds: int = 16,
    seed: int = 0,
    torch_too: bool = True,
    printer: Callable[[str], object] = print,
) -> tuple[float, list[BenchRow]]:
    rng = np.random.default_rng(seed)
    bw = copy_bandwidth()
    printer(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write)")
    rows: list[BenchRow] = []
    for v in vocabs:
        for g in gammas:
            rows += _bench_case(rng, v, g, batch, bw, slow_rounds=slow_rounds, torch_too=torch_too)
    return bw, rows


def _bench_case(
    rng: np.random.Generator, v: int, g: int, batch: int, bw: float, *, slow_rounds: int, torch_too: bool
) -> list[BenchRow]:
    """The forms timed on one (vocabulary, gamma); the inputs are freed on return."""
    p, q, x = _inputs(rng, batch, g, v)
    ua, uf = rng.random((batch, g)), rng.random(batch)
    bound = 2 * v * p.itemsize / bw  # seconds per round at best
    # baseline: literal loop over a few rounds (lists built outside the timing)
    lp = [[row.tolist() for row in p[i]] for i in range(slow_rounds)]
    lq = [[row.tolist() for row in q[i]] for i in range(slow_rounds)]
    lx = [x[i].tolist() for i in range(slow_rounds)]
    r = np.random.default_rng(1)

    def literal() -> None:
        for i in range(slow_rounds):
            literal_article_round(lp[i], lq[i], lx[i], r.random)

    def scalar() -> None:
        for i in range(slow_rounds):
            verify_chain(lp[i], lq[i], lx[i], ua[i], uf[i])

    t_lit = _time(literal, 0.3) / slow_rounds
    t_sca = _time(scalar, 0.3) / slow_rounds
    t_np = _time(lambda: verify_chain_batch(x, q, p, ua, uf), 1.0) / batch
    times = {"literal loop": t_lit, "scalar reference": t_sca, "numpy batch": t_np}
    if fused_kernel_available():  # the same call on the pure-numpy fallback, for comparison
        with numpy_fallback():
            times["numpy batch, no numba"] = _time(lambda: verify_chain_batch(x, q, p, ua, uf), 1.0) / batch
    if torch_too:
        import torch

        from ..algorithms.chain_torch import verify_chain_torch

        tp, tq, tx = torch.from_numpy(p), torch.from_numpy(q), torch.from_numpy(x)
        tua, tuf = torch.from_numpy(ua).float(), torch.from_numpy(uf).float()
        times["torch batch"] = _time(lambda: verify_chain_torch(tx, tq, tp, tua, tuf), 1.0) / batch
    return [BenchRow(v, g, batch, form, 1 / t, t_lit / t, t / bound) for form, t in times.items()]


def print_table(rows: Sequence[BenchRow], printer: Callable[[str], object] = print) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="specverify bench sampler: verification rounds per second (one run, ratios)")
    for col in ("V", "gamma", "B", "form", "rounds/s", "x literal loop", "x bandwidth bound"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r.vocab),
            str(r.gamma),
            str(r.batch),
            r.form,
            f"{r.rounds_per_s:,.0f}",
            f"{r.vs_literal:,.1f}",
            f"{r.vs_bound:,.2f}",
        )
    Console().print(table)
