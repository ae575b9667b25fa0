"""Collect: sample one audit unit in seeded batches, with early stopping, a time cap, worker
processes and checkpoints.

Batch k of unit u draws from ``numpy.random.default_rng([seed, u, k])``, so what is collected is a
function of the implementation, the seed and the options only. An implementation may also keep a
state across calls (a cache, a context): so that this state cannot make a batch depend on which
batches ran before it in the same process, batches run *isolated* with worker processes
(``workers > 1``, or ``isolate_batches``, which the CLI sets wherever forking is safe): each in a
fresh fork of a worker that never calls the implementation itself, so each starts from the state
the implementation had when the audit began. Isolated, ``workers=N`` for any N and a resumed run
give the same batches. In this process (``workers=1``, the default of the Python API) the batches
run one after another in batch order: the same on every run, but a state the implementation keeps
carries from one batch to the next. Sampling stops when (in this order) the implementation fails, the
implementation declines the setting (UNSUPPORTED: its first batch says so, and no time is spent
on the unit after it), the e-process crosses 1/alpha_seq (FAIL), ``rounds`` are collected
(``--rounds``), the plan is met (every stratum holds the planned tokens), or the time cap passes
(the unit stays incomplete and the verdict is INCONCLUSIVE, never a PASS).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import multiprocessing
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from ...errors import ImplementationError, UnsupportedSettingError
from ...harness import Generation, concat_generations
from ...harness._isolation import ended_inside, fork_to_file, load_outcome, write_outcome
from ...stats import DEFAULT_BINS, MultinomialEProcess, StreamLaw
from .plan import smallest_stratum

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ...dists import SamplingSettings
    from ..sources.adapters import Adapter
    from .config import AuditConfig
    from .plan import AuditUnit

#: what one batch gives: the tokens generated, or the finding that stopped it
Batch = Union["Generation", ImplementationError]

__all__ = ["UnitSample", "collect_unit", "first_batches", "WorkerPool"]


@dataclasses.dataclass
class UnitSample:
    """What has been collected for one unit (a checkpoint stores these)."""

    gen: Generation = dataclasses.field(default_factory=Generation.empty)
    next_batch: int = 0
    eprocess: MultinomialEProcess = dataclasses.field(default_factory=lambda: MultinomialEProcess(DEFAULT_BINS))
    stopped_early: bool = False
    complete: bool = False
    error: str | None = None
    unsupported: str | None = None
    seconds: float = 0.0

    @property
    def units(self) -> int:
        """Rounds (kernels, catalogue) or sequences (round steps, generators) collected."""
        return int(self.gen.sequence.max()) + 1 if len(self.gen.sequence) else 0


class WorkerPool:
    """Batches computed in forked worker processes, kept busy across units.

    A unit's batches are absorbed in batch order whichever process computed them, so what a unit
    collects is the same for any number of workers. Only the scheduling looks ahead: while a unit
    still needs batches the workers compute its next ones; once the batches in flight are expected
    to meet its plan, idle workers start the next units' first batches instead of waiting. A batch
    computed for nothing (the unit stopped sooner) costs time, never the verdict, because each batch
    runs in a fresh fork of its worker (:func:`_spooled_batch`): the workers themselves never call
    the implementation, so what one computed before cannot leak into the next batch it takes.
    ``workers=1`` with ``isolate=False`` computes every batch in this process instead.
    """

    _jobs: dict[str, Any] = {}

    def __init__(self, workers: int, adapter: Adapter, pairs: dict[int, Any], *, isolate: bool = False) -> None:
        self.workers = workers
        WorkerPool._jobs = {"adapter": adapter, "pairs": pairs}
        processes = workers > 1 or isolate
        ctx = multiprocessing.get_context("fork")
        self.ex = concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) if processes else None
        self.spool = tempfile.mkdtemp(prefix="specverify-batches-") if processes else ""
        self.inflight: dict[tuple[int, int], concurrent.futures.Future[str]] = {}
        self.orphans: list[concurrent.futures.Future[str]] = []  # running batches no unit needs

    def get(self, unit: AuditUnit, cfg: AuditConfig, k: int, n: int) -> Batch:
        """Batch ``k`` (of ``n`` rounds or sequences) of ``unit``: computed ahead, or now."""
        fut = self.inflight.pop((unit.index, k), None)
        if fut is None:
            if self.ex is None:
                return _batch(unit.index, unit.settings, cfg, k, n, unit.length)
            fut = self._submit(unit, cfg, k, n)
        return _unspool(fut.result())

    def _submit(self, unit: AuditUnit, cfg: AuditConfig, k: int, n: int) -> concurrent.futures.Future[str]:
        assert self.ex is not None
        return self.ex.submit(_spooled_batch, self.spool, unit.index, unit.settings, cfg, k, n, unit.length)

    def keep_busy(self, cfg: AuditConfig, wanted: Iterable[tuple[AuditUnit, int, int]]) -> None:
        """Start the first of ``wanted`` (unit, batch, size), in order, until every worker has one."""
        if self.ex is None:
            return
        for unit, k, n in wanted:
            if sum(not f.done() for f in [*self.inflight.values(), *self.orphans]) >= self.workers:
                return
            if (unit.index, k) not in self.inflight:
                self.inflight[unit.index, k] = self._submit(unit, cfg, k, n)

    def drop(self, unit: AuditUnit) -> None:
        """``unit`` is collected: its batches still in flight are of no use."""
        for key in [key for key in self.inflight if key[0] == unit.index]:
            if not (f := self.inflight.pop(key)).cancel():
                self.orphans.append(f)  # already running: it still occupies a worker

    def close(self) -> None:
        """Stop the workers, none left behind. A batch still running was computed ahead for nothing:
        its worker is ended rather than waited for. Left running, it could block forever writing its
        result to a pipe that the exiting parent no longer reads, holding the caller's stdout open.
        Ending a worker is safe because a result crosses the pipe as a file name (``_spooled_batch``):
        one write shorter than PIPE_BUF, so it is never cut in half. A whole batch sent through the
        pipe could be, and the executor then waited forever for the rest of it (seen in the suite:
        ``--fail-fast`` ended a worker mid-write and ``shutdown`` never returned)."""
        if self.ex is None:
            return
        # cancel() drops a batch not yet started; what is left and not done is running
        running = [f for f in [*self.inflight.values(), *self.orphans] if not f.cancel() and not f.done()]
        if running:
            for proc in list(getattr(self.ex, "_processes", {}).values()):  # no public way before 3.14
                proc.terminate()
        self.ex.shutdown(wait=True, cancel_futures=True)  # idle workers exit at once
        shutil.rmtree(self.spool, ignore_errors=True)


def _batch(
    unit_index: int, settings: SamplingSettings, cfg: AuditConfig, k: int, n: int, length: int | None = None
) -> Batch:
    """One seeded batch; runs in the parent or in a forked worker. Errors come back as values."""
    adapter, pair = WorkerPool._jobs["adapter"], WorkerPool._jobs["pairs"][unit_index]
    rng = np.random.default_rng([cfg.seed, unit_index, k])
    try:
        kw = {"length": length} if length else {}  # a long unit's sequences (round steps, generators)
        gen: Generation = adapter.generate(pair, n, cfg.gamma, rng, settings, **kw)
        return gen
    except ImplementationError as exc:
        return exc


def _spooled_batch(spool: str, *args: Any) -> str:
    """:func:`_batch` in a fresh fork of this worker (``harness._isolation``): the batch pickled into
    a file in ``spool``, its name returned (short enough to cross the result pipe in one atomic write;
    :meth:`WorkerPool.close`). The worker never calls the implementation itself, so a state the
    implementation keeps across calls cannot carry into another batch."""
    fd, path = tempfile.mkstemp(dir=spool, suffix=".batch")
    os.close(fd)
    if (how := fork_to_file(functools.partial(_batch, *args), path)) is not None:
        unit_index, k = args[0], args[3]
        write_outcome(path, ended_inside(f"sampling batch {k} of unit {unit_index}", how))
    return path


def _unspool(path: str) -> Batch:
    batch: Batch = load_outcome(path)
    return batch


def _sizes(unit: AuditUnit, cfg: AuditConfig, sample: UnitSample, wave: int) -> list[int]:
    """Batch sizes of the next wave: full batches, the last one cut at ``rounds``."""
    out: list[int] = []
    have, rounds = sample.units, unit.rounds_cap(cfg.rounds)
    for _ in range(wave):
        n = unit.batch
        if rounds:
            n = min(n, rounds - have)
        if n <= 0:
            break
        out.append(n)
        have += n
    return out


def collect_unit(
    unit: AuditUnit,
    pair: Any,
    cfg: AuditConfig,
    need: int,
    sample: UnitSample,
    pool: WorkerPool,
    *,
    deadline: float,
    on_batch: Callable[[UnitSample], None] | None = None,
    ahead: Sequence[tuple[AuditUnit, int, int]] = (),
) -> UnitSample:
    """Sample ``unit`` until a stop condition holds (module docstring); returns ``sample`` updated.
    ``ahead``: the next units' first batches, for workers the unit no longer needs."""
    # laws that depend on the history (penalties) or on the whole prefix are per token: no e-process
    tabled = getattr(pair, "tabled", True) and not unit.settings.uses_history
    law = StreamLaw(pair.target_table(unit.settings)) if tabled else None
    t0 = time.monotonic()
    while not (sample.complete or sample.stopped_early or sample.error or sample.unsupported):
        sizes = _sizes(unit, cfg, sample, min(pool.workers, _batches_left(unit, sample, need)))
        if not sizes or (cfg.max_units and sample.units >= cfg.max_units):
            sample.complete = True
            break
        if time.monotonic() > deadline:
            break
        k = sample.next_batch
        pool.keep_busy(cfg, [*((unit, k + i, n) for i, n in enumerate(sizes)), *ahead])
        if _absorb(sample, pool.get(unit, cfg, k, sizes[0]), unit, law, need, cfg):
            break
        if on_batch:
            on_batch(sample)
    pool.drop(unit)
    sample.seconds += time.monotonic() - t0
    return sample


def _batches_left(unit: AuditUnit, sample: UnitSample, need: int) -> int:
    """Batches the unit is expected to need still, from its thinnest stratum's yield so far (at
    least 1; a guess that only steers which batches the workers compute first)."""
    thin = smallest_stratum(sample.gen.position, unit.strata_rule) if sample.next_batch else 0
    if thin <= 0:
        return 1 << 30
    return max(1, -(-(need - thin) * sample.next_batch // thin))


def first_batches(units: Sequence[AuditUnit], cfg: AuditConfig, workers: int) -> list[tuple[AuditUnit, int, int]]:
    """The first ``workers`` batches of each of ``units`` (not yet sampled), as (unit, batch, size)."""
    return [(u, k, n) for u in units for k, n in enumerate(_sizes(u, cfg, UnitSample(), workers))]


def _absorb(
    sample: UnitSample, out: Batch, unit: AuditUnit, law: StreamLaw | None, need: int, cfg: AuditConfig
) -> bool:
    """Add one batch; True when sampling of this unit stops."""
    sample.next_batch += 1
    if isinstance(out, UnsupportedSettingError):
        sample.unsupported = str(out)
        return True
    if isinstance(out, ImplementationError):
        sample.error = str(out)
        return True
    sample.gen = concat_generations([sample.gen, out]) if len(sample.gen.tokens) else out
    if law is not None:
        cell_of, mass, _ = law.cells("sorted_mass", DEFAULT_BINS)
        sample.eprocess.update(cell_of[out.row, out.tokens], mass[out.row], groups=out.row)
        if sample.eprocess.rejects(unit.family.alpha_sequential):
            sample.stopped_early = True
            return True
    if rounds := unit.rounds_cap(cfg.rounds):
        sample.complete = sample.units >= rounds
    else:
        sample.complete = smallest_stratum(sample.gen.position, unit.strata_rule) >= need
    return sample.complete
