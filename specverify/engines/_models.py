"""Seeded model directories and GGUF files for auditing real engines, built from configs (never
downloaded): a target, a low-overlap and a high-overlap draft, and an EAGLE-1 head.

    models = build_engine_models("out/models")          # idempotent; about 20 s the first time
    models.target, models.draft("low"), models.eagle     # directories for vLLM / transformers
    write_gguf(models.target, "out/models/target.gguf")  # the same weights for llama.cpp

The target is a 4-layer Llama (vocab 512, hidden 128, 1,024 positions) whose LM head is scaled so that its
next-token entropy is a few nats, as in a real model. The ``high`` draft is the target with 5%
relative noise on every weight (acceptance about 0.8); the ``low`` draft is an independently
seeded one-layer model with a flatter head (acceptance about 0.1). The EAGLE head is the ``low`` draft's layer with
an ``fc`` projection of [hidden, 2 hidden], laid out as vLLM's ``EagleLlamaForCausalLM`` loads it
(keys without the ``model.`` prefix, no ``lm_head``, no final norm). Weights depend only on the
seeds and the torch version, so a test can rebuild the exact model that produced a recording.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # all imported lazily: the package imports without them
    import gguf
    import numpy.typing as npt
    from transformers import PreTrainedModel

__all__ = ["EngineModels", "build_engine_models", "load_float64", "write_gguf", "MODEL_SPEC", "same_models"]

# The engine models' shape; part of what a recording was made with (tests compare it).
MODEL_SPEC: dict[str, Any] = {
    "vocab": 512,
    "hidden": 128,
    "layers": 4,
    "heads": 4,
    "lm_head_scale": 16.0,
    "seed": 0,
    "draft_low_layers": 1,
    "draft_low_seed": 7919,
    "draft_low_head_scale": 3.0,
    "draft_high_noise": 0.05,
    "draft_high_seed": 1,
    "eagle_seed": 5,
    "eos": None,
    "positions": 1024,
}
#: Keys of MODEL_SPEC that change no weight and no logit at positions both lengths have (the
#: rotary table's length): a recording made before one of them changed is still of these models.
LOGIT_NEUTRAL_KEYS = frozenset({"positions"})
# No end-of-sequence token: every id is an ordinary token, so no engine stops at or bans one and
# the law sampled from is the target's, whole (the GGUF still names id 2 for llama.cpp's loader).
_SPECIAL = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": None}


def same_models(spec: dict[str, Any]) -> bool:
    """Whether a recording's ``spec`` describes the models :data:`MODEL_SPEC` builds (up to
    :data:`LOGIT_NEUTRAL_KEYS`, which an older recording may lack or hold at another value)."""

    def weights(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k not in LOGIT_NEUTRAL_KEYS}

    return weights(spec) == weights(MODEL_SPEC)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineModels:
    """Paths of the built model directories (each a ``save_pretrained`` folder)."""

    root: Path
    target: Path
    draft_low: Path
    draft_high: Path
    eagle: Path

    def draft(self, overlap: str) -> Path:
        if overlap not in ("low", "high"):
            raise ValueError(f"overlap={overlap!r}: a draft is 'low' or 'high' overlap")
        return self.draft_low if overlap == "low" else self.draft_high


def _llama(*, layers: int, seed: int, head_scale: float) -> PreTrainedModel:
    from ..lm.transformers_lm import build_model

    s = MODEL_SPEC
    m = build_model(
        "llama",
        vocab=s["vocab"],
        hidden=s["hidden"],
        layers=layers,
        heads=s["heads"],
        kv_heads=s["heads"],
        seed=seed,
        lm_head_scale=head_scale,
        max_positions=s["positions"],
    )
    for k, v in _SPECIAL.items():
        setattr(m.config, k, v)
    m.generation_config.update(**_SPECIAL)
    return m


def _save_tokenizer(path: Path, vocab: int) -> None:
    """A word-level tokenizer "t3" .. "t{V-1}" so that tools that insist on one find it; the audits
    themselves send token ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"t{i}": i for i in range(3, vocab)}
    tk = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##")
    PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>").save_pretrained(
        path
    )


def _save(model: PreTrainedModel, path: Path) -> None:
    model.save_pretrained(path, safe_serialization=True)
    _save_tokenizer(path, MODEL_SPEC["vocab"])


def _save_eagle(draft_low: Path, path: Path) -> None:
    """An EAGLE-1 head from the low draft's weights plus a seeded ``fc`` (see the module docstring)."""
    import torch
    from safetensors.torch import load_file, save_file

    sd = load_file(str(draft_low / "model.safetensors"))
    for k in ("lm_head.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight"):
        sd.pop(k, None)
    h = MODEL_SPEC["hidden"]
    g = torch.Generator().manual_seed(MODEL_SPEC["eagle_seed"])
    sd["model.fc.weight"] = 0.05 * torch.randn(h, 2 * h, generator=g)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k.removeprefix("model."): v.contiguous() for k, v in sd.items()}, str(path / "model.safetensors"))
    cfg = json.loads((draft_low / "config.json").read_text())
    cfg["architectures"] = ["EagleLlamaForCausalLM"]
    (path / "config.json").write_text(json.dumps(cfg, indent=1))
    _save_tokenizer(path, MODEL_SPEC["vocab"])


def build_engine_models(root: str | os.PathLike[str], *, overwrite: bool = False) -> EngineModels:
    """Build (or reuse) the seeded model directories under ``root``; see the module docstring."""
    from ..lm.transformers_lm import perturbed_copy

    root = Path(root)
    out = EngineModels(
        root=root,
        target=root / "target",
        draft_low=root / "draft_low",
        draft_high=root / "draft_high",
        eagle=root / "eagle",
    )
    stamp = root / "spec.json"
    if not overwrite and stamp.exists() and json.loads(stamp.read_text()) == MODEL_SPEC:
        return out
    s = MODEL_SPEC
    target = _llama(layers=s["layers"], seed=s["seed"], head_scale=s["lm_head_scale"])
    _save(target, out.target)
    _save(perturbed_copy(target, eps=s["draft_high_noise"], seed=s["draft_high_seed"]), out.draft_high)
    _save(
        _llama(layers=s["draft_low_layers"], seed=s["draft_low_seed"], head_scale=s["draft_low_head_scale"]),
        out.draft_low,
    )
    _save_eagle(out.draft_low, out.eagle)
    stamp.write_text(json.dumps(MODEL_SPEC))
    return out


def load_float64(path: str | os.PathLike[str]) -> PreTrainedModel:
    """The model at ``path`` in float64 (the auditor's copy: laws are computed in float64)."""
    import torch

    from ..lm.transformers_lm import load_local

    return load_local(str(path), dtype=torch.float64)


def _permute_rotary(x: npt.NDArray[Any], n_heads: int) -> npt.NDArray[Any]:
    """transformers' rotary layout of q/k rows -> GGML's (interleaved pairs)."""
    out: npt.NDArray[Any] = x.reshape(n_heads, 2, x.shape[0] // n_heads // 2, *x.shape[1:]).swapaxes(1, 2)
    return out.reshape(x.shape)


#: GGUF tokenizer models: "llama" (SentencePiece BPE: ids in, ids out; text prompts do not
#: tokenise, its pieces have no sub-pieces) or "t5" (unigram: " t12 t34" tokenises to [12, 34],
#: for servers that take text prompts only); the model and its logits are the same
GGUF_TOKENIZERS = ("llama", "t5")


def _gguf_header(w: gguf.GGUFWriter, cfg: dict[str, Any], f16: bool, tokenizer: str = "llama") -> None:
    import gguf

    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    rope = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(h)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_dimension_count(h // nh)
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    # A vocabulary of whole words "▁tN", so that detokenised text reads " t12 t34"; the ids of
    # unknown and begin-of-sequence are words too (the target samples them like any other), the
    # end-of-sequence id 2 is the one token without text (llama.cpp stops there).
    toks = ["\u2581t0", "\u2581t1", "</s>"] + [f"\u2581t{i}" for i in range(3, cfg["vocab_size"])]
    w.add_tokenizer_model(tokenizer)
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * len(toks))
    w.add_token_types(
        [gguf.TokenType.NORMAL] * 2 + [gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (len(toks) - 3)
    )
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)


_GGUF_LAYER = {
    "attn_norm": "input_layernorm",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def write_gguf(
    model_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], *, f16: bool = False, tokenizer: str = "llama"
) -> Path:
    """Write the Llama in ``model_dir`` as a GGUF file for llama.cpp (needs the ``gguf`` package);
    ``tokenizer`` is one of :data:`GGUF_TOKENIZERS`."""
    if tokenizer not in GGUF_TOKENIZERS:
        raise ValueError(f"tokenizer={tokenizer!r}: one of {GGUF_TOKENIZERS}")
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    model_dir, out_path = Path(model_dir), Path(out_path)
    cfg = json.loads((model_dir / "config.json").read_text())
    sd = load_file(str(model_dir / "model.safetensors"))
    w = gguf.GGUFWriter(str(out_path), "llama")
    w.add_name(model_dir.name)
    _gguf_header(w, cfg, f16, tokenizer)

    def put(name: str, x: npt.NDArray[Any]) -> None:
        x32 = np.ascontiguousarray(x.astype(np.float32))
        w.add_tensor(name, x32.astype(np.float16) if f16 and x32.ndim == 2 else x32)

    put("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        put(f"blk.{i}.attn_q.weight", _permute_rotary(sd[p + "self_attn.q_proj.weight"], cfg["num_attention_heads"]))
        put(f"blk.{i}.attn_k.weight", _permute_rotary(sd[p + "self_attn.k_proj.weight"], cfg["num_key_value_heads"]))
        for g_name, hf_name in _GGUF_LAYER.items():
            put(f"blk.{i}.{g_name}.weight", sd[p + hf_name + ".weight"])
    put("output_norm.weight", sd["model.norm.weight"])
    put("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out_path
