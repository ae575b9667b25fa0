"""Time lossless real packages through ``audit_lm_pairs`` at defaults (issue 22's 'LM packages'), on
specverify's low- and high-overlap tiny Llama pairs: transformers' generate (assisted generation
with a constant and with its default schedule, prompt lookup, early exit) and specverify's runners
(the chain runner; the tree runner with a draft-model top-k tree of two levels and one of one level,
a multi-draft iid tree verified by recursive rejection sampling, prompt lookup, lookahead, Medusa
heads and an EAGLE-style head, each with an exact rule).

    .venv/bin/python scripts/lm_package_time.py                        # assisted generation, units in turn
    .venv/bin/python scripts/lm_package_time.py --workers 2 --mode all --json scripts/results/lm_packages.json
    .venv/bin/py-spy record -o prof.txt -f raw -r 20 -- .venv/bin/python scripts/lm_package_time.py

Prints, per package, the verdict, the wall time of the audit (the models built, the heads trained
and the generator made inside it) and the samples; with one package, each check's status, n and
p-value (the same for any --workers).
"""

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import torch
from _provenance import commit

from specverify.algorithms.multi_draft import NODE_RULES
from specverify.audit.sources.lm_audit import audit_lm_pairs
from specverify.audit.sources.transformers_adapters import hf_generator
from specverify.runners import speculative_generate
from specverify.runners.tree import (
    LookaheadDrafter,
    ModelTreeDrafter,
    PromptLookupDrafter,
    train_eagle_head,
    train_medusa_heads,
    tree_speculative_generate,
)


def _hf(mode: str, **kw) -> Callable:
    return lambda target, draft: hf_generator(target, mode=mode, assistant=draft, **kw)


def _chain(target, draft):
    def generate(prompt, n, seed, s):
        return speculative_generate(target, draft, prompt, n, s, torch.Generator().manual_seed(seed), gamma=4).tokens

    return generate


def _tree(drafter_of: Callable, rule: str) -> Callable:
    def make(target, draft):
        drafter = drafter_of(target, draft)

        def generate(prompt, n, seed, s):
            rng = np.random.default_rng(seed)
            return tree_speculative_generate(target, drafter, prompt, n, s, rng, NODE_RULES[rule]).tokens

        return generate

    return make


PACKAGES: dict[str, Callable] = {
    "assisted": _hf("assisted", gamma=4),
    "assisted_gamma8": _hf("assisted", gamma=8),
    "assisted_default_schedule": _hf("assisted", gamma=None),  # transformers' own schedule and threshold
    "prompt_lookup": _hf("prompt_lookup", gamma=4),
    "early_exit": _hf("early_exit", gamma=4),
    "specverify": _chain,
    "tree_topk": _tree(lambda t, d: ModelTreeDrafter(d, (2, 2), "top_k"), "one_hot"),
    # one level of four: the same verification with four candidates at a node; on these high-entropy
    # models (2, 2) accepts 1.00-1.07 tokens per round, so its second level costs a pass for little
    "tree_topk_wide": _tree(lambda t, d: ModelTreeDrafter(d, (4,), "top_k"), "one_hot"),
    "tree_iid_rrs": _tree(lambda t, d: ModelTreeDrafter(d, (2, 1), "iid"), "rrs"),
    "tree_prompt_lookup": _tree(lambda t, d: PromptLookupDrafter(2, 3), "one_hot"),
    "tree_lookahead": _tree(lambda t, d: LookaheadDrafter(t, window=4, ngram=3), "one_hot"),
    "tree_medusa": _tree(lambda t, d: train_medusa_heads(t, steps=80), "one_hot"),
    "tree_eagle": _tree(lambda t, d: train_eagle_head(t, steps=80), "one_hot"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1, help="units sampled at once (LMAuditConfig.workers)")
    ap.add_argument("--mode", default="assisted", help=f"'all', or packages separated by commas: {', '.join(PACKAGES)}")
    ap.add_argument("--json", help="write the rows here (rows of other packages already there are kept)")
    ap.add_argument(
        "--isolate-units",
        choices=("default", "off"),
        default="default",
        help="LMAuditConfig.isolate_units: the default (a fresh fork per unit where this process can fork) or off",
    )
    a = ap.parse_args()
    names = list(PACKAGES) if a.mode == "all" else a.mode.split(",")
    if unknown := [n for n in names if n not in PACKAGES]:
        ap.error(f"unknown package(s) {', '.join(unknown)}; pick from {', '.join(PACKAGES)}")
    torch.set_num_threads(1)
    rows = [r for r in _rows(a.json) if r["package"] not in names]
    for name in names:
        t0 = time.time()
        iso = {} if a.isolate_units == "default" else {"isolate_units": False}
        v = audit_lm_pairs(PACKAGES[name], workers=a.workers, **iso)
        rows.append({"package": name, "status": str(v.status), "seconds": round(time.time() - t0, 1),
                     "samples": v.samples, "workers": a.workers, "commit": commit()})  # fmt: skip
        print(f"{name:28s} {v.status} {rows[-1]['seconds']:7.1f} s {v.samples:8,d} samples, workers {a.workers}")
        if len(names) == 1 or v.status != "PASS":
            for c in v.checks:
                print(" ", c.status, c.name, c.n, c.pvalue, c.summary[:200] if c.status != "PASS" else "")
        if a.json:
            order = list(PACKAGES)
            with open(a.json, "w") as f:
                json.dump(sorted(rows, key=lambda r: order.index(r["package"])), f, indent=1)


def _rows(path: str | None) -> list[dict]:
    try:
        with open(path or "") as f:
            return list(json.load(f))
    except FileNotFoundError:
        return []


if __name__ == "__main__":
    main()
