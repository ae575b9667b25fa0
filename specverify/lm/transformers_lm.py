"""Transformers causal LMs behind specverify's LM interface (seeded random init, or a local path).

Nothing is ever downloaded: models are built from configs with seeded weights, trained for a few
seconds on the spot when a realistic acceptance rate is needed, or loaded from a local directory.

    target = build_model("llama", vocab=512, hidden=128, layers=4, seed=0, lm_head_scale=6.0)
    draft = perturbed_copy(target, eps=0.1, seed=1)         # agrees often (alpha ~ 0.8)
    draft = early_exit_copy(target, layers=1)               # the target's first layers + its head
    lm = CausalLM(target)                                   # the interface
    probs = lm.next_probs([[1, 2, 3], [4, 5]], settings)    # [B, V] float64
    p_rows = lm.sequence_probs(prompt, continuation, settings)   # [len(continuation), V], one pass

:class:`KVSession` keeps a KV cache for one sequence with ``extend`` (one pass over k new tokens,
returning their k logit rows) and ``rollback`` (crop the last n positions).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from ..dists import FilterBoundary, SamplingSettings, filter_boundaries, running_counts
from ..dists.torch_ops import process_logits_torch

if TYPE_CHECKING:  # transformers is imported where a model is built (importing it takes seconds)
    from transformers import PreTrainedModel

__all__ = [
    "build_model",
    "perturbed_copy",
    "with_token_mass",
    "early_exit_copy",
    "load_local",
    "CausalLM",
    "KVSession",
    "layered_target",
]

FAMILIES = ("llama", "gpt2", "qwen2")


# long: one config per model family, side by side
def build_model(
    family: str = "llama",
    *,
    vocab: int = 512,
    hidden: int = 128,
    layers: int = 4,
    heads: int = 4,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    lm_head_scale: float = 1.0,
    max_positions: int = 2048,
    attention_scale: float = 1.0,
) -> PreTrainedModel:
    """A seeded random-init causal LM from a config. ``lm_head_scale`` sharpens the near-uniform
    distributions of a random init (scale 6-8 gives LLM-like entropies). ``attention_scale``
    multiplies every attention logit (query and key projections each by its square root): a random
    init attends almost uniformly, so its law hardly depends on the context beyond the last token
    and a bug that corrupts the context (a cache that keeps rejected drafts) changes nothing; at
    1,000 attention is peaked and inserting a few wrong tokens among the last 40 of a 300-token
    context moves the next token's law by TV ~0.08 (0.003 at 1)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    kv_heads = kv_heads or max(1, heads // 2)
    intermediate = intermediate or 2 * hidden
    common = dict(vocab_size=vocab, bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    if family == "llama":
        cfg, cls = (
            LlamaConfig(
                hidden_size=hidden,
                intermediate_size=intermediate,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=kv_heads,
                max_position_embeddings=max_positions,
                **common,
            ),
            LlamaForCausalLM,
        )
    elif family == "qwen2":
        cfg, cls = (
            Qwen2Config(
                hidden_size=hidden,
                intermediate_size=intermediate,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=kv_heads,
                max_position_embeddings=max_positions,
                **common,
            ),
            Qwen2ForCausalLM,
        )
    elif family == "gpt2":
        cfg, cls = (
            GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, n_positions=max_positions, **common),
            GPT2LMHeadModel,
        )
    else:
        raise ValueError(f"unknown family {family!r}; use one of {FAMILIES}")
    torch.manual_seed(seed)  # transformers initialises from the global generator
    model = cls(cfg).to(dtype=dtype, device=device).eval()
    if lm_head_scale != 1.0:
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(lm_head_scale)
    if attention_scale != 1.0:
        _scale_attention_logits(model, attention_scale)
    return model


def _scale_attention_logits(model: PreTrainedModel, scale: float) -> None:
    root = scale**0.5
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("q_proj", "k_proj")):
                p.mul_(root)
            elif "c_attn" in name:  # GPT-2: one projection, query and key are its first two thirds
                width = p.shape[-1] // 3
                p[..., : 2 * width].mul_(root)


def perturbed_copy(model: PreTrainedModel, *, eps: float = 0.1, seed: int = 1) -> PreTrainedModel:
    """A draft that agrees with ``model`` often: its weights plus relative Gaussian noise."""
    d = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in d.parameters():
            noise = torch.randn(p.shape, generator=g).to(p.device, p.dtype)
            p.add_(eps * p.abs().mean() * noise)
    return d.eval()


def with_token_mass(model: PreTrainedModel, token: int, *, mean_prob: float, seed: int = 0) -> PreTrainedModel:
    """A copy of ``model`` whose LM head adds one bias to ``token``'s logit, chosen so that the
    token's probability averages ``mean_prob`` over seeded random contexts (an EOS with real mass
    at many positions, mid-block included; random inits give each id about 1 / vocab)."""
    m = copy.deepcopy(model)
    head = m.get_output_embeddings()
    vocab = int(head.weight.shape[0])
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (16, 24), generator=g)
    with torch.no_grad():
        logits = m(ids).logits.reshape(-1, vocab).double()
    lo, hi = -50.0, 50.0
    for _ in range(60):  # bisection: the mean probability rises with the bias
        b = (lo + hi) / 2
        x = logits.clone()
        x[:, token] += b
        lo, hi = (b, hi) if float(torch.softmax(x, -1)[:, token].mean()) < mean_prob else (lo, b)
    biased = torch.nn.Linear(head.in_features, vocab, bias=True, dtype=head.weight.dtype, device=head.weight.device)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[token] = (lo + hi) / 2
    m.set_output_embeddings(biased)
    return m.eval()


def early_exit_copy(model: PreTrainedModel, *, layers: int) -> PreTrainedModel:
    """The target's first ``layers`` layers plus its final norm and LM head, as a separate model."""
    d = copy.deepcopy(model)
    base = d.base_model
    blocks = base.layers if hasattr(base, "layers") else base.h
    del blocks[layers:]
    d.config.num_hidden_layers = layers
    if hasattr(d.config, "n_layer"):
        d.config.n_layer = layers
    return d.eval()


def layered_target(
    family: str = "llama",
    *,
    vocab: int,
    hidden: int,
    layers: int,
    heads: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    lm_head_scale: float = 6.0,
    damp: float = 0.05,
    keep: int = 1,
) -> PreTrainedModel:
    """A target whose layers after the first ``keep`` write small updates (their output projections
    scaled by ``damp``), so an early-exit draft of ``keep`` layers predicts it well while the target
    still pays for all its layers: a cheap way to a high-acceptance pair without training."""
    m = build_model(
        family,
        vocab=vocab,
        hidden=hidden,
        layers=layers,
        heads=heads,
        seed=seed,
        dtype=dtype,
        device=device,
        lm_head_scale=lm_head_scale,
    )
    base = m.base_model
    blocks = base.layers if hasattr(base, "layers") else base.h
    with torch.no_grad():
        for blk in blocks[keep:]:
            for name, p in blk.named_parameters():
                if any(k in name for k in ("o_proj", "down_proj", "c_proj")) and p.dim() == 2:
                    p.mul_(damp)
    return m


def load_local(path: str, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> PreTrainedModel:
    """Load a model from a local directory (never from a hub)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True, torch_dtype=dtype).to(device).eval()


def _counts(history: list[int], vocab: int, device: torch.device) -> torch.Tensor:
    c = torch.zeros(vocab, dtype=torch.float64, device=device)
    if history:
        c.index_add_(
            0, torch.tensor(history, device=device), torch.ones(len(history), dtype=torch.float64, device=device)
        )
    return c


def _history_counts(
    prompt: list[int], continuation: list[int], vocab: int, settings: SamplingSettings
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """[m, V] counts of the tokens the repetition penalty sees before each continuation position
    (the prompt too, unless ``penalize_prompt`` is False) and of the generated ones only, each the
    last ``penalty_window`` tokens (:meth:`SamplingSettings.penalty_history`, every position at once)."""
    m, w = len(continuation), settings.penalty_window
    gen = running_counts(continuation, vocab, window=w)[:m] if m else np.zeros((0, vocab))
    if not settings.penalize_prompt:
        return gen, gen
    seen = running_counts(list(prompt) + list(continuation), vocab, window=w, first=len(prompt))[:m]
    return seen, gen


class CausalLM:
    """One interface over a transformers causal LM: laws of next tokens, with settings applied."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.device: torch.device = next(model.parameters()).device
        self.vocab_size: int = model.get_output_embeddings().weight.shape[0]

    @torch.no_grad()
    def logits(self, ids: list[int]) -> torch.Tensor:
        """Logits [len(ids), V] of one uncached pass (row t: next token after ids[: t + 1])."""
        x = torch.tensor([ids], device=self.device)
        out: torch.Tensor = self.model(input_ids=x, use_cache=False).logits[0]
        return out

    def process(
        self, logits_row: torch.Tensor, settings: SamplingSettings | None, history: list[int], n_prompt: int
    ) -> torch.Tensor:
        """Probabilities (float64) of one position: the shared pipeline with this position's history."""
        x = logits_row.double()
        if settings is None:
            return torch.softmax(x, -1)
        pen, generated = settings.penalty_history(history, n_prompt)
        seen = _counts(list(pen), self.vocab_size, x.device) if settings.repetition_penalty != 1.0 else None
        out = (
            _counts(list(generated), self.vocab_size, x.device)
            if (settings.presence_penalty or settings.frequency_penalty)
            else None
        )
        return torch.softmax(process_logits_torch(x, settings, seen_counts=seen, output_counts=out), -1)

    def process_rows(
        self,
        rows: torch.Tensor,
        settings: SamplingSettings | None,
        history_of: Callable[[int], list[int]],
        n_prompt: int,
    ) -> torch.Tensor:
        """:meth:`process` of every row of ``rows`` [k, V] (row i's history: ``history_of(i)``), in
        one pipeline call when the settings do not look at the history."""
        x = rows.double()
        if settings is None or not settings.uses_history:
            return torch.softmax(x if settings is None else process_logits_torch(x, settings), -1)
        return torch.stack([self.process(x[i], settings, history_of(i), n_prompt) for i in range(len(x))])

    def next_probs(
        self, prefixes: list[list[int]], settings: SamplingSettings | None = None, n_prompt: int | None = None
    ) -> npt.NDArray[np.float64]:
        rows = []
        for pre in prefixes:
            lg = self.logits(pre)[-1]
            rows.append(self.process(lg, settings, list(pre), len(pre) if n_prompt is None else n_prompt).cpu().numpy())
        return np.stack(rows)

    def sequence_probs(
        self, prompt: list[int], continuation: list[int], settings: SamplingSettings | None = None
    ) -> npt.NDArray[np.float64]:
        """[len(continuation), V]: the law of each continuation token given everything before it,
        all from one teacher-forced pass."""
        return self.batch_sequence_probs([prompt], [continuation], settings)[0]

    @torch.no_grad()
    def _teacher_forced(
        self, prompts: list[list[int]], continuations: list[list[int]]
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """(index, logits [len(prompt) + len(continuation), V]) of every sequence: one pass per group of
        sequences of equal total length (no padding, so no attention mask to get wrong)."""
        groups: dict[int, list[int]] = {}
        for i, (p, c) in enumerate(zip(prompts, continuations, strict=True)):
            groups.setdefault(len(p) + len(c), []).append(i)
        for idx in groups.values():
            ids = torch.tensor([list(prompts[i]) + list(continuations[i]) for i in idx], device=self.device)
            logits = self.model(input_ids=ids, use_cache=False).logits
            yield from zip(idx, logits, strict=True)

    def batch_sequence_probs(
        self, prompts: list[list[int]], continuations: list[list[int]], settings: SamplingSettings | None = None
    ) -> list[npt.NDArray[np.float64]]:
        """:meth:`sequence_probs` of many sequences, from one teacher-forced pass per group of equal
        total length."""
        out: list[npt.NDArray[np.float64]] = [np.zeros((0, self.vocab_size))] * len(prompts)
        for i, row in self._teacher_forced(prompts, continuations):
            out[i] = self._continuation_probs(row, list(prompts[i]), list(continuations[i]), settings)
        return out

    def batch_sequence_boundaries(
        self, prompts: list[list[int]], continuations: list[list[int]], settings: SamplingSettings, *, tol: float
    ) -> list[tuple[npt.NDArray[np.float64], FilterBoundary]]:
        """Per sequence: (the laws [m, V] of :meth:`batch_sequence_probs`, their
        :class:`~specverify.dists.FilterBoundary` for an engine whose logits are within ``tol``)."""
        out: list[tuple[npt.NDArray[np.float64], FilterBoundary]] = [None] * len(prompts)  # type: ignore[list-item]
        for i, row in self._teacher_forced(prompts, continuations):
            p, c = list(prompts[i]), list(continuations[i])
            probs = self._continuation_probs(row, p, c, settings)
            raw = row[len(p) - 1 : len(p) - 1 + len(c)].double().cpu().numpy()
            seen, gen = _history_counts(p, c, self.vocab_size, settings)
            out[i] = (probs, filter_boundaries(raw, settings, tol=tol, seen_counts=seen, output_counts=gen))
        return out

    def _continuation_probs(
        self, logits: torch.Tensor, prompt: list[int], continuation: list[int], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        n, m = len(prompt), len(continuation)
        if m == 0:
            return np.zeros((0, self.vocab_size))
        ids = prompt + continuation
        return self.process_rows(logits[n - 1 : n - 1 + m], settings, lambda t: ids[: n + t], n).cpu().numpy()


class KVSession:
    """A KV cache for one sequence: ``extend(ids)`` runs one pass over new tokens and returns their
    logit rows; ``rollback(n)`` drops the last n cached positions (after a rejection)."""

    def __init__(self, model: PreTrainedModel) -> None:
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache(config=model.config)
        self.length = 0
        self.device: torch.device = next(model.parameters()).device
        # transformers 5.x names the argument `cache` (past_key_values is deprecated); 4.x has only the latter.
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    # inference mode: 11% less time per pass than no_grad for a tiny model (0.44 against 0.50 ms,
    # measured); nothing cached or returned is ever differentiated
    @torch.inference_mode()
    def extend(self, ids: list[int]) -> torch.Tensor:
        pos = list(range(self.length, self.length + len(ids)))
        rows, _ = self.extend_masked(ids, pos, None)
        return rows

    @torch.inference_mode()
    def extend_masked(
        self, ids: list[int], positions: list[int], allowed: torch.Tensor | None, *, hidden: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One pass over ``ids`` at ``positions`` where new token i attends to cached or new position
        j iff ``allowed[i, j]`` ([len(ids), length + len(ids)] bool; None: causal). Returns the logit
        rows [len(ids), V] and, with ``hidden``, the last layer's states [len(ids), H]. All of
        ``ids`` enter the cache (roll back what should not stay: a tree's nodes)."""
        x = torch.tensor([list(ids)], device=self.device)
        kw: dict[str, object] = {
            self._cache_kw: self.cache,
            "position_ids": torch.tensor([positions], device=self.device),
        }
        if allowed is not None:
            dtype = next(self.model.parameters()).dtype
            mask = torch.zeros(allowed.shape, dtype=dtype, device=self.device)
            kw["attention_mask"] = mask.masked_fill(~allowed.to(self.device), torch.finfo(dtype).min)[None, None]
        out = self.model(input_ids=x, use_cache=True, output_hidden_states=hidden, **kw)
        self.length += len(ids)
        return out.logits[0], (out.hidden_states[-1][0] if hidden else None)

    def rollback(self, n: int) -> None:
        if n > 0:
            self.cache.crop(-n)
            self.length -= n
