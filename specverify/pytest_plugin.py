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
    g.addoption("--specverify-budget", type=float, default=60.0, help="seconds per audit")


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
