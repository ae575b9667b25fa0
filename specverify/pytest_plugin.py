"""pytest plugin: seeds, rates and budgets for specverify checks inside any test suite.

Options: ``--specverify-seed`` (base seed; each test and each xdist worker derives its own,
reproducible seed from it), ``--specverify-alpha``, ``--specverify-budget``.
Fixture ``specverify_seed`` gives a test its derived seed; ``specverify_rng`` a numpy Generator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:  # the plugin loads in every pytest run: the audit stack is imported on first use only
    from .audit import Adapter
    from .harness import ChainSampler
    from .stats import Verdict


def pytest_addoption(parser: pytest.Parser) -> None:
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
def specverify_seed(request: pytest.FixtureRequest) -> int:
    return derive_seed(request.config.getoption("--specverify-seed"), request.node.nodeid)


@pytest.fixture
def specverify_rng(specverify_seed: int) -> np.random.Generator:
    return np.random.default_rng(specverify_seed)


def assert_lossless(
    impl: Adapter | ChainSampler | Callable[..., Any],
    *,
    kind: str = "kernel",
    seed: int = 0,
    alpha: float = 1e-6,
    eps: float = 0.05,
    budget_s: float = 600.0,
    **config: Any,
) -> Verdict:
    """Audit ``impl`` and raise AssertionError with the evidence unless the verdict is PASS.

    ``impl`` is an Adapter, a ChainSampler, or a callable of the given ``kind``
    ('kernel', 'round', 'generator'). Returns the Verdict on PASS. The failure message leads with
    the diagnosis of a FAIL (its likely root cause), then the headline and the evidence; the advice
    of an INCONCLUSIVE names keyword arguments (``rounds=``, ``budget_s=``). An implementation that
    declined every setting (UNSUPPORTED) skips the test with its reason.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's source
    from .audit import Adapter, GeneratorAdapter, KernelAdapter, RoundAdapter, SamplerAdapter, audit
    from .catalogue import ChainSampler
    from .stats import PASS, UNSUPPORTED

    shapes = {"kernel": KernelAdapter, "round": RoundAdapter, "generator": GeneratorAdapter}
    if isinstance(impl, Adapter):
        adapter = impl
    elif isinstance(impl, ChainSampler):
        adapter = SamplerAdapter(impl)
    elif kind not in shapes:
        raise ValueError(
            f"kind={kind!r} is not a shape specverify can audit; pass kind='kernel', 'round' or 'generator' "
            "(docs/adapters.md), or an Adapter"
        )
    elif not callable(impl):
        raise TypeError(f"impl={impl!r} is not callable; pass the {kind} function itself, an Adapter or a ChainSampler")
    else:
        adapter = shapes[kind](impl)
    for name, value, ok in (
        ("alpha", alpha, 0 < alpha < 1),
        ("eps", eps, 0 < eps < 1),
        ("budget_s", budget_s, budget_s > 0),
    ):
        if not ok:
            rng = "a number of seconds > 0" if name == "budget_s" else "a number strictly between 0 and 1"
            raise ValueError(f"{name}={value!r} is out of range; pass {rng}")
    v = audit(adapter, seed=seed, alpha=alpha, eps=eps, budget_s=budget_s, **config)
    if v.status == UNSUPPORTED:
        pytest.skip(v.headline(terms="python"))
    if v.status != PASS:
        head = v.headline(terms="python")
        lines = [*v.diagnosis_lead(), head, *(e for e in v.evidence if e not in head), f"reproduce with seed={seed}"]
        raise AssertionError("\n".join(lines))
    return v


@pytest.fixture
def specverify_audit(request: pytest.FixtureRequest, specverify_seed: int) -> Callable[..., Verdict]:
    """``specverify_audit(impl, kind=...)`` runs assert_lossless with the session's options and a
    per-test seed (distinct and reproducible under pytest-xdist)."""
    alpha = request.config.getoption("--specverify-alpha")
    budget = request.config.getoption("--specverify-budget")

    def run(impl: Adapter | ChainSampler | Callable[..., Any], **kw: Any) -> Verdict:
        __tracebackhide__ = True
        kw.setdefault("seed", specverify_seed % (2**31))
        kw.setdefault("alpha", alpha)
        kw.setdefault("budget_s", budget)
        return assert_lossless(impl, **kw)

    return run
