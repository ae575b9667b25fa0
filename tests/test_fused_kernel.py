"""The compiled final draw (numba) against the pure-numpy fallback, the torch form's own path and
the scalar reference: the same tokens for the same uniforms, on the cases where rounding decides
(zeros, residuals that vanish, u = 0 and u = 1 - 2^-53, vocabularies that do not fill the
two-level table, broadcast rows, float32 and float64 rows, the one-hot rule)."""

import numpy as np
import pytest
import torch

from specverify.algorithms import chain_numpy as CN
from specverify.algorithms import chain_torch as CT
from specverify.algorithms import fused_kernel_available, numpy_fallback
from specverify.algorithms.chain_reference import verify_chain, verify_one_hot

pytestmark = pytest.mark.skipif(
    not fused_kernel_available(), reason="numba not installed: the fallback is the only path"
)


def _case(rng, b, g, v, dtype):
    p = rng.dirichlet(np.full(v, 0.3), size=(b, g + 1))
    q = 0.6 * p[:, :g] + 0.4 * rng.dirichlet(np.full(v, 0.3), size=(b, g))
    p[: b // 8, :, : v // 2] = 0.0  # zeros in p
    p /= p.sum(-1, keepdims=True)
    q[b // 8 : b // 4] = p[b // 8 : b // 4, :g]  # q == p: the residual vanishes
    x = rng.integers(0, v, (b, g))
    bi, gi = np.arange(b)[:, None], np.arange(g)[None, :]
    q[bi, gi, x] = np.maximum(q[bi, gi, x], 1e-3)  # drafts must have q > 0
    q /= q.sum(-1, keepdims=True)
    ua, uf = rng.random((b, g)), rng.random(b)
    ua[:4] = 0.0
    uf[:3], uf[3:6] = 0.0, 1.0 - 2.0**-53
    return p.astype(dtype), q.astype(dtype), x, ua, uf


def _fallback(fn, *a):
    with numpy_fallback():
        return fn(*a)


@pytest.mark.parametrize("v", [2, 5, 128, 129, 1000, 4096 + 7])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_final_draw_equals_every_other_form(v, dtype):
    rng = np.random.default_rng(v)
    b, g = 160, 3
    p, q, x, ua, uf = _case(rng, b, g, v, dtype)
    fused = CN.verify_chain_batch(x, q, p, ua, uf)
    plain = _fallback(CN.verify_chain_batch, x, q, p, ua, uf)
    np.testing.assert_array_equal(fused.tokens, plain.tokens)
    # Broadcast rows that differ per round only in q: the general path, not the shared one.
    fused_b = CN.verify_chain_batch(x, q, np.broadcast_to(p[:1], p.shape), ua, uf)
    plain_b = _fallback(CN.verify_chain_batch, x, q, np.broadcast_to(p[:1], p.shape), ua, uf)
    np.testing.assert_array_equal(fused_b.tokens, plain_b.tokens)
    if dtype == np.float64:  # the scalar spec and torch's own path compute in float64 too
        for i in range(0, b, 7):
            ref = verify_chain(p[i].tolist(), q[i].tolist(), x[i].tolist(), ua[i].tolist(), float(uf[i]))
            assert fused.tokens[i, : fused.num_accepted[i] + 1].tolist() == ref
        t = torch.from_numpy
        args = (t(x), t(q), t(p), t(ua), t(uf))
        tok_fused, _ = CT.verify_chain_torch(*args)
        tok_plain, _ = _fallback(CT.verify_chain_torch, *args)
        np.testing.assert_array_equal(tok_fused.numpy(), fused.tokens)
        np.testing.assert_array_equal(tok_plain.numpy(), fused.tokens)


@pytest.mark.parametrize("v", [5, 129, 1000])
def test_fused_one_hot_draw_equals_every_other_form(v):
    rng = np.random.default_rng(v + 1)
    b, g = 120, 3
    p, _, x, ua, uf = _case(rng, b, g, v, np.float64)
    fused = CN.verify_one_hot_batch(x, p, ua, uf)
    plain = _fallback(CN.verify_one_hot_batch, x, p, ua, uf)
    np.testing.assert_array_equal(fused.tokens, plain.tokens)
    for i in range(0, b, 5):
        ref = verify_one_hot(p[i].tolist(), x[i].tolist(), ua[i].tolist(), float(uf[i]))
        assert fused.tokens[i, : fused.num_accepted[i] + 1].tolist() == ref
    t = torch.from_numpy
    tok, _ = CT.verify_one_hot_torch(t(x), t(p), t(ua), t(uf))
    tok_plain, _ = _fallback(CT.verify_one_hot_torch, t(x), t(p), t(ua), t(uf))
    np.testing.assert_array_equal(tok.numpy(), fused.tokens)
    np.testing.assert_array_equal(tok_plain.numpy(), fused.tokens)


def test_a_numba_that_fails_to_import_leaves_the_numpy_path(tmp_path):
    """numba is imported at the first batch draw (not at start-up); one that is installed but
    fails to import (built against another numpy) must leave the pure-numpy path, as the eager
    import did, not crash the audit."""
    import subprocess
    import sys

    (tmp_path / "numba.py").write_text("raise ImportError('numba built against another numpy')\n")
    code = (
        "import numpy as np\n"
        "from specverify.algorithms import fused_kernel_available, verify_chain_batch\n"
        "rng = np.random.default_rng(0)\n"
        "p = rng.dirichlet(np.ones(8), (4, 3)); q = rng.dirichlet(np.ones(8), (4, 2))\n"
        "out = verify_chain_batch(np.zeros((4, 2), int), q, p, rng.random((4, 2)), rng.random(4))\n"
        "print(fused_kernel_available(), out.tokens.shape)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "(4,", "3)"]
