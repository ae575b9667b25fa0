"""Localise vLLM's speculative-decoding deviation: record what its rejection sampler is given at
every step of one request, and check each input against transformers (float64) on the same prefix.

    .engines/vllm/venv/bin/python scripts/engines/vllm_localise.py [ngram|draft] [--k 3]

Runs the engine core and its worker in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0 and the
"uni" executor) so that ``vllm.v1.sample.rejection_sampler.rejection_sample`` can be wrapped. For
one request at a time (batch 1) the prefix at each verification step is the prompt plus every
token emitted before that step, so each target row the sampler receives can be compared with the
target's true log-probabilities for prefix + drafts[:j]. Prints, per step position j, the largest
log-probability gap, and whether the emitted tokens follow from the sampler's own inputs.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


# long: one script-style run (wrap, start the engine, replay eight requests); kept linear to read as a recipe
def main() -> None:
    import numpy as np
    import torch
    import vllm.v1.sample.rejection_sampler as rs
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from specverify.engines import build_engine_models, load_float64, speculative_config

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from matrix import audit_prompts

    method = sys.argv[1] if len(sys.argv) > 1 else "ngram"
    k = int(sys.argv[sys.argv.index("--k") + 1]) if "--k" in sys.argv else 3
    models = build_engine_models(".engines/work/models")
    steps = []
    orig = rs.rejection_sample

    def wrapped(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_logits,
        bonus_token_ids,
        sampling_metadata,
        *a,
        **kw,
    ):
        out = orig(
            draft_token_ids,
            num_draft_tokens,
            max_spec_len,
            cu_num_draft_tokens,
            draft_probs,
            target_logits,
            bonus_token_ids,
            sampling_metadata,
            *a,
            **kw,
        )
        steps.append(
            {
                "drafts": draft_token_ids.tolist(),
                "n": list(num_draft_tokens),
                "logp": torch.log_softmax(target_logits.double(), -1).cpu().numpy(),
                "bonus": bonus_token_ids.reshape(-1).tolist(),
                "out": out.tolist(),
                "draft_probs": draft_probs is not None,
            }
        )
        return out

    rs.rejection_sample = wrapped
    llm = LLM(
        model=str(models.target),
        skip_tokenizer_init=True,
        dtype="float32",
        max_model_len=512,
        seed=0,
        enforce_eager=True,
        gpu_memory_utilization=0.25,
        distributed_executor_backend="uni",
        generation_config="vllm",
        speculative_config=speculative_config(method, k, models, overlap="high"),
    )
    target = load_float64(models.target)
    report = {"method": method, "k": k, "requests": []}
    for i, prompt in enumerate(audit_prompts()[:8]):
        steps.clear()
        sp = SamplingParams(max_tokens=24, ignore_eos=True, detokenize=False, seed=1000 + i, temperature=1.0)
        out = llm.generate([TokensPrompt(prompt_token_ids=prompt)], [sp], use_tqdm=False)[0].outputs[0].token_ids
        report["requests"].append(check_request(prompt, list(out), list(steps), target, np))
    print(json.dumps(report, indent=1))


def check_request(prompt, out, steps, target, np) -> dict:
    """Replay the steps of one request against the true prefixes."""
    import torch

    emitted, gaps, mismatched_out = 0, {}, 0
    for st in steps:
        d, (n,) = st["drafts"], st["n"]
        prefix = prompt + out[:emitted]
        ids = prefix + d
        with torch.no_grad():
            true = torch.log_softmax(target(torch.tensor([ids])).logits[0], -1).numpy()
        for j in range(n):  # target rows are the draft positions only (the bonus is sampled before)
            row = st["logp"][j]
            ref = true[len(prefix) - 1 + j]
            finite = np.isfinite(row)
            gap = float(np.abs(row[finite] - ref[finite]).max()) if finite.any() else float("inf")
            gaps[j] = max(gaps.get(j, 0.0), gap)
            if os.environ.get("DEBUG"):
                print(
                    f"step n={n} drafts={d} out={st['out']} bonus={st['bonus']} j={j} finite={int(finite.sum())} "
                    f"argmax={int(row.argmax())} true_argmax={int(ref.argmax())} gap={gap:.3g}",
                    file=sys.stderr,
                )
        got = [t for t in st["out"][0] if t >= 0]
        if got != out[emitted : emitted + len(got)]:
            mismatched_out += 1
        emitted += len(got)
    return {
        "prompt_len": len(prompt),
        "steps": len(steps),
        "emitted_by_steps": emitted,
        "returned": len(out),
        "max_logprob_gap_by_draft_position": {str(j): round(g, 6) for j, g in sorted(gaps.items())},
        "steps_whose_output_is_not_what_was_returned": mismatched_out,
    }


if __name__ == "__main__":
    main()
