"""Audits on real language models (transformers), where the target's law is computed, not tabled.

``audit_lm`` drives ``generate(prompt, max_new_tokens, seed, settings) -> list[int]`` (any
implementation: specverify's runner, transformers' assisted generation, an HTTP endpoint) and
tests every generated token against the target's processed distribution given its prefix,
computed by the auditor with one teacher-forced pass in float64 (docs/verdict.md: references compute
in float64). It shares the table audit's defaults and plan (:mod:`specverify.audit.plan`: alpha 1e-6,
beta 1e-3, eps 0.05, :data:`DEFAULT_SETTINGS`, one test family per setting, sample size from the
plan, the budget a cap that gives INCONCLUSIVE) and its conclusion (:mod:`specverify.audit.conclude`).
Sequences are ``4 (gamma + 1)`` tokens by default, several rounds at the largest gamma in use, so
bugs that appear from the second round on are in scope. The test is the default stream test on the
pooled tokens (round positions are not visible to a black-box generator). A setting the
implementation declines (it raises NotImplementedError) is reported as unsupported, never as a FAIL.

``greedy_equivalence`` compares greedy output with target-only greedy token for token; a
divergence is excused only where the target's top-two logits are within ``tie_tol`` (a near-tie
that kernel numerics may flip), and the report gives the margin at every divergence together with
the measured difference between batched and one-token-at-a-time logits.

``common_shape_generator`` adapts the usual third-party signature ``generate(target, draft,
input_ids, max_new_tokens, *, do_sample, temperature, top_p, top_k, seed)``.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from ..dists import GREEDY, SamplingSettings
from ..errors import ImplementationError, MalformedOutputError, UnsupportedSettingError
from ..lm.transformers_lm import CausalLM, KVSession
from ..stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, StreamLaw, Verdict, default_stream_test
from .adapters import call_with_timeout
from .conclude import UNSUPPORTED, failure_message, make_verdict
from .plan import DEFAULT_SETTINGS, TestFamily

__all__ = ["audit_lm", "greedy_equivalence", "batched_vs_incremental_logit_gap", "common_shape_generator"]

GREEDY_NAME = "greedy equivalence (tie-aware)"


def _auditor(model):
    m = copy.deepcopy(model).to(torch.float64)
    return CausalLM(m)


def common_shape_generator(fn, target, draft=None):
    """``generate(prompt, n, seed, settings)`` over ``fn(target, draft, input_ids, max_new_tokens, *,
    do_sample, temperature, top_p, top_k, seed)`` (input_ids a [1, L] LongTensor; the return value
    the whole sequence or only the new tokens, as a tensor or a list). Settings it cannot express
    (min-p, penalties) raise NotImplementedError, which the audit reports as unsupported."""

    def generate(prompt, n, seed, s: SamplingSettings):
        if s.min_p or s.uses_history:
            raise NotImplementedError(f"the common shape has no min-p or penalties ({s.short()})")
        ids = torch.tensor([list(prompt)], dtype=torch.long)
        out = fn(
            target,
            draft,
            ids,
            n,
            do_sample=not s.is_greedy,
            temperature=s.temperature or 1.0,
            top_p=s.top_p,
            top_k=s.top_k,
            seed=seed,
        )
        out = out.tolist() if hasattr(out, "tolist") else list(out)
        if out and isinstance(out[0], list):
            out = out[0]
        return out[len(prompt) :] if len(out) >= len(prompt) + n and out[: len(prompt)] == list(prompt) else out

    generate.__name__ = getattr(fn, "__name__", "generate")
    return generate


def _call_batch(generate, prompts, length, seeds, s, *, timeout, name):
    """``len(prompts)`` sequences: one ``generate.batch`` call when the generator has one (engines
    that schedule requests together; the call gets ``timeout`` per sequence), else one call each."""
    if hasattr(generate, "batch"):
        t = timeout * len(prompts) if timeout else None
        out = call_with_timeout(generate.batch, [list(p) for p in prompts], length, seeds, s, timeout=t, what=name)
        if len(out) != len(prompts):
            raise MalformedOutputError(f"{name}.batch returned {len(out)} sequences for {len(prompts)} prompts")
        return [list(x) for x in out]
    return [
        list(call_with_timeout(generate, list(p), length, sd, s, timeout=timeout, what=name))
        for p, sd in zip(prompts, seeds, strict=False)
    ]


def _sample_setting(
    generate, aud, prompts, s, *, length, need, rng, deadline, max_sequences, timeout, name, start=((), (), 0)
):
    """(tokens, law rows, sequences, error, unsupported, complete) for one setting, continuing
    from ``start`` = (tokens, law rows, sequences) already collected."""
    toks, rows, i = list(start[0]), list(start[1]), start[2]
    size = max(1, int(getattr(generate, "batch_size", 1)))
    while len(toks) < need:
        if (time.monotonic() > deadline and toks) or (max_sequences and i >= max_sequences):
            return toks, rows, i, None, None, False
        k = min(size, -(-(need - len(toks)) // length), (max_sequences - i) if max_sequences else size)
        batch = [prompts[(i + j) % len(prompts)] for j in range(k)]
        seeds = [int(rng.integers(2**31)) for _ in range(k)]
        try:
            seqs = _call_batch(generate, batch, length, seeds, s, timeout=timeout, name=name)
        except UnsupportedSettingError as exc:
            return toks, rows, i, None, str(exc), False
        except ImplementationError as exc:
            return toks, rows, i, str(exc), None, False
        seqs = [[int(t) for t in seq[:length]] for seq in seqs]
        for seq in seqs:
            if len(seq) < length or any(t < 0 or t >= aud.vocab_size for t in seq):
                bad = f"{name} returned {seq}; expected {length} ids in [0, {aud.vocab_size})"
                return toks, rows, i, bad, None, False
        rows.extend(aud.batch_sequence_probs(batch, seqs, s))
        toks.extend(t for seq in seqs for t in seq)
        i += len(seqs)
    return toks, rows, i, None, None, True


def _conclude_setting(label, fam: TestFamily, toks, rows, n_seq, length, complete, eps, rng) -> CheckOutcome:
    law = StreamLaw(np.concatenate(rows))
    res = default_stream_test(
        law,
        np.asarray(toks),
        np.arange(len(toks)),
        rng=rng,
        alpha=fam.alpha_fixed,
        beta=fam.beta,
        stratum="all generated tokens",
    )
    detail = {"components": [str(c) for c in res.components], "sequences": n_seq, "length": length}
    if res.pvalue <= fam.alpha_fixed:
        return CheckOutcome(
            name=label,
            status=FAIL,
            kind="statistical",
            summary=failure_message(label, "all generated tokens", res.worst, res.pvalue),
            pvalue=res.pvalue,
            eps=res.min_detectable_tv,
            n=len(toks),
            details=detail,
        )
    if complete and res.min_detectable_tv <= eps * (1 + 1e-9):
        return CheckOutcome(
            name=label,
            status=PASS,
            kind="statistical",
            summary=f"no deviation of TV >= {res.min_detectable_tv:.4f} over {len(toks):,} tokens",
            pvalue=res.pvalue,
            eps=res.min_detectable_tv,
            n=len(toks),
            details=detail,
        )
    return CheckOutcome(
        name=label,
        status=INCONCLUSIVE,
        kind="statistical",
        summary=f"not reached: eps {res.min_detectable_tv:.4f} > {eps:g} after "
        f"{len(toks):,} tokens ({fam.tokens_per_stratum():,} planned); no deviation found",
        pvalue=res.pvalue,
        eps=res.min_detectable_tv,
        n=len(toks),
        details=detail,
    )


def _collect_with_looks(generate, aud, prompts, s, label, fam, *, looks, need, eps, test_rng, length, **kw):
    """Sample one setting up to each look in turn (group-sequential); stop at the first look whose
    test FAILs. (tokens, laws, sequences, error, unsupported, complete, early FAIL or None)."""
    state: tuple = ((), (), 0)
    for n_look, look in enumerate(looks, 1):
        toks, rows, n_seq, err, unsup, complete = _sample_setting(
            generate, aud, prompts, s, length=length, need=max(1, round(need * look)), start=state, **kw
        )
        state = (toks, rows, n_seq)
        if unsup or err or not complete or n_look == len(looks):
            return toks, rows, n_seq, err, unsup, complete, None
        c = _conclude_setting(label, fam, toks, rows, n_seq, length, False, eps, test_rng())
        if c.status == FAIL:
            c.summary += f" (stopped at look {n_look} of {len(looks)}: {len(toks):,} tokens)"
            return toks, rows, n_seq, err, unsup, False, c
    raise AssertionError("looks end at 1.0")


# long: a 20-option keyword signature and its docstring; the body itself is about 30 lines
def audit_lm(
    generate,
    target_model,
    *,
    prompts: list[list[int]],
    settings=DEFAULT_SETTINGS,
    length: int | None = None,
    gamma: int = 4,
    alpha: float = 1e-6,
    beta: float = 1e-3,
    eps: float = 0.05,
    budget_s: float = 600.0,
    seed: int = 0,
    max_sequences: int | None = None,
    name: str = "generator",
    call_timeout: float | None = 60.0,
    greedy_check: bool = True,
    target_greedy=None,
    tie_tol: float = 1e-4,
    lossy_by_design: bool = False,
    looks: tuple[float, ...] = (1.0,),
) -> Verdict:
    """Audit ``generate`` against ``target_model`` (module docstring). ``settings=()`` with
    ``greedy_check=True`` is a greedy-only audit. ``looks`` (fractions of the planned sample,
    e.g. ``(0.25, 0.5, 1.0)``) tests each setting at several sample sizes and stops at the first
    FAIL, with alpha split over the looks: a gross bug is found with a quarter of the tokens, at
    the price of a slightly larger planned sample for a PASS."""
    t0 = time.monotonic()
    length = length or 4 * (gamma + 1)
    aud = _auditor(target_model)
    looks = _checked_looks(looks)
    # Each setting is tested at every look: alpha is split over settings and looks (union bound).
    fam = TestFamily(alpha / (max(len(settings), 1) * len(looks)), beta, eps, strata=1, sequential=False)
    need = fam.tokens_per_stratum()
    rng = np.random.default_rng(seed)
    checks, total = [], 0
    for idx, s in enumerate(settings):
        c, n = _setting_outcome(
            generate, aud, prompts, s, f"settings[{idx}] {s.short()}", fam, looks=looks, length=length, need=need,
            rng=rng, eps=eps, test_rng=lambda idx=idx: np.random.default_rng([seed, idx]),
            deadline=t0 + budget_s * (idx + 1) / len(settings), max_sequences=max_sequences, timeout=call_timeout,
            name=name,
        )  # fmt: skip
        checks.append(c)
        total += n
    if greedy_check:
        checks.append(
            greedy_equivalence(
                generate,
                target_model,
                prompts=prompts[:8],
                length=max(length, 16),
                name=name,
                tie_tol=tie_tol,
                target_greedy=target_greedy,
                call_timeout=call_timeout,
            )  # fmt: skip
        )
    evidence = [c.summary for c in checks if c.status == FAIL]
    return make_verdict(
        checks, evidence, alpha=alpha, beta=beta, eps=eps, seed=seed, needed=_needed(checks, need, length),
        samples=total, seconds=time.monotonic() - t0, subject=name, lossy_by_design=lossy_by_design,
    )  # fmt: skip


def _checked_looks(looks) -> tuple[float, ...]:
    looks = tuple(looks)
    if not looks or looks[-1] != 1.0 or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] <= 0:
        raise ValueError(
            f"looks={looks!r}: fractions of the planned sample, increasing, ending at 1.0 (e.g. (0.25, 0.5, 1.0))"
        )
    return looks


def _setting_outcome(generate, aud, prompts, s, label, fam, *, length, eps, test_rng, **kw) -> tuple[CheckOutcome, int]:
    """The check of one setting (and the tokens it tested): unsupported, an implementation
    failure (exact), or the stream test at the look that decided it."""
    toks, rows, n_seq, err, unsup, complete, early = _collect_with_looks(
        generate, aud, prompts, s, label, fam, length=length, eps=eps, test_rng=test_rng, **kw
    )
    if unsup:
        return CheckOutcome(name=f"{label}: implementation", status=UNSUPPORTED, kind="exact", summary=unsup), 0
    if err:
        return CheckOutcome(name=f"{label}: implementation", status=FAIL, kind="exact", summary=err), 0
    return early or _conclude_setting(label, fam, toks, rows, n_seq, length, complete, eps, test_rng()), len(toks)


def _needed(checks, need: int, length: int) -> dict | None:
    """What would settle an INCONCLUSIVE: the planned tokens per setting."""
    short = [c for c in checks if c.status == INCONCLUSIVE]
    if not short:
        return None
    return {
        "statement": f"{len(short)} setting(s) short of {need:,} tokens: raise --budget or --rounds (sequences of "
        f"{length} tokens; about {-(-need // length):,} per setting)",
        "tokens_per_setting": need,
    }


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


def greedy_equivalence(
    generate, target_model, *, prompts, length=16, name="generator", tie_tol=1e-4, target_greedy=None, call_timeout=None
) -> CheckOutcome:
    """Token-for-token comparison with target-only greedy, tie-aware (see the module docstring)."""
    from ..runners import target_only_generate

    lm = CausalLM(target_model)
    divergences, gaps, excused = [], [], 0
    for prompt in prompts:
        want = (
            target_greedy(prompt, length)
            if target_greedy
            else target_only_generate(target_model, list(prompt), length, GREEDY, torch.Generator()).tokens
        )
        try:
            got = [
                int(t)
                for t in call_with_timeout(generate, list(prompt), length, 0, GREEDY, timeout=call_timeout, what=name)
            ][:length]
        except UnsupportedSettingError as exc:
            return CheckOutcome(name=GREEDY_NAME, status=UNSUPPORTED, kind="exact", summary=str(exc))
        except ImplementationError as exc:
            return CheckOutcome(name=GREEDY_NAME, status=FAIL, kind="exact", summary=str(exc))
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
        return CheckOutcome(
            name=GREEDY_NAME,
            status=FAIL,
            kind="exact",
            summary=f"{len(divergences)} of {len(prompts)} prompts diverge from target-only greedy away from any tie; "
            f"first at token {j}: emitted {g}, target argmax {w}, top-2 logit margin {m:.3g} "
            f"(> tie tolerance {tie_tol:g}; measured batched-vs-incremental logit gap {gap:.2g})",
        )
    note = f"; {excused} divergence(s) at near-ties (margin <= {tie_tol:g})" if excused else ""
    return CheckOutcome(
        name=GREEDY_NAME,
        status=PASS,
        kind="exact",
        summary=f"{len(prompts)} prompts x {length} tokens equal to target-only greedy{note}; "
        f"batched-vs-incremental logit gap {gap:.2g}",
    )
