"""Time one lossless real package through ``audit_lm_pairs`` at defaults (issue 22's 'LM package'):
transformers' assisted generation (or prompt lookup, early exit, specverify's own runner: --mode)
on specverify's low- and high-overlap tiny Llama pairs.

    .venv/bin/python scripts/lm_package_time.py               # units in turn
    .venv/bin/python scripts/lm_package_time.py --workers 2   # two units at once, in forks
    .venv/bin/py-spy record -o prof.txt -f raw -r 20 -- .venv/bin/python scripts/lm_package_time.py

Prints the verdict, the wall time, the samples, and each check's status, n and p-value (the same
for any --workers).
"""

import argparse
import time

import torch

from specverify.audit.sources.lm_audit import audit_lm_pairs
from specverify.audit.sources.transformers_adapters import hf_generator
from specverify.runners import speculative_generate

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--workers", type=int, default=1, help="units sampled at once (LMAuditConfig.workers)")
ap.add_argument("--mode", default="assisted", choices=("assisted", "prompt_lookup", "early_exit", "specverify"))
a = ap.parse_args()
torch.set_num_threads(1)
t0 = time.time()


def make(target, draft):
    if a.mode != "specverify":
        return hf_generator(target, mode=a.mode, assistant=draft, gamma=4)

    def generate(prompt, n, seed, s):  # specverify's own chain runner
        return speculative_generate(target, draft, prompt, n, s, torch.Generator().manual_seed(seed), gamma=4).tokens

    return generate


v = audit_lm_pairs(make, workers=a.workers)
print(v.status, f"{time.time() - t0:.1f} s", v.samples, "samples", f"workers {a.workers}", a.mode)
for c in v.checks:
    print(" ", c.status, c.name, c.n, c.pvalue)
