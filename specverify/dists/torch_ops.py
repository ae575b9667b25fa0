"""Torch forms of the sampling primitives and the logits pipeline (device-agnostic).

These mirror :mod:`specverify.dists._processing` and :mod:`specverify.dists._sampling` step for
step, so that a model runner on any device applies exactly the settings the numpy reference
applies. Importing this module imports torch; the rest of :mod:`specverify.dists` does not.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import InvalidLogitsError
from ._settings import SamplingSettings

__all__ = [
    "process_logits_torch",
    "probs_from_logits_torch",
    "inverse_cdf_sample_torch",
    "exponential_race_sample_torch",
    "token_counts_torch",
]


def token_counts_torch(token_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Counts [..., V] of each id along the last axis of ``token_ids`` [..., L] (float)."""
    ids = token_ids.long()
    out = torch.zeros(*ids.shape[:-1], vocab_size, dtype=torch.float64, device=ids.device)
    return out.scatter_add_(-1, ids, torch.ones_like(ids, dtype=torch.float64))


def _check(x: torch.Tensor) -> None:
    if torch.isnan(x).any():
        raise InvalidLogitsError("logits contain NaN; fix the producer of the logits")
    if (x == float("inf")).any():
        raise InvalidLogitsError("logits contain +inf; logits must be finite or -inf (masked)")
    if (x == float("-inf")).all(dim=-1).any():
        raise InvalidLogitsError("a logits row is entirely -inf; every token was masked")


def process_logits_torch(
    logits: torch.Tensor,
    settings: SamplingSettings,
    *,
    seen_counts: torch.Tensor | None = None,
    output_counts: torch.Tensor | None = None,
    validate: bool = True,
) -> torch.Tensor:
    """Torch version of :func:`specverify.dists.process_logits`; keeps the input dtype and device."""
    s = settings
    x = logits
    if validate:
        _check(x)
    if (bias := s.bias_vector(x.shape[-1])) is not None:
        x = x + torch.as_tensor(bias, dtype=x.dtype, device=x.device)
    if s.repetition_penalty != 1.0 and seen_counts is not None:
        pen = torch.where(x < 0, x * s.repetition_penalty, x / s.repetition_penalty)
        x = torch.where(seen_counts.expand_as(x) > 0, pen, x)
    if (s.presence_penalty or s.frequency_penalty) and output_counts is not None:
        c = output_counts.expand_as(x).to(x.dtype)
        x = x - s.presence_penalty * (c > 0).to(x.dtype) - s.frequency_penalty * c
    if s.is_greedy:
        top = torch.argmax(x, dim=-1, keepdim=True)
        out = torch.full_like(x, float("-inf"))
        return out.scatter(-1, top, 0.0)
    if s.temperature != 1.0 and not s.temperature_last:
        x = x / s.temperature
    v = x.shape[-1]
    k = max(s.top_k, s.min_tokens_to_keep) if s.top_k else 0
    if 0 < k < v:
        kth = torch.topk(x, k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if s.top_p < 1.0:
        # Ascending; among ties the higher id first, as in the numpy form.
        sorted_x, rev = torch.sort(x.flip(-1), dim=-1, descending=False, stable=True)
        order = (v - 1) - rev
        cum = torch.softmax(sorted_x, dim=-1).cumsum(dim=-1)
        remove_sorted = cum <= (1.0 - s.top_p)
        remove_sorted[..., -s.min_tokens_to_keep :] = False
        remove = remove_sorted.scatter(-1, order, remove_sorted)
        x = x.masked_fill(remove, float("-inf"))
    if s.min_p > 0.0:
        probs = torch.softmax(x, dim=-1)
        remove = probs < s.min_p * probs.amax(dim=-1, keepdim=True)
        keep = min(s.min_tokens_to_keep, v)
        if keep > 1:
            top = torch.sort(probs, dim=-1, descending=True, stable=True).indices[..., :keep]
        else:
            top = torch.argmax(probs, dim=-1, keepdim=True)
        remove = remove.scatter(-1, top, False)
        x = x.masked_fill(remove, float("-inf"))
    if s.temperature != 1.0 and s.temperature_last:
        x = x / s.temperature
    return x


def probs_from_logits_torch(logits: torch.Tensor, settings: SamplingSettings | None = None, **kw: Any) -> torch.Tensor:
    """softmax(process_logits_torch(...)) in the input dtype."""
    if settings is None:
        return torch.softmax(logits, dim=-1)
    return torch.softmax(process_logits_torch(logits, settings, **kw), dim=-1)


def inverse_cdf_sample_torch(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The two-level inverse CDF of :mod:`specverify.dists._sampling`; weights [..., V] >= 0,
    u [...] in [0, 1). int64 [...]. Float64 weights on the CPU are drawn by the numpy form itself
    (the same tokens: a torch op per block row cost a chain runner a quarter of its time, tried);
    elsewhere by :func:`_inverse_cdf_sample_torch_ops`."""
    if weights.device.type == "cpu" and weights.dtype == torch.float64:
        from ._sampling import inverse_cdf_sample

        w, uu = weights.detach().numpy(), u.detach().to(torch.float64).numpy()
        return torch.from_numpy(inverse_cdf_sample(w, uu))
    return _inverse_cdf_sample_torch_ops(weights, u)


def _inverse_cdf_sample_torch_ops(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The two-level inverse CDF in torch ops (any device and dtype). Sums are taken in the numpy
    form's order (``cumsum``, sequential on CPU), so the tokens equal the numpy and scalar forms on
    CPU."""
    from ._sampling import _layout

    lead = weights.shape[:-1]
    v = weights.shape[-1]
    k, nb = _layout(v)
    w2 = weights.reshape(-1, v)
    if k * nb != v:
        w2 = torch.cat([w2, w2.new_zeros((w2.shape[0], k * nb - v))], dim=1)
    table = w2.reshape(-1, k, nb)
    # Block totals, summed over j in order (row by row: the same order as numpy's reduction and
    # the scalar loop; torch.sum over this dim may reorder, and cumsum over it is slow on CPU).
    totals = table[:, 0].clone()
    for jj in range(1, k):
        totals += table[:, jj]
    cum = torch.cumsum(totals, dim=1)
    thr = u.reshape(-1).to(cum.dtype) * cum[:, -1]
    blk = torch.count_nonzero(cum <= thr[:, None], dim=1)
    over = blk >= nb
    blk_c = torch.clamp(blk, max=nb - 1)
    r = torch.arange(table.shape[0], device=weights.device)
    col = table[r, :, blk_c]
    before = torch.where(blk_c > 0, cum[r, torch.clamp(blk_c - 1, min=0)], torch.zeros_like(thr))
    prefix = before[:, None] + torch.cumsum(col, dim=1)
    j = torch.count_nonzero(prefix <= thr[:, None], dim=1)
    tok = blk_c + nb * torch.clamp(j, max=k - 1)
    bad = over | (j >= k)
    if bool(bad.any()):
        from ._sampling import _last_positive

        for i in torch.nonzero(bad).flatten().tolist():
            tok[i] = _last_positive(table[i].detach().cpu().numpy(), nb, k)
    return tok.reshape(lead).long()


def exponential_race_sample_torch(weights: torch.Tensor, exponentials: torch.Tensor) -> torch.Tensor:
    """argmax w / E with E ~ Exp(1) i.i.d.; ties to the lowest id."""
    return torch.argmax(weights / exponentials, dim=-1)
