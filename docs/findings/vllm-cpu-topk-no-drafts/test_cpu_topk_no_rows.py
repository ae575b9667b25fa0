"""Unit test for the guard (proposed beside tests/v1/sample/test_topk_topp_sampler.py upstream).

On the CPU platform without Triton, ``apply_top_k_top_p`` takes ``apply_top_k_only`` when top-p
is unset. A speculative verification step with no draft tokens hands the rejection sampler zero
target rows, so top-k arrives as an empty tensor and ``k.max()`` raises. With fix.diff applied
an empty batch passes through, and a non-empty one is masked as before.

    python -m pytest -q test_cpu_topk_no_rows.py
"""

import pytest
import torch
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_only, apply_top_k_top_p

VOCAB = 16


@pytest.mark.parametrize(
    "fn",
    [apply_top_k_only, lambda logits, k: apply_top_k_top_p(logits, k, None)],
    ids=["apply_top_k_only", "apply_top_k_top_p"],
)
def test_no_rows_pass_through(fn):
    logits = torch.empty(0, VOCAB)
    out = fn(logits, torch.empty(0, dtype=torch.int32))
    assert out.shape == (0, VOCAB)


def test_rows_are_still_masked_to_their_top_k():
    torch.manual_seed(0)
    logits = torch.randn(3, VOCAB)
    k = torch.tensor([1, 4, VOCAB], dtype=torch.int32)
    out = apply_top_k_only(logits.clone(), k.clone())
    kept = torch.isfinite(out).sum(1).tolist()
    assert kept == [1, 4, VOCAB]
    for i, ki in enumerate(k.tolist()):
        top = set(torch.topk(logits[i], ki).indices.tolist())
        assert set(torch.nonzero(torch.isfinite(out[i])).flatten().tolist()) == top
