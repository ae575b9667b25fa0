"""pytest plugin: seeds, rates and budgets for specverify checks inside any test suite.

Options: ``--specverify-seed`` (base seed; each test and each xdist worker derives its own,
reproducible seed from it), ``--specverify-alpha``, ``--specverify-budget``.
Fixture ``specverify_seed`` gives a test its derived seed; ``specverify_rng`` a numpy Generator.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest


def pytest_addoption(parser):
    g = parser.getgroup("specverify")
    g.addoption("--specverify-seed", type=int, default=20261129, help="base seed for specverify checks")
    g.addoption("--specverify-alpha", type=float, default=1e-6, help="false-fail rate per check")
    g.addoption(
        "--specverify-budget",
        type=float,
        default=600.0,
        help="time cap per audit in seconds (reaching it: INCONCLUSIVE)",
    )


def derive_seed(base: int, nodeid: str) -> int:
    """A per-test seed: stable across runs and xdist workers, distinct between tests."""
    h = hashlib.sha256(f"{base}:{nodeid}".encode()).digest()
    return int.from_bytes(h[:8], "little") & (2**63 - 1)


@pytest.fixture
def specverify_seed(request) -> int:
    return derive_seed(request.config.getoption("--specverify-seed"), request.node.nodeid)


@pytest.fixture
def specverify_rng(specverify_seed) -> np.random.Generator:
    return np.random.default_rng(specverify_seed)


def assert_lossless(
    impl,
    *,
    kind: str = "kernel",
    seed: int = 0,
    alpha: float = 1e-6,
    eps: float = 0.05,
    budget_s: float = 600.0,
    **config,
):
    """Audit ``impl`` and raise AssertionError with the evidence unless the verdict is PASS.

    ``impl`` is an Adapter, a ChainSampler, or a callable of the given ``kind``
    ('kernel', 'round', 'generator'). Returns the Verdict on PASS.
    """
    from .audit import GeneratorAdapter, KernelAdapter, RoundAdapter, SamplerAdapter, audit
    from .audit.adapters import Adapter
    from .catalogue import ChainSampler

    if isinstance(impl, Adapter):
        adapter = impl
    elif isinstance(impl, ChainSampler):
        adapter = SamplerAdapter(impl)
    else:
        adapter = {"kernel": KernelAdapter, "round": RoundAdapter, "generator": GeneratorAdapter}[kind](impl)
    v = audit(adapter, seed=seed, alpha=alpha, eps=eps, budget_s=budget_s, **config)
    if v.status != "PASS":
        lines = [v.headline(), *v.evidence, f"reproduce with seed={seed}"]
        raise AssertionError("\n".join(lines))
    return v


@pytest.fixture
def specverify_audit(request, specverify_seed):
    """``specverify_audit(impl, kind=...)`` runs assert_lossless with the session's options and a
    per-test seed (distinct and reproducible under pytest-xdist)."""
    alpha = request.config.getoption("--specverify-alpha")
    budget = request.config.getoption("--specverify-budget")

    def run(impl, **kw):
        kw.setdefault("seed", specverify_seed % (2**31))
        kw.setdefault("alpha", alpha)
        kw.setdefault("budget_s", budget)
        return assert_lossless(impl, **kw)

    return run
