"""Time one lossless real package through ``audit_lm_pairs`` at defaults (issue 22's 'LM package'):
transformers' assisted generation on specverify's low- and high-overlap tiny Llama pairs.

    .venv/bin/python scripts/lm_package_time.py
    .venv/bin/py-spy record -o prof.txt -f raw -r 20 -- .venv/bin/python scripts/lm_package_time.py

Prints the verdict, the wall time, the samples, and each check's status and n.
"""

import time

import torch

from specverify.audit.sources.lm_audit import audit_lm_pairs
from specverify.audit.sources.transformers_adapters import hf_generator

torch.set_num_threads(1)
t0 = time.time()
v = audit_lm_pairs(lambda t, d: hf_generator(t, mode="assisted", assistant=d, gamma=4))
print(v.status, f"{time.time() - t0:.1f} s", v.samples, "samples")
for c in v.checks:
    print(" ", c.status, c.name, c.n)
