"""Speculative against target-only decoding on larger models (GPU, bf16), with the audit.

    python gpu_runs/run_speedup.py                 # on a GPU: ~1B-parameter target, bf16
    python gpu_runs/run_speedup.py --tiny          # on CPU: tiny models (CI runs this)

The target is built so that a cheap prefix of it predicts it well (``layered_target``: layers
after the first write damped updates), and the draft is that prefix (``early_exit_copy``): the
target pays for every layer while the pair agrees often. Measured: tokens per second of both
loops, acceptance alpha, accepted drafts per round, the draft/target step cost ratio c, the
speedup against the formula (1 - a^(g+1)) / ((1 - a)(g c + 1)), and an audit of the runner
(distribution test against the target's law, tie-aware greedy equivalence). Writes
``results/<name>.json`` and ``results/<name>.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specverify import SamplingSettings  # noqa: E402
from specverify.audit.sources.lm_audit import audit_lm  # noqa: E402
from specverify.lm.transformers_lm import early_exit_copy, layered_target  # noqa: E402
from specverify.runners import speculative_generate, target_only_generate  # noqa: E402
from specverify.theory import expected_speedup, expected_tokens_per_round  # noqa: E402


def alpha_from_rounds(accepted, drafted):
    """MLE of a per-token acceptance under the truncated-geometric model: accepted / (accepted + rejections)."""
    acc = np.asarray(accepted)
    dr = np.asarray(drafted)
    rejections = (acc < dr).sum()
    return float(acc.sum() / max(1, acc.sum() + rejections))


def step_time(model, device, ctx_len, reps):
    from specverify.lm.transformers_lm import KVSession

    s = KVSession(model)
    s.extend(list(range(1, ctx_len)))
    for _ in range(3):
        s.extend([1])
        s.rollback(1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        s.extend([1])
        s.rollback(1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps


class Run(NamedTuple):
    """What every step shares: the options, the device, the pair, the prompts and the results.
    (A NamedTuple, not a dataclass: tests load this script by path, outside sys.modules.)"""

    args: argparse.Namespace
    device: torch.device
    name: str
    tokens: int
    budget: float
    target: torch.nn.Module
    draft: torch.nn.Module
    prompts: list
    results: dict


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--audit-budget", type=float, default=None)
    return ap.parse_args(argv)


def build(args: argparse.Namespace) -> Run:
    """The device, the layered target and its early-exit draft, the prompts, the results header."""
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)
    if args.tiny:
        cfg = dict(vocab=256, hidden=64, layers=6, heads=4)
        dtype, name, tokens, prompts_n, budget = (
            torch.float32,
            "tiny-cpu",
            args.tokens or 48,
            2,
            args.audit_budget or 20,
        )
    else:
        cfg = dict(vocab=32000, hidden=2048, layers=20, heads=16)
        dtype, name, tokens, prompts_n, budget = (
            torch.bfloat16,
            "gpu-1b",
            args.tokens or 256,
            4,
            args.audit_budget or 120,
        )
    target = layered_target(
        "llama", **cfg, seed=0, dtype=dtype, device=str(device), lm_head_scale=6.0, damp=0.05, keep=2
    )
    draft = early_exit_copy(target, layers=2)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, cfg["vocab"], 16).tolist() for _ in range(prompts_n)]
    results = {
        "name": name,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor(),
        "dtype": str(dtype),
        "target_params": sum(p.numel() for p in target.parameters()),
        "draft_params": sum(p.numel() for p in draft.parameters()),
        "gamma": args.gamma,
        "runs": [],
    }
    return Run(args, device, name, tokens, budget, target, draft, prompts, results)


def chain_runs(r: Run) -> None:
    """Speculative against target-only per sampling mode: speed, acceptance, the formula's prediction."""
    args, device, target, draft, prompts, tokens = r.args, r.device, r.target, r.draft, r.prompts, r.tokens
    c = step_time(draft, device, 32, 20) / step_time(target, device, 32, 20)
    r.results["c_draft_over_target"] = c
    for label, s in [
        ("greedy", SamplingSettings(temperature=0.0)),
        ("sample T=1", SamplingSettings()),
        ("sample T=0.7 top_p=0.9", SamplingSettings(temperature=0.7, top_p=0.9)),
    ]:
        gen = torch.Generator(device=device).manual_seed(0)
        t_only = [target_only_generate(target, p, tokens, s, gen) for p in prompts]
        spec = [speculative_generate(target, draft, p, tokens, s, gen, gamma=args.gamma) for p in prompts]
        tps_t = sum(len(x.tokens) for x in t_only) / sum(x.seconds for x in t_only)
        tps_s = sum(len(x.tokens) for x in spec) / sum(x.seconds for x in spec)
        acc = [a for x in spec for a in x.accepted]
        dr = [d for x in spec for d in x.drafted]
        a = alpha_from_rounds(acc, dr)
        tokens_per_round = float(np.mean(np.asarray(acc) + 1))
        run = {
            "mode": label,
            "target_only_tok_s": tps_t,
            "speculative_tok_s": tps_s,
            "measured_speedup": tps_s / tps_t,
            "alpha": a,
            "mean_accepted": float(np.mean(acc)),
            "tokens_per_round": tokens_per_round,
            "predicted_tokens_per_round": float(expected_tokens_per_round(a, args.gamma)),
            "predicted_speedup": float(expected_speedup(a, args.gamma, c)),
        }
        if label == "greedy":
            run["greedy_equal"] = all(x.tokens == y.tokens for x, y in zip(t_only, spec, strict=True))
        r.results["runs"].append(run)
        print(json.dumps(run))


def tree_runs(r: Run) -> None:
    """Trees (issue 6): tokens per target pass, measured against the exact expectation for the trees
    actually drafted, and tokens per second against target-only."""
    from specverify.algorithms.multi_draft import NODE_RULES
    from specverify.runners.tree import (
        LookaheadDrafter,
        ModelTreeDrafter,
        train_eagle_head,
        train_medusa_heads,
        tree_speculative_generate,
    )

    target, device, prompts, tokens = r.target, r.device, r.prompts, r.tokens
    steps = 60 if r.args.tiny else 300
    drafters = {
        "draft-model tree (2x2, top-k, one-hot rule)": ModelTreeDrafter(r.draft, (2, 2), "top_k"),
        "Medusa heads (2x2, one-hot rule)": train_medusa_heads(
            target.float() if device.type == "cpu" else target, steps=steps
        ),
        "EAGLE-style head (2x2, one-hot rule)": train_eagle_head(
            target.float() if device.type == "cpu" else target, steps=steps
        ),
        "lookahead (window 4, 3-grams)": LookaheadDrafter(target),
    }
    r.results["trees"] = []
    s = SamplingSettings(temperature=0.7)
    base = [target_only_generate(target, p, tokens, s, torch.Generator(device=device).manual_seed(0)) for p in prompts]
    tps_base = sum(len(x.tokens) for x in base) / sum(x.seconds for x in base)
    for label, dr in drafters.items():
        try:
            runs = [
                tree_speculative_generate(target, dr, p, tokens, s, np.random.default_rng(1), NODE_RULES["one_hot"])
                for p in prompts
            ]
        except Exception as exc:  # noqa: BLE001 - record and go on: the other rows are still worth having
            r.results["trees"].append({"drafter": label, "error": repr(exc)})
            continue
        em = sum(sum(x.emitted_per_round) for x in runs)
        rounds = sum(len(x.emitted_per_round) for x in runs)
        row = {
            "drafter": label,
            "tokens_per_pass": em / rounds,
            "expected_tokens_per_pass_exact": sum(sum(x.expected_per_round) for x in runs) / rounds,
            "tok_s": sum(len(x.tokens) for x in runs) / sum(x.seconds for x in runs),
            "target_only_tok_s": tps_base,
        }
        row["speedup"] = row["tok_s"] / tps_base
        r.results["trees"].append(row)
        print(json.dumps(row))


def audit_runner(r: Run):
    """The audit of specverify's own speculative runner on this pair (distribution and greedy)."""

    def runner(prompt, n, seed, s):
        return speculative_generate(
            r.target, r.draft, prompt, n, s, torch.Generator(device=r.device).manual_seed(seed), gamma=r.args.gamma
        ).tokens

    v = audit_lm(
        runner,
        r.target,
        prompts=r.prompts,
        settings=(SamplingSettings(temperature=0.7, top_p=0.9),),
        length=4,
        eps=0.2,
        budget_s=r.budget,
        name=f"specverify runner ({r.name})",
    )
    r.results["audit"] = {
        "status": v.status,
        "headline": v.headline(),
        "checks": [(c.name, c.status, c.summary) for c in v.checks],
    }
    print(v.headline())
    return v


def write_results(r: Run, v) -> None:
    """``<out>/<name>.json`` and the markdown tables ``<out>/<name>.md``."""
    res = r.results
    out = Path(r.args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{r.name}.json").write_text(json.dumps(res, indent=1))
    md = [
        f"# {r.name}: {res['gpu']} ({res['dtype']}), target {res['target_params'] / 1e6:.1f}M params, draft "
        f"{res['draft_params'] / 1e6:.1f}M, gamma {r.args.gamma}, c = {res['c_draft_over_target']:.3f}",
        "",
        "| mode | target-only tok/s | speculative tok/s | speedup | predicted speedup | alpha | tokens/round | "
        "predicted tokens/round |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for x in res["runs"]:
        md.append(
            f"| {x['mode']} | {x['target_only_tok_s']:.1f} | {x['speculative_tok_s']:.1f} | "
            f"{x['measured_speedup']:.2f} | "
            f"{x['predicted_speedup']:.2f} | {x['alpha']:.3f} | {x['tokens_per_round']:.2f} | "
            f"{x['predicted_tokens_per_round']:.2f} |"
        )
    md += [
        "",
        "| tree drafter | tokens / target pass | exact expectation | tok/s | speedup vs target-only |",
        "| --- | --- | --- | --- | --- |",
    ]
    for x in res["trees"]:
        if "error" in x:
            md.append(f"| {x['drafter']} | error: {x['error'][:80]} | | | |")
        else:
            md.append(
                f"| {x['drafter']} | {x['tokens_per_pass']:.2f} | {x['expected_tokens_per_pass_exact']:.2f} | "
                f"{x['tok_s']:.1f} | {x['speedup']:.2f} |"
            )
    md += ["", f"Audit: {v.headline()}"]
    (out / f"{r.name}.md").write_text("\n".join(md) + "\n")


def main(argv=None):
    r = build(parse_args(argv))
    chain_runs(r)
    tree_runs(r)
    v = audit_runner(r)
    write_results(r, v)
    return r.results


if __name__ == "__main__":
    main()
