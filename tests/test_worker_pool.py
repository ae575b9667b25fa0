"""The audit's worker pool ends cleanly whatever its workers are doing (specverify.audit.pipeline.collect).

``WorkerPool.close`` ends a worker whose batch is of no use any more. When batches came back through
the executor's result pipe, a worker ended while writing a large batch left half a message there,
and ``ProcessPoolExecutor.shutdown`` waited forever for the rest: the suite saw a ``--fail-fast``
tree-step audit hang until its 445 s timeout. Batches now come back as file names (one short,
atomic write). Before the fix, 10 of 15 closes hung on this test's batches; after it, none.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
import types

import numpy as np
import pytest

from specverify.audit.pipeline.collect import WorkerPool, _spooled_batch, _unspool
from specverify.errors import ImplementationError
from specverify.harness import Generation, call_in_fork

BIG = 4_000_000  # tokens per batch: 128 MB pickled, far more than a pipe holds


class _BigBatches:
    def generate(self, pair, n, gamma, rng, settings, **kw):
        time.sleep(rng.random() * 0.05)
        z = np.zeros(BIG, dtype=np.int64)
        return Generation(tokens=z, row=z, position=z, sequence=z, num_accepted=z[:10], rounds=10)


def test_closing_while_workers_send_large_batches_never_hangs():
    unit = types.SimpleNamespace(index=0, settings=None, length=None)
    cfg = types.SimpleNamespace(seed=0, gamma=4)
    rng = np.random.default_rng(0)
    for _ in range(5):
        pool = WorkerPool(2, _BigBatches(), {0: None})
        pool.keep_busy(cfg, [(unit, k, 10) for k in range(2)])
        time.sleep(0.03 + 0.1 * rng.random())  # mid-batch or mid-write, as it falls
        closing = threading.Thread(target=pool.close, daemon=True)
        closing.start()
        closing.join(30)
        if closing.is_alive():  # leave no worker behind before failing
            for proc in list(getattr(pool.ex, "_processes", {}).values()):
                proc.kill()
        assert not closing.is_alive(), "WorkerPool.close hung on a worker ended mid-result"


def test_a_batch_crosses_the_pipe_as_a_short_name_and_comes_back_whole(tmp_path):
    z = np.arange(1000, dtype=np.int64)
    gen = Generation(tokens=z, row=z, position=z, sequence=z, num_accepted=z[:3], rounds=3)
    # the worker side reads only WorkerPool._jobs
    WorkerPool._jobs = {"adapter": types.SimpleNamespace(generate=lambda *a, **k: gen), "pairs": {0: None}}
    path = _spooled_batch(str(tmp_path), 0, None, types.SimpleNamespace(seed=0, gamma=4), 0, 3, None)
    assert len(pickle.dumps(path)) < 512  # well under PIPE_BUF (4096): one atomic write
    back = _unspool(path)
    assert np.array_equal(back.tokens, z) and back.rounds == 3
    assert not list(tmp_path.iterdir()), "the file is removed once read"


class _Remembers:
    """An implementation with a state across calls: each batch's tokens depend on how many batches its
    process computed before (like a context never reset between sequences)."""

    calls = 0

    def generate(self, pair, n, gamma, rng, settings, **kw):
        _Remembers.calls += 1
        z = rng.integers(0, 8, n) + 100 * _Remembers.calls
        return Generation(tokens=z, row=z, position=z, sequence=z, num_accepted=z[:1], rounds=n)


def _batches(pool, order):
    """Batch k of one unit for each k in ``order``, scheduled ahead in that order; returned by k."""
    unit = types.SimpleNamespace(index=0, settings=None, length=None)
    cfg = types.SimpleNamespace(seed=0, gamma=4)
    try:
        pool.keep_busy(cfg, [(unit, k, 5) for k in order])
        return {k: pool.get(unit, cfg, k, 5).tokens.tolist() for k in order}
    finally:
        pool.close()


def test_a_batch_does_not_depend_on_what_its_process_computed_before(monkeypatch):
    """Isolated batches (each in a fresh fork): the same tokens for batch k whatever the number of
    workers and the order the batches are scheduled in. Without the fork, the workers keep the
    state (tried: this test then fails, and two runs with 2 workers differed for a real stateful
    step, user_impls.stateful:no_reset)."""
    monkeypatch.setattr(_Remembers, "calls", 0)
    order = [0, 1, 2, 3, 4, 5]
    runs = [
        _batches(WorkerPool(2, _Remembers(), {0: None}), order),
        _batches(WorkerPool(3, _Remembers(), {0: None}), order[::-1]),
        _batches(WorkerPool(1, _Remembers(), {0: None}, isolate=True), [3, 0, 5, 1, 4, 2]),
    ]
    assert runs[0] == runs[1] == runs[2]
    assert all(t[0] // 100 == 1 for t in runs[0].values())  # every batch is its process's first call
    assert _Remembers.calls == 0, "isolated batches never call the implementation in this process"
    serial = _batches(WorkerPool(1, _Remembers(), {0: None}), order)  # in this process: the state carries
    assert [t[0] // 100 for t in serial.values()] == [1, 2, 3, 4, 5, 6]


class _EndsItsProcess:
    def __init__(self, how):
        self.how = how

    def generate(self, pair, n, gamma, rng, settings, **kw):
        if self.how == "exit":
            os._exit(3)
        if self.how == "signal":
            os.kill(os.getpid(), signal.SIGKILL)  # a native crash, the OOM killer
        raise ValueError("a fault of the harness, not a finding")


@pytest.mark.parametrize(("how", "said"), [("exit", "exit status 3"), ("signal", "killed by SIGKILL")])
def test_an_implementation_that_ends_its_process_is_a_finding_not_a_broken_pool(how, said):
    """Before isolation, an implementation that ended its process broke the executor
    (BrokenProcessPool, a crash of the audit); now it is an ImplementationError naming how it ended."""
    unit = types.SimpleNamespace(index=2, settings=None, length=None)
    pool = WorkerPool(2, _EndsItsProcess(how), {2: None})
    try:
        out = pool.get(unit, types.SimpleNamespace(seed=0, gamma=4), 7, 5)
        again = pool.get(unit, types.SimpleNamespace(seed=0, gamma=4), 8, 5)  # the pool still works
    finally:
        pool.close()
    assert isinstance(out, ImplementationError) and isinstance(again, ImplementationError)
    assert str(out) == (
        f"the process sampling batch 7 of unit 2 ended inside the implementation ({said}) before returning; "
        "an implementation must return or raise, never end its process"
    )


def test_an_exception_outside_the_implementation_is_raised_in_the_parent():
    pool = WorkerPool(2, _EndsItsProcess("raise"), {0: None})
    unit = types.SimpleNamespace(index=0, settings=None, length=None)
    try:
        with pytest.raises(ValueError, match="a fault of the harness"):
            pool.get(unit, types.SimpleNamespace(seed=0, gamma=4), 0, 5)
    finally:
        pool.close()


def _bump():
    _Remembers.calls += 1
    return _Remembers.calls


def test_a_call_in_a_fork_returns_its_value_and_leaves_this_process_untouched(monkeypatch):
    monkeypatch.setattr(_Remembers, "calls", 0)
    assert [call_in_fork(_bump, what="x") for _ in range(3)] == [1, 1, 1]
    assert _Remembers.calls == 0
    with pytest.raises(KeyError, match="raised in the fork"):
        call_in_fork(lambda: {}["raised in the fork"], what="x")
    with pytest.raises(ImplementationError) as e:
        call_in_fork(os._exit, 4, what="running the exact check 'x'")
    assert str(e.value) == (
        "the process running the exact check 'x' ended inside the implementation (exit status 4) before "
        "returning; an implementation must return or raise, never end its process"
    )


def _after(seconds: float, value: object) -> object:
    time.sleep(seconds)
    return value


def test_forked_jobs_come_back_in_their_order_and_closing_stops_the_rest():
    """LM units run this way: at most ``workers`` forks at once, values in the jobs' order (job 0
    ends last of the first three), an ended fork as its finding, and the forks still running
    killed when the consumer stops (job 3 would take a minute; it leaves no process behind)."""
    from specverify.harness._isolation import forked_in_order

    jobs = [lambda: _after(0.5, "zero"), lambda: "one", lambda: os._exit(4), lambda: _after(60, "three")]
    t = time.monotonic()
    outs = forked_in_order(jobs, workers=3, what=lambda i: f"sampling unit {i}")
    got = [next(outs) for _ in range(3)]
    assert got[:2] == ["zero", "one"] and isinstance(got[2], ImplementationError)
    assert "the process sampling unit 2 ended inside the implementation (exit status 4)" in str(got[2])
    outs.close()  # kills job 3 and reaps it: without the kill this waits out its minute
    assert time.monotonic() - t < 30
    with pytest.raises(ZeroDivisionError):
        list(forked_in_order([lambda: 1 / 0], workers=2, what=str))
