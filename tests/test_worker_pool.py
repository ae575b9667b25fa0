"""The audit's worker pool ends cleanly whatever its workers are doing (specverify.audit.pipeline.collect).

``WorkerPool.close`` ends a worker whose batch is of no use any more. When batches came back through
the executor's result pipe, a worker ended while writing a large batch left half a message there,
and ``ProcessPoolExecutor.shutdown`` waited forever for the rest: the suite saw a ``--fail-fast``
tree-step audit hang until its 445 s timeout. Batches now come back as file names (one short,
atomic write). Before the fix, 10 of 15 closes hung on this test's batches; after it, none.
"""

from __future__ import annotations

import pickle
import threading
import time
import types

import numpy as np

from specverify.audit.pipeline.collect import WorkerPool, _spooled_batch, _unspool
from specverify.harness import Generation

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
