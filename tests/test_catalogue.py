"""Every catalogued bug is caught at its documented budget; every decoy passes (fixed seeds).

The budget is the audit's default plan (alpha 1e-6, beta 1e-3, eps 0.05, V = 64, gamma 4, the
three default settings); `specverify selftest` prints the samples each entry used.
"""

import pytest

from specverify.audit import SamplerAdapter, audit
from specverify.catalogue import BUGS, DECOYS


def test_catalogue_size_and_documentation():
    assert len(BUGS) >= 25
    for cls in BUGS:
        assert cls.__doc__ and len(cls.__doc__) > 40 and not cls.exact, cls.name
    names = [c.name for c in BUGS + DECOYS]
    assert len(names) == len(set(names))
    for ref in (
        "transformers#28508",
        "transformers#32867",
        "transformers#47932",
        "vllm#9834",
        "vllm-ascend#16370",
        "vllm#47386",
        "vllm-ascend#13470",
        "vllm#42744",
        "sglang#36173",
        "sglang#35771",
        "DeepSpec#31",
        "rtp-llm#1295",
    ):
        assert any(ref in (c.source or "") for c in BUGS), ref


@pytest.mark.parametrize("cls", BUGS, ids=lambda c: c.name)
def test_bug_is_caught(cls):
    v = audit(SamplerAdapter(cls()), seed=0, diagnose=False)  # the diagnosis of each: scripts/diagnosis_study.py
    assert v.status == "FAIL", v.headline()
    assert v.evidence


@pytest.mark.parametrize("cls", DECOYS, ids=lambda c: c.name)
def test_decoy_passes(cls):
    v = audit(SamplerAdapter(cls()), seed=0)
    assert v.status == "PASS", v.headline()
    assert v.eps is not None and v.eps <= 0.05


def test_the_numpy_bfloat16_cast_is_torchs():
    """The bf16-draft bug rounds in numpy (so its diagnosis needs no torch); it must round as torch
    does: to float32 first, then to the nearest bfloat16 with ties to even."""
    import numpy as np
    import torch

    from specverify.catalogue.bugs import bfloat16_round

    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(24.0, 8.0, 200_000), rng.normal(0, 1e-3, 1_000), [1 + 2**-8, 1 + 3 * 2**-8]])
    x = np.concatenate([x, 1 + 2**-8 + np.array([2**-25, -(2**-25)])])  # float64 near a bfloat16 tie
    want = torch.tensor(x).to(torch.bfloat16).double().numpy()
    assert np.array_equal(bfloat16_round(x), want)
    # a rounding that truncates instead (the usual slip) differs from torch on these values
    trunc = (x.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    assert not np.array_equal(trunc, want)
