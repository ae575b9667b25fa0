"""A tiny random Llama as a GGUF file, from numpy and the ``gguf`` package alone (no download).

    python tiny_gguf.py tiny.gguf

One layer, hidden 64, vocabulary 256 ("<unk>", "<s>", "</s>", then words "t3" .. "t255"), weights
from a seeded numpy generator with the output layer scaled so that the next-token law is spread
over a few dozen tokens, as a real model's is.
"""

import sys

import gguf
import numpy as np

VOCAB, HIDDEN, FFN, HEADS, CTX = 256, 64, 128, 4, 512


def write(path: str, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.05):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    out = gguf.GGUFWriter(path, "llama")
    out.add_name("tiny-random-llama")
    out.add_context_length(CTX)
    out.add_embedding_length(HIDDEN)
    out.add_block_count(1)
    out.add_feed_forward_length(FFN)
    out.add_head_count(HEADS)
    out.add_head_count_kv(HEADS)
    out.add_rope_dimension_count(HIDDEN // HEADS)
    out.add_layer_norm_rms_eps(1e-6)
    out.add_vocab_size(VOCAB)
    out.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens = ["<unk>", "<s>", "</s>"] + [f"\u2581t{i}" for i in range(3, VOCAB)]
    out.add_tokenizer_model("llama")
    out.add_token_list(tokens)
    out.add_token_scores([0.0] * VOCAB)
    out.add_token_types([gguf.TokenType.UNKNOWN] + [gguf.TokenType.CONTROL] * 2 + [gguf.TokenType.NORMAL] * (VOCAB - 3))
    out.add_unk_token_id(0)
    out.add_bos_token_id(1)
    out.add_eos_token_id(2)
    out.add_add_bos_token(False)
    out.add_tensor("token_embd.weight", w(VOCAB, HIDDEN, scale=1.0))
    out.add_tensor("blk.0.attn_norm.weight", np.ones(HIDDEN, np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        out.add_tensor(f"blk.0.{name}.weight", w(HIDDEN, HIDDEN))
    out.add_tensor("blk.0.ffn_norm.weight", np.ones(HIDDEN, np.float32))
    out.add_tensor("blk.0.ffn_gate.weight", w(FFN, HIDDEN))
    out.add_tensor("blk.0.ffn_up.weight", w(FFN, HIDDEN))
    out.add_tensor("blk.0.ffn_down.weight", w(HIDDEN, FFN))
    out.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    out.add_tensor("output.weight", w(VOCAB, HIDDEN, scale=0.3))
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()
    return path


if __name__ == "__main__":
    print(write(sys.argv[1] if len(sys.argv) > 1 else "tiny.gguf"))
