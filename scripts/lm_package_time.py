"""Time one lossless real package through ``audit_lm_pairs`` at defaults (issue 22's 'LM package'):
transformers' assisted generation on specverify's low- and high-overlap tiny Llama pairs.

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

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--workers", type=int, default=1, help="units sampled at once (LMAuditConfig.workers)")
ap.add_argument("--mode", default="assisted", choices=("assisted", "prompt_lookup", "early_exit"))
a = ap.parse_args()
torch.set_num_threads(1)
t0 = time.time()
v = audit_lm_pairs(lambda t, d: hf_generator(t, mode=a.mode, assistant=d, gamma=4), workers=a.workers)
print(v.status, f"{time.time() - t0:.1f} s", v.samples, "samples", f"workers {a.workers}", a.mode)
for c in v.checks:
    print(" ", c.status, c.name, c.n, c.pvalue)
