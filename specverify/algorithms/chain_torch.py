"""Chain speculative decoding in torch, device-agnostic, for the model runners.

Same rules, shapes and uniform contract as :mod:`.chain_numpy` (see :mod:`.chain_reference` for
the math). Tensors stay on their device; uniforms are passed in (draw them with a seeded
``torch.Generator`` on the same device). On CPU the tokens equal the numpy and scalar forms
bit for bit; on GPU ``cumsum`` is a parallel scan, so a uniform within an ulp of a CDF breakpoint
may land on the neighbouring token.

On CPU, with numba present, the final draw goes to the compiled single pass of :mod:`._fused`
(zero-copy views of the tensors; float64 sums as in the numpy form): torch's per-op overhead and
temporaries cost several times more there, and the tokens are the same.
"""

from __future__ import annotations

import numpy as np
import torch

from ..dists.torch_ops import inverse_cdf_sample_torch
from . import _fused

__all__ = [
    "verify_chain_torch",
    "verify_greedy_torch",
    "verify_sample_and_match_torch",
    "verify_one_hot_torch",
]


def _first_false(accept: torch.Tensor) -> torch.Tensor:
    g = accept.shape[1]
    if g == 0:  # nothing drafted: the round is a plain target step
        return torch.zeros(accept.shape[0], dtype=torch.long, device=accept.device)
    rejected = ~accept
    idx = torch.argmax(rejected.to(torch.int8), dim=1)
    return torch.where(rejected.any(dim=1), idx, torch.full_like(idx, g))


def _emit(x: torch.Tensor, n_acc: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
    b, g = x.shape
    pos = torch.arange(g, device=x.device)[None, :]
    head = torch.where(pos < n_acc[:, None], x, torch.full_like(x, -1))
    tokens = torch.cat([head, torch.full((b, 1), -1, dtype=x.dtype, device=x.device)], dim=1)
    return tokens.scatter(1, n_acc[:, None], final[:, None].to(x.dtype))


def _expand(t: torch.Tensor, b: int) -> torch.Tensor:
    return t.expand(b, *t.shape[1:]) if t.shape[0] == 1 else t


def _rows(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """t[b, idx[b]] for every b, without copying t: rows shared by all rounds (a broadcast view)
    are selected from the single copy."""
    if t.shape[0] == 1 or t.stride(0) == 0:
        return t[0].index_select(0, idx)
    b, n, v = t.shape
    ar = torch.arange(b, device=t.device)
    return t.reshape(b * n, v).index_select(0, ar * n + idx)


def _fused_ok(*ts: torch.Tensor) -> bool:
    return _fused.fused_kernel_available() and all(
        t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) for t in ts
    )


def _fused_final(
    p: torch.Tensor,
    q: torch.Tensor | None,
    n_acc: torch.Tensor,
    u_final: torch.Tensor,
    zero_tok: torch.Tensor | None = None,
) -> torch.Tensor:
    def d(t: torch.Tensor | None) -> np.ndarray | None:
        return None if t is None else t.detach().numpy()

    out = _fused.final_draw_fused(
        p.detach().numpy(), d(q), n_acc.detach().numpy(), u_final.detach().double().numpy(), zero_tok=d(zero_tok)
    )
    return torch.from_numpy(out)


def verify_chain_torch(
    draft_tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor, u_accept: torch.Tensor, u_final: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Full rule. draft_tokens [B, g] long; q [B, g, V]; p [B, g + 1, V]; u_accept [B, g]; u_final [B].

    Returns (tokens [B, g + 1] padded with -1, num_accepted [B]).
    """
    x = draft_tokens.long()
    b, g = x.shape
    p, q = _expand(p, b), _expand(q, b)
    px = torch.gather(p[:, :g], 2, x[..., None]).squeeze(-1)  # [B, g]
    qx = torch.gather(q, 2, x[..., None]).squeeze(-1)  # [B, g]
    if bool((qx <= 0).any()):
        from ..errors import InvalidDraftError

        raise InvalidDraftError("a draft token has q = 0; pass the distribution it was sampled from")
    n_acc = _first_false(u_accept.to(p.dtype) < px / qx)
    if g and _fused_ok(p, q) and q.dtype == p.dtype:
        return _emit(x, n_acc, _fused_final(p, q, n_acc, u_final)), n_acc
    # The row where each round stopped (only these rows are read); index_select on the flattened
    # rows is much faster than advanced indexing on CPU.
    p_k = _rows(p, n_acc)  # [B, V]
    if g:
        q_k = _rows(q, torch.clamp(n_acc, max=g - 1))  # [B, V]; unused for bonus rows
        w = (p_k - q_k).clamp_(min=0.0)
        keep_p = (n_acc == g)[:, None] | (w.amax(dim=1, keepdim=True) <= 0)  # bonus, or a vanished residual
        w = torch.where(keep_p, p_k, w)
    else:
        w = p_k
    final = inverse_cdf_sample_torch(w, u_final)
    return _emit(x, n_acc, final), n_acc


def verify_one_hot_torch(
    draft_tokens: torch.Tensor, p: torch.Tensor, u_accept: torch.Tensor, u_final: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot rule; p [B, g + 1, V]."""
    x = draft_tokens.long()
    b, g = x.shape
    p = _expand(p, b)
    px = torch.gather(p[:, :g], 2, x[..., None]).squeeze(-1)
    n_acc = _first_false(u_accept.to(p.dtype) < px)
    ar = torch.arange(b, device=p.device)
    x_pad = torch.cat([x, x.new_zeros((b, 1))], dim=1)[ar, n_acc]
    if g and _fused_ok(p):
        return _emit(x, n_acc, _fused_final(p, None, n_acc, u_final, x_pad)), n_acc
    w = p[ar, n_acc].clone()
    stop = n_acc < g
    w[ar[stop], x_pad[stop]] = 0.0
    final = inverse_cdf_sample_torch(w, u_final)
    return _emit(x, n_acc, final), n_acc


def verify_greedy_torch(draft_tokens: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification; argmax ties to the lowest id."""
    x = draft_tokens.long()
    b, g = x.shape
    best = _expand(torch.argmax(p, dim=-1), b)  # [B, g + 1]
    n_acc = _first_false(x == best[:, :g])
    return _emit(x, n_acc, best[torch.arange(b, device=x.device), n_acc]), n_acc


def verify_sample_and_match_torch(
    draft_tokens: torch.Tensor, p: torch.Tensor, u_target: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample-and-match; u_target [B, g + 1]."""
    x = draft_tokens.long()
    b, g = x.shape
    y = inverse_cdf_sample_torch(_expand(p, b), u_target)  # [B, g + 1]
    n_acc = _first_false(x == y[:, :g])
    return _emit(x, n_acc, y[torch.arange(b, device=x.device), n_acc]), n_acc
