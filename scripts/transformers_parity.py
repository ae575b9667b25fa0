"""The transformers parity matrix: every speculative mode of transformers' generate() audited under
each sampling setting of the audit's parity grid (:data:`specverify.audit.pipeline.run.PARITY_GRID`: each
knob alone, then all together), against the target's law computed by specverify (and tie-aware
greedy). The generators receive the settings and apply them themselves (transformers' own logits
processors), which is the settings interface of generators; sequences are ``audit_lm``'s default
4 (gamma + 1) tokens, several rounds each.

    .venv/bin/python scripts/transformers_parity.py [--eps 0.1] [--json out.json]

Prints one row per (mode, setting) with the verdict, its eps and the evidence of any FAIL.
"""

import argparse
import json
import time

import torch

from specverify.audit.pipeline.run import PARITY_GRID
from specverify.audit.sources.lm_audit import audit_lm
from specverify.audit.sources.transformers_adapters import hf_generator
from specverify.lm.transformers_lm import early_exit_copy, layered_target
from specverify.runners import speculative_generate

ap = argparse.ArgumentParser()
ap.add_argument("--eps", type=float, default=0.1)
ap.add_argument("--json")
args = ap.parse_args()
torch.set_num_threads(1)

t = layered_target("llama", vocab=128, hidden=64, layers=4, heads=4, seed=2, lm_head_scale=6.0, keep=1, damp=0.2)
d = early_exit_copy(t, layers=1)
prompts = [[1, 2, 3, 4, 1, 2], [5, 6, 7], [9, 8, 9, 8, 9], [10, 11, 12, 10, 11, 12]]
settings = list(PARITY_GRID)


def ours(prompt, n, seed, s):
    return speculative_generate(t, d, prompt, n, s, torch.Generator().manual_seed(seed), gamma=3).tokens


modes = {
    "transformers assisted": hf_generator(t, mode="assisted", assistant=d, gamma=3),
    "transformers prompt lookup": hf_generator(t, mode="prompt_lookup", gamma=3),
    "transformers early exit": hf_generator(t, mode="early_exit", exit_layer=1, gamma=3),
    "specverify runner": ours,
}
rows = []
for mname, gen in modes.items():
    for i, s in enumerate(settings):
        t0 = time.time()
        v = audit_lm(
            gen,
            t,
            prompts=prompts,
            settings=(s,),
            eps=args.eps,
            gamma=3,
            name=mname,
            budget_s=600,
            greedy_check=(i == 0),
        )
        row = {
            "mode": mname,
            "settings": s.short(),
            "verdict": v.status,
            "eps": v.eps,
            "tokens": v.samples,
            "checks": {c.name: c.status for c in v.checks},
            "evidence": v.evidence,
            "seconds": round(time.time() - t0, 1),
        }
        rows.append(row)
        print(
            f"{mname:28s} {s.short():50s} {v.status:12s} eps {v.eps:.3f} tokens {v.samples:6d} {row['seconds']:6.1f}s "
            + ("; ".join(v.evidence)[:150] if v.evidence else ""),
            flush=True,
        )
if args.json:
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
