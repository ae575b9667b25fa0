"""vLLM's rejection-sampling kernels, isolated, in specverify's kernel shape.

    specverify audit --kernel specverify.engines.vllm_kernels:cpu_rejection_kernel --full-rule
    specverify audit --kernel specverify.engines.vllm_kernels:cpu_rejection_kernel_one_hot --one-hot

(run in the vLLM venv). These call the kernels vLLM's CPU platform installs in place of its Triton
ones (``vllm/platforms/cpu.py`` maps ``rejection_random_sample_kernel`` and
``sample_recovered_tokens_kernel`` to ``torch.ops._C.*_impl``) with the arguments vLLM's
``rejection_sample`` gives them: flattened [B * g] draft ids, [B * g, V] float32 draft and target
rows, one float64 uniform per draft position (cast to float32 by vLLM's wrapper), one exponential
noise row per request (``inv_q = 1 / q``, q ~ Exp(1), shared by the request's positions, since at
most one replacement per request is used), and a bonus token per request sampled from the last
target row (vLLM's ordinary sampler). ``one_hot`` is vLLM's ``NO_DRAFT_PROBS`` path (n-gram drafts
and greedy draft models: the draft is treated as a point mass).

A kernel that is exact turns draft rows into the target's law; auditing these in the kernel shape
tells whether a FAIL of the whole engine comes from the kernels or from around them (the
drafter, the logits fed to the kernels, the scheduler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # torch and vLLM are imported lazily
    import torch

__all__ = ["cpu_rejection_kernel", "cpu_rejection_kernel_one_hot", "triton_rejection_kernel"]


def _ops() -> Any:
    import torch
    from vllm.platforms import current_platform

    if not hasattr(torch.ops._C, "rejection_random_sample_kernel_impl"):
        current_platform.import_kernels()
    return torch.ops._C


def _inputs(
    draft_tokens: npt.ArrayLike,
    draft_probs: npt.ArrayLike | None,
    target_probs: npt.ArrayLike,
    generator: np.random.Generator,
) -> dict[str, Any]:
    import torch

    x = torch.as_tensor(np.array(draft_tokens, dtype=np.int64))  # [B, g]
    p = torch.as_tensor(np.array(target_probs, dtype=np.float32))  # [B, g + 1, V] (a copy: inputs are read-only)
    b, g = x.shape
    v = p.shape[-1]
    q = None if draft_probs is None else torch.as_tensor(np.array(draft_probs, dtype=np.float32))
    tg = torch.Generator().manual_seed(int(generator.integers(2**62)))
    return {
        "x": x.reshape(-1).contiguous(),
        "target": p[:, :g].reshape(b * g, v).contiguous(),
        "draft": None if q is None else q.reshape(b * g, v).contiguous(),
        "last": p[:, g].contiguous(),
        "cu": torch.arange(1, b + 1, dtype=torch.int64) * g,  # cumulative draft counts per request
        "uniform": torch.rand(b * g, dtype=torch.float64, generator=tg),
        "inv_q": torch.empty(b, v, dtype=torch.float32).exponential_(generator=tg).reciprocal(),
        "bonus": torch.multinomial(p[:, g], 1, generator=tg).reshape(b),
        "shape": (b, g, v),
    }


def _run(
    draft_tokens: npt.ArrayLike,
    draft_probs: npt.ArrayLike | None,
    target_probs: npt.ArrayLike,
    generator: np.random.Generator,
) -> npt.NDArray[np.int64]:
    import torch

    ops = _ops()
    a = _inputs(draft_tokens, draft_probs, target_probs, generator)
    b, g, v = a["shape"]
    no_q = a["draft"] is None
    q = a["draft"] if not no_q else torch.empty(0, dtype=torch.float32)
    recovered = torch.empty(b * g, dtype=torch.int64)
    ops.sample_recovered_tokens_kernel_impl(recovered, a["cu"], a["x"], q, a["target"], a["inv_q"], v, no_q)
    out = torch.full((b, g + 1), -1, dtype=torch.int64)
    greedy = torch.zeros(b, dtype=torch.bool)
    ops.rejection_random_sample_kernel_impl(
        out, a["cu"], a["x"], q, a["target"], a["bonus"], recovered, a["uniform"].to(torch.float32), greedy, g, v, no_q
    )
    return out.numpy()


def cpu_rejection_kernel(
    draft_tokens: npt.ArrayLike, draft_probs: npt.ArrayLike, target_probs: npt.ArrayLike, generator: np.random.Generator
) -> npt.NDArray[np.int64]:
    """vLLM's CPU kernels with draft probabilities (``draft_sample_method="probabilistic"``)."""
    return _run(draft_tokens, draft_probs, target_probs, generator)


def cpu_rejection_kernel_one_hot(
    draft_tokens: npt.ArrayLike,
    draft_probs: npt.ArrayLike | None,
    target_probs: npt.ArrayLike,
    generator: np.random.Generator,
) -> npt.NDArray[np.int64]:
    """vLLM's CPU kernels without draft probabilities (n-gram and greedy drafts)."""
    return _run(draft_tokens, None, target_probs, generator)


def triton_rejection_kernel(
    draft_tokens: npt.ArrayLike,
    draft_probs: npt.ArrayLike | None,
    target_probs: npt.ArrayLike,
    generator: np.random.Generator,
) -> npt.NDArray[np.int64]:
    """The same call on a CUDA device through vLLM's own ``rejection_sample`` (Triton kernels);
    used by gpu_runs/vllm_engines.py. Needs a GPU build of vLLM."""
    import torch
    from vllm.v1.sample.rejection_sampler import rejection_sample

    a = _inputs(draft_tokens, draft_probs, target_probs, generator)
    b, g, v = a["shape"]
    dev = torch.device("cuda")
    meta = _greedy_free_metadata(b, dev)
    logits = a["target"].log().to(dev)  # rejection_sample takes logits; log p gives p back
    out = rejection_sample(
        a["x"].to(dev),
        [g] * b,
        g,
        a["cu"].to(dev),
        None if a["draft"] is None else a["draft"].to(dev),
        logits,
        a["bonus"].reshape(b, 1).to(dev),
        meta,
    )
    tokens: npt.NDArray[np.int64] = out.to(torch.int64).cpu().numpy()
    return tokens


def _greedy_free_metadata(b: int, device: torch.device) -> Any:
    """A SamplingMetadata with every request random at temperature 1 and no filters."""
    import torch
    from vllm.v1.sample.metadata import SamplingMetadata

    return SamplingMetadata(
        temperature=torch.ones(b, device=device),
        all_greedy=False,
        all_random=True,
        top_p=None,
        top_k=None,
        generators={},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=None,
        presence_penalties=None,
        repetition_penalties=None,
        output_token_ids=[[] for _ in range(b)],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=None,
    )
