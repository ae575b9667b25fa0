"""``specverify bench runner``: tokens per second of the speculative runner, as ratios from one run.

Forms, all on the same tiny CPU models (a layered target and its 2-layer prefix as draft, so the
pair agrees often), same prompts, same number of new tokens, one torch thread:

* target-only (specverify's loop: the baseline of the ratios);
* speculative (specverify's loop, gamma 4);
* transformers ``generate`` target-only, and with ``assistant_model`` (gamma 4, constant schedule).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch


def main(*, tokens: int = 64, prompts: int = 4, printer: Callable[[str], object] = print) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..audit.sources.transformers_adapters import hf_generator
    from ..dists import SamplingSettings
    from ..lm.transformers_lm import early_exit_copy, layered_target
    from ..runners import speculative_generate, target_only_generate

    torch.set_num_threads(1)
    target = layered_target(
        "llama", vocab=512, hidden=128, layers=8, heads=4, seed=0, lm_head_scale=6.0, damp=0.05, keep=2
    )
    draft = early_exit_copy(target, layers=2)
    rng = np.random.default_rng(0)
    ps = [rng.integers(0, 512, 16).tolist() for _ in range(prompts)]
    table = Table(title=f"specverify bench runner: {tokens} new tokens x {prompts} prompts, CPU, 1 thread")
    for col in ("mode", "form", "tokens/s", "x target-only (ours)"):
        table.add_column(col, justify="right")
    for label, s in [
        ("sample T=0.8", SamplingSettings(temperature=0.8)),
        ("greedy", SamplingSettings(temperature=0.0)),
    ]:
        hf_target = hf_generator(target, mode="target_only")
        hf_assisted = hf_generator(target, mode="assisted", assistant=draft, gamma=4)
        forms: dict[
            str, Callable[..., list[int]]
        ] = {  # each form is called only inside this iteration, with this iteration's settings s
            "target-only (specverify)": lambda p, g, s=s: target_only_generate(target, p, tokens, s, g).tokens,
            "speculative (specverify)": lambda p, g, s=s: (
                speculative_generate(target, draft, p, tokens, s, g, gamma=4).tokens
            ),
            "target-only (transformers)": lambda p, g, s=s, f=hf_target: f(p, tokens, 0, s),
            "assisted (transformers)": lambda p, g, s=s, f=hf_assisted: f(p, tokens, 0, s),
        }
        rates: dict[str, float] = {}
        for name, fn in forms.items():
            fn(ps[0], torch.Generator().manual_seed(0))  # warm-up
            t = time.perf_counter()
            n = sum(len(fn(p, torch.Generator().manual_seed(i))) for i, p in enumerate(ps))
            rates[name] = n / (time.perf_counter() - t)
        base = rates["target-only (specverify)"]
        for name, r in rates.items():
            table.add_row(label, name, f"{r:,.0f}", f"{r / base:.2f}")
    Console().print(table)
