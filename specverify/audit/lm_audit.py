"""Audits on real language models (transformers), where the target's law is computed, not tabled.

``audit_lm`` drives ``generate(prompt, max_new_tokens, seed, settings) -> list[int]`` (any
implementation: specverify's runner, transformers' assisted generation, an HTTP endpoint) and
tests every generated token against the target's processed distribution given its prefix,
computed by the auditor with one teacher-forced pass in float64 (DESIGN.md: references compute in
float64). The test is the default stream test on the pooled tokens (round positions are not
visible to a black-box generator).

``greedy_equivalence`` compares greedy output with target-only greedy token for token; a
divergence is excused only where the target's top-two logits are within ``tie_tol`` (a near-tie
that kernel numerics may flip), and the report gives the margin at every divergence together with
the measured difference between batched and one-token-at-a-time logits.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch

from ..dists import GREEDY, SamplingSettings
from ..errors import ImplementationError
from ..lm.transformers_lm import CausalLM, KVSession
from ..stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, StreamLaw, Verdict, default_stream_test, min_samples_for_tv
from ..stats._stream import DEFAULT_BINS, DEFAULT_COMPONENTS
from .adapters import call_with_timeout

__all__ = ["audit_lm", "greedy_equivalence", "batched_vs_incremental_logit_gap"]


def _auditor(model):
    m = copy.deepcopy(model).to(torch.float64)
    return CausalLM(m)


def audit_lm(generate, target_model, *, prompts: list[list[int]], settings=(SamplingSettings(),), length: int = 4,
             alpha: float = 1e-6, beta: float = 1e-3, eps: float = 0.1, budget_s: float = 120.0, seed: int = 0,
             max_sequences: int | None = None, name: str = "generator", call_timeout: float | None = 60.0,
             greedy_check: bool = True, reference_greedy=None, tie_tol: float = 1e-4, lossy_by_design: bool = False) -> Verdict:
    t0 = time.perf_counter()
    aud = _auditor(target_model)
    n_set = len(settings)
    alpha_s = alpha / n_set
    need = min_samples_for_tv(eps, df=DEFAULT_BINS - 1, alpha=alpha_s / DEFAULT_COMPONENTS, beta=beta)
    checks, evidence = [], []
    eps_reached, total = 0.0, 0
    rng = np.random.default_rng(seed)
    for idx, s in enumerate(settings):
        label = f"settings[{idx}] {s.short()}"
        toks, rows, err = [], [], None
        i = 0
        while len(toks) < need:
            if time.perf_counter() - t0 > budget_s * (idx + 1) / n_set and toks:
                break
            if max_sequences and i >= max_sequences:
                break
            prompt = prompts[i % len(prompts)]
            try:
                seq = call_with_timeout(generate, list(prompt), length, int(rng.integers(2**31)), s, timeout=call_timeout, what=name)
                seq = [int(t) for t in list(seq)[:length]]
            except ImplementationError as exc:
                err = str(exc)
                break
            if len(seq) < length or any(t < 0 or t >= aud.vocab_size for t in seq):
                err = f"{name} returned {seq}; expected {length} ids in [0, {aud.vocab_size})"
                break
            rows.append(aud.sequence_probs(prompt, seq, s))
            toks.extend(seq)
            i += 1
        if err:
            checks.append(CheckOutcome(f"{label}: implementation", FAIL, "exact", err))
            evidence.append(err)
            continue
        table = np.concatenate(rows)
        law = StreamLaw(table)
        res = default_stream_test(law, np.asarray(toks), np.arange(len(toks)), rng=np.random.default_rng([seed, idx]), alpha=alpha_s,
                                  beta=beta, stratum="all generated tokens")
        total += len(toks)
        eps_reached = max(eps_reached, res.min_detectable_tv)
        detail = {"components": [str(c) for c in res.components], "sequences": i, "length": length}
        if res.pvalue <= alpha_s:
            w = res.worst
            cells = "; ".join(f"{c.label}: observed {c.observed:.0f}, expected {c.expected:.1f}" for c in w.worst_cells[:3])
            msg = f"{label}: {w.test} p={w.pvalue:.3g} (x{DEFAULT_COMPONENTS} Bonferroni {res.pvalue:.3g}); TV on its cells {w.tv_estimate:.4f}; {cells}"
            checks.append(CheckOutcome(label, FAIL, "statistical", msg, res.pvalue, res.min_detectable_tv, len(toks), detail))
            evidence.append(msg)
        else:
            checks.append(CheckOutcome(label, PASS, "statistical", f"no deviation of TV >= {res.min_detectable_tv:.4f} over {len(toks):,} tokens",
                                       res.pvalue, res.min_detectable_tv, len(toks), detail))
    if greedy_check:
        try:
            c = greedy_equivalence(generate, target_model, prompts=prompts[:8], length=max(length, 16), name=name, tie_tol=tie_tol,
                                   reference=reference_greedy, call_timeout=call_timeout)
        except ImplementationError as exc:
            c = CheckOutcome("greedy equivalence (tie-aware)", FAIL, "exact", str(exc))
        checks.append(c)
        if c.status == FAIL:
            evidence.append(c.summary)
    status = FAIL if any(c.status == FAIL for c in checks) else (INCONCLUSIVE if eps_reached > eps else PASS)
    return Verdict(status, alpha, beta, eps_reached or math.inf, eps, seed, checks, evidence,
                   {"tokens_per_setting": need} if status == INCONCLUSIVE else None, total, time.perf_counter() - t0, name,
                   lossy_by_design=lossy_by_design)


def batched_vs_incremental_logit_gap(model, prompt: list[int], continuation: list[int]) -> float:
    """max |logit| difference between one pass over prompt + continuation and a cached
    one-token-at-a-time pass: the numerical noise that can flip a near-tie."""
    full = CausalLM(model).logits(list(prompt) + list(continuation))
    s = KVSession(model)
    rows = [s.extend(list(prompt))[-1]]
    for t in continuation[:-1]:
        rows.append(s.extend([t])[-1])
    inc = torch.stack(rows)
    return float((full[len(prompt) - 1 : len(prompt) - 1 + len(continuation)] - inc).abs().max())


def greedy_equivalence(generate, target_model, *, prompts, length=16, name="generator", tie_tol=1e-4, reference=None,
                       call_timeout=None) -> CheckOutcome:
    """Token-for-token comparison with target-only greedy, tie-aware (see the module docstring)."""
    from ..runners import target_only_generate

    lm = CausalLM(target_model)
    divergences, gaps, excused = [], [], 0
    for prompt in prompts:
        want = reference(prompt, length) if reference else target_only_generate(target_model, list(prompt), length, GREEDY, torch.Generator()).tokens
        got = [int(t) for t in call_with_timeout(generate, list(prompt), length, 0, GREEDY, timeout=call_timeout, what=name)][:length]
        gaps.append(batched_vs_incremental_logit_gap(target_model, prompt, want))
        if got == want:
            continue
        j = next(i for i in range(length) if i >= len(got) or got[i] != want[i])
        lg = lm.logits(list(prompt) + want[:j])[-1]
        top2 = torch.topk(lg.double(), 2).values
        margin = float(top2[0] - top2[1])
        if margin <= tie_tol:
            excused += 1
        else:
            divergences.append((prompt, j, got[j] if j < len(got) else None, want[j], margin))
    gap = max(gaps) if gaps else 0.0
    if divergences:
        p, j, g, w, m = divergences[0]
        return CheckOutcome("greedy equivalence (tie-aware)", FAIL, "exact",
                            f"{len(divergences)} of {len(prompts)} prompts diverge from target-only greedy away from any tie; first at "
                            f"token {j}: emitted {g}, target argmax {w}, top-2 logit margin {m:.3g} (> tie tolerance {tie_tol:g}; "
                            f"measured batched-vs-incremental logit gap {gap:.2g})")
    note = f"; {excused} divergence(s) at near-ties (margin <= {tie_tol:g})" if excused else ""
    return CheckOutcome("greedy equivalence (tie-aware)", PASS, "exact",
                        f"{len(prompts)} prompts x {length} tokens equal to target-only greedy{note}; batched-vs-incremental logit gap {gap:.2g}")
