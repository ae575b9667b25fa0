"""Unit test for the fix (proposed as tests/v1/sample/test_cpu_expand_kernel.py upstream).

``expand_batch_to_tokens`` expands per-request sampling parameters to one value per draft token.
The rejection sampler calls it with float32 temperatures (greedy 0 replaced by 1), float32 top-p
and int32 top-k. On the CPU platform the Triton ``expand_kernel`` is replaced by
``vllm.utils.cpu_triton_utils._expand_kernel_impl``: every dtype must give exactly what
``torch.repeat_interleave`` gives. On 0.32.0 only the int64 case passes (the C++ kernel fills an
int64 copy of any other output and the copy is dropped); with fix.diff applied all pass.

    python -m pytest -q test_cpu_expand_kernel.py
"""

import pytest
import torch
from vllm.platforms import current_platform

pytestmark = pytest.mark.skipif(not current_platform.is_cpu(), reason="the CPU platform's kernel overrides")

CU_NUM_TOKENS = torch.tensor([2, 2, 5, 9], dtype=torch.int32)  # 2, 0, 3 and 4 draft tokens
CASES = {
    "temperature float32": (torch.tensor([0.7, 0.0, 1.5, 0.0], dtype=torch.float32), 0, 1),
    "top_p float32": (torch.tensor([0.8, 1.0, 0.95, 0.5], dtype=torch.float32), 0, 0),
    "top_k int32": (torch.tensor([2, 5, 512, 40], dtype=torch.int32), 0, 0),
    "int64": (torch.tensor([3, 0, 7, 1], dtype=torch.int64), 0, 9),
}


@pytest.fixture(scope="module")
def expand_batch_to_tokens():
    current_platform.import_kernels()
    current_platform.register_triton_kernel_overrides()
    from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens

    return expand_batch_to_tokens


def expected(x, replace_from, replace_to):
    counts = torch.diff(CU_NUM_TOKENS.to(torch.int64), prepend=torch.zeros(1, dtype=torch.int64))
    vals = torch.where(x == replace_from, torch.full_like(x, replace_to), x)
    return torch.repeat_interleave(vals, counts)


@pytest.mark.parametrize("case", CASES)
def test_expand_batch_to_tokens_keeps_values_and_dtype(expand_batch_to_tokens, case):
    x, replace_from, replace_to = CASES[case]
    n = int(CU_NUM_TOKENS[-1])
    for _ in range(3):  # new_empty may hand back memory that already holds the right values once
        torch.empty(n, dtype=x.dtype).fill_(-7)  # recycle allocator memory with a sentinel
        out = expand_batch_to_tokens(x, CU_NUM_TOKENS, n, replace_from=replace_from, replace_to=replace_to)
        assert out.dtype == x.dtype
        torch.testing.assert_close(out, expected(x, replace_from, replace_to), rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES)
def test_the_cpu_kernel_writes_into_its_output(case):
    """The override called directly, as the Triton launch does: the result must be in ``output``."""
    current_platform.import_kernels()
    current_platform.register_triton_kernel_overrides()
    from vllm.utils.cpu_triton_utils import _expand_kernel_impl

    x, replace_from, replace_to = CASES[case]
    out = torch.full((int(CU_NUM_TOKENS[-1]),), -123, dtype=x.dtype)
    _expand_kernel_impl(out, x, CU_NUM_TOKENS, replace_from, replace_to)
    torch.testing.assert_close(out, expected(x, replace_from, replace_to), rtol=0, atol=0)
