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
