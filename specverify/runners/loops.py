"""Target-only and speculative decoding loops (device-agnostic; batch of prompts = a loop).

Speculative round (one target pass per round):

    draft:   for i < g: q_i = pipeline(draft logits | history + x_<i); x_i ~ q_i (u_draft[i])
    target:  one pass over [pending..., x_1..x_g] -> p_1..p_{g+1} = pipeline(target logits | history + x_<i)
    verify:  verify_chain_torch (the full rule, or greedy at temperature 0) with u_accept, u_final
    commit:  emitted = x_1..x_k, y; target cache cropped by g - k; draft cache cropped to the
             accepted prefix; y is fed to both at the start of the next round ("pending").

Penalties (repetition, presence, frequency) see each position's own history, drafts included, for
both models, exactly as a target-only run would at that position. All randomness comes from the
``torch.Generator`` passed in.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import torch

from ..algorithms.chain_torch import verify_chain_torch, verify_greedy_torch
from ..dists import SamplingSettings
from ..dists.torch_ops import inverse_cdf_sample_torch
from ..lm.transformers_lm import CausalLM, KVSession

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["RunResult", "target_only_generate", "speculative_generate", "acceptance_z"]


@dataclasses.dataclass
class RunResult:
    tokens: list[int]
    accepted: list[int]  # accepted drafts per round
    drafted: list[int]  # drafts proposed per round
    target_passes: int
    draft_passes: int
    seconds: float
    #: per round, sum min(p_i, q_i) at each drafted position (the exact acceptance probability of
    #: position i given that the round reached it), for the acceptance-against-theory check
    betas: list[list[float]] = dataclasses.field(default_factory=list)

    @property
    def tokens_per_target_pass(self) -> float:
        return len(self.tokens) / max(1, self.target_passes)


def _probs(
    lm: CausalLM, row: torch.Tensor, settings: SamplingSettings | None, history: list[int], n_prompt: int
) -> torch.Tensor:
    return lm.process(row, settings, history, n_prompt)


def target_only_generate(
    model: PreTrainedModel,
    prompt: list[int],
    max_new_tokens: int,
    settings: SamplingSettings,
    generator: torch.Generator,
    *,
    rows: list[torch.Tensor] | None = None,
) -> RunResult:
    """Plain autoregressive sampling (or greedy at temperature 0) through the shared pipeline.
    ``rows``, where given, receives the cached pass's logits row of every position sampled."""
    lm = CausalLM(model)
    t0 = time.perf_counter()
    s = KVSession(model)
    if len(prompt) > 1:
        s.extend(prompt[:-1])
    pending = [prompt[-1]]
    out: list[int] = []
    passes = 0
    while len(out) < max_new_tokens:
        row = s.extend(pending)[-1]
        passes += 1
        if rows is not None:
            rows.append(row)
        p = _probs(lm, row, settings, list(prompt) + out, len(prompt))
        if settings.is_greedy:
            y = int(torch.argmax(p))
        else:
            u = torch.rand((), generator=generator, dtype=torch.float64, device=generator.device)
            y = int(inverse_cdf_sample_torch(p, u))
        out.append(y)
        pending = [y]
        if y in settings.stop_token_ids:  # the request ends at its first stop token
            break
    return RunResult(out, [], [], passes, 0, time.perf_counter() - t0)


# long: the decoding loop; draft, verify, roll back and account share the KV sessions of one round
def speculative_generate(
    target: PreTrainedModel,
    draft: PreTrainedModel,
    prompt: list[int],
    max_new_tokens: int,
    settings: SamplingSettings,
    generator: torch.Generator,
    *,
    gamma: int = 4,
) -> RunResult:
    """Chain speculative decoding with a draft model; exact in sampling, greedy-equal at temperature 0.
    The request ends at ``max_new_tokens`` or at its first stop id (``settings.stop_token_ids``),
    wherever in a round it is accepted."""
    tl, dl = CausalLM(target), CausalLM(draft)
    t0 = time.perf_counter()
    ts, ds = KVSession(target), KVSession(draft)
    if len(prompt) > 1:
        ts.extend(prompt[:-1])
        ds.extend(prompt[:-1])
    t_pending, d_pending = [prompt[-1]], [prompt[-1]]
    out: list[int] = []
    accepted: list[int] = []
    drafted: list[int] = []
    betas: list[list[float]] = []
    tpass = dpass = 0
    n = len(prompt)
    dev = generator.device
    while len(out) < max_new_tokens:
        g = max(0, min(gamma, max_new_tokens - len(out) - 1))
        hist = list(prompt) + out
        drafts: list[int] = []
        q_rows: list[torch.Tensor] = []
        u_draft = torch.rand(g, generator=generator, dtype=torch.float64, device=dev)
        for i in range(g):
            row = ds.extend(d_pending)[-1]
            dpass += 1
            q = _probs(dl, row, settings, hist + drafts, n)
            x = int(torch.argmax(q)) if settings.is_greedy else int(inverse_cdf_sample_torch(q, u_draft[i]))
            drafts.append(x)
            q_rows.append(q)
            d_pending = [x]
        logits = ts.extend(t_pending + drafts)  # one target pass
        tpass += 1
        base = len(t_pending) - 1
        p_rows = torch.stack([_probs(tl, logits[base + i], settings, hist + drafts[:i], n) for i in range(g + 1)])
        X = torch.tensor([drafts], dtype=torch.long, device=p_rows.device)
        if settings.is_greedy:
            toks, n_acc = verify_greedy_torch(X, p_rows[None])
        else:
            ua = torch.rand((1, g), generator=generator, dtype=torch.float64, device=dev)
            uf = torch.rand(1, generator=generator, dtype=torch.float64, device=dev)
            Q = (
                torch.stack(q_rows)[None]
                if g
                else torch.zeros((1, 0, p_rows.shape[-1]), dtype=p_rows.dtype, device=p_rows.device)
            )
            toks, n_acc = verify_chain_torch(X, Q, p_rows[None], ua.to(p_rows.device), uf.to(p_rows.device))
        k = int(n_acc[0])
        y = int(toks[0, k])
        if g and not settings.is_greedy:
            betas.append(torch.minimum(p_rows[:g], Q[0]).sum(-1).tolist())
        out.extend(drafts[:k] + [y])
        accepted.append(k)
        drafted.append(g)
        if (stop := settings.stop_at(out[len(out) - k - 1 :])) is not None:  # a stop may be accepted mid-round
            del out[len(out) - k - 1 + stop + 1 :]
            break
        # Target cache holds ... + t_pending + drafts: drop the rejected drafts.
        ts.rollback(g - k)
        t_pending = [y]
        # Draft cache holds ... + d_pending(before) + drafts[:g-1] (the last draft was never fed).
        if g == 0:  # nothing was fed to the draft this round
            d_pending = d_pending + [y]
        elif k < g:
            ds.rollback((g - 1) - k)
            d_pending = [y]
        else:
            d_pending = [drafts[-1], y]
    return RunResult(out[:max_new_tokens], accepted, drafted, tpass, dpass, time.perf_counter() - t0, betas)


def acceptance_z(results: list[RunResult]) -> tuple[float, int]:
    """Acceptance against theory: over every verified position (up to each round's first
    rejection) the indicator 'accepted' is Bernoulli(beta_i) given the past, so
    z = sum (a_i - beta_i) / sqrt(sum beta_i (1 - beta_i)) is asymptotically N(0, 1) (martingale
    CLT). Returns (z, number of positions)."""
    num, var, n = 0.0, 0.0, 0
    for r in results:
        for k, g, b in zip(r.accepted, r.drafted, r.betas):
            for i in range(min(k + 1, g)):
                a = 1.0 if i < k else 0.0
                num += a - b[i]
                var += b[i] * (1 - b[i])
                n += 1
    return (num / var**0.5 if var > 0 else 0.0), n
