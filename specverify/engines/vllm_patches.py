"""A fix for the vLLM 0.32.0 CPU bug found by the engine audits (docs/findings/vllm-cpu-expand-kernel/README.md).

vLLM's CPU platform replaces the Triton ``expand_kernel`` (per-request temperature, top-k, top-p
expanded to one value per draft token) with ``vllm.utils.cpu_triton_utils._expand_kernel_impl``,
which casts the float32 output to a new int64 tensor, lets the C++ kernel fill that copy, and
drops it: the expanded temperature is uninitialised memory and the target logits that decide
acceptance are divided by it. :func:`expand_kernel_fixed` computes what the Triton kernel does,
into ``output`` itself; :func:`apply_expand_fix` installs it (in the process that registers the
kernel overrides: run the engine in-process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and
``distributed_executor_backend="uni"``, as :class:`~specverify.engines.VLLMOffline` does with
``in_process=True``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily, as vLLM is
    import torch

__all__ = ["expand_kernel_fixed", "apply_expand_fix"]


def expand_kernel_fixed(
    output: torch.Tensor,
    input_val: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    replace_from: float,
    replace_to: float,
    MAX_NUM_TOKENS: int | None = None,  # noqa: N803 (vLLM's parameter name)
) -> None:
    """output[t] = input_val[request of t] (replace_from -> replace_to), like vLLM's Triton kernel."""
    import torch

    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    vals = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    n = int(cu[-1]) if len(cu) else 0
    output[:n].copy_(torch.repeat_interleave(vals, counts).to(output.dtype))


def apply_expand_fix() -> None:
    """Install :func:`expand_kernel_fixed` in place of vLLM's CPU ``_expand_kernel_impl``."""
    import vllm.utils.cpu_triton_utils as cpu_tl

    cpu_tl._expand_kernel_impl = expand_kernel_fixed
