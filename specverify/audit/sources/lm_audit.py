"""Audits on real language models (transformers), where the target's law is computed, not tabled.

``audit_lm`` drives ``generate(prompt, max_new_tokens, seed, settings) -> list[int]`` (any
implementation: specverify's runner, transformers' assisted generation, an HTTP endpoint) and
tests every generated token against the target's processed distribution given its prefix,
computed by the auditor with one teacher-forced pass in float64 (docs/verdict.md: references compute
in float64). It shares the table audit's defaults and plan (:mod:`specverify.audit.pipeline.plan`: alpha 1e-6,
beta 1e-3, eps 0.05, :data:`DEFAULT_SETTINGS`, one test family per setting, sample size from the
plan, the budget a cap that gives INCONCLUSIVE) and its conclusion (:mod:`specverify.audit.pipeline.conclude`).
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
import math
import time

import numpy as np
import torch
from scipy.stats import poisson_binom

from ...dists import GREEDY, SamplingSettings
from ...errors import ImplementationError, MalformedOutputError, UnsupportedSettingError
from ...lm.transformers_lm import CausalLM, KVSession
from ...stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, StreamLaw, Verdict, default_stream_test
from ..pipeline.conclude import UNSUPPORTED, failed_outcome, failure_of, make_verdict
from ..pipeline.plan import DEFAULT_SETTINGS, TestFamily
from .adapters import call_with_timeout

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
        s.require_conventions(who="the common shape (transformers' conventions)")
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


def _laws(aud, prompts, seqs, s, logit_tol: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sequence: the law rows each token is tested against and marks [m, 2] (token at an
    ambiguous filter boundary, bound on the engine's mass there). With ``logit_tol`` the law of a
    position is its law restricted to the tokens kept under every perturbation within the
    tolerance (specverify.dists._boundary); without, marks are zero."""
    if logit_tol <= 0 or s.is_greedy:
        rows = aud.batch_sequence_probs(prompts, seqs, s)
        return rows, [np.zeros((len(r), 2)) for r in rows]
    rows, marks = [], []
    for (probs, b), seq in zip(aud.batch_sequence_boundaries(prompts, seqs, s, tol=logit_tol), seqs, strict=True):
        at = np.arange(len(seq))
        amb = b.ambiguous[at, seq]
        kept = np.where(b.sure, probs, 0.0)
        rows.append(kept / kept.sum(-1, keepdims=True))
        marks.append(np.stack([amb.astype(float), np.where(b.ambiguous.any(-1), b.ambiguous_bound, 0.0)], axis=1))
    return rows, marks


def _sample_setting(
    generate, aud, prompts, s, *, length, need, rng, deadline, max_sequences, timeout, name, logit_tol=0.0,
    start=((), (), 0, ()),
):  # fmt: skip
    """(tokens, law rows, sequences, error, unsupported, complete, marks) for one setting,
    continuing from ``start`` = (tokens, law rows, sequences, marks) already collected. ``need``
    counts tested tokens: those at an ambiguous filter boundary (``logit_tol``) do not count."""
    toks, rows, i, marks = list(start[0]), list(start[1]), start[2], list(start[3])
    size = max(1, int(getattr(generate, "batch_size", 1)))
    while (short := need - _tested(toks, marks)) > 0:
        if (time.monotonic() > deadline and toks) or (max_sequences and i >= max_sequences):
            return toks, rows, i, None, None, False, marks
        k = min(size, -(-short // length), (max_sequences - i) if max_sequences else size)
        batch = [prompts[(i + j) % len(prompts)] for j in range(k)]
        seeds = [int(rng.integers(2**31)) for _ in range(k)]
        try:
            seqs = _call_batch(generate, batch, length, seeds, s, timeout=timeout, name=name)
        except UnsupportedSettingError as exc:
            return toks, rows, i, None, str(exc), False, marks
        except ImplementationError as exc:
            return toks, rows, i, str(exc), None, False, marks
        seqs = [[int(t) for t in seq[:length]] for seq in seqs]
        for seq in seqs:
            if len(seq) < length or any(t < 0 or t >= aud.vocab_size for t in seq):
                bad = f"{name} returned {seq}; expected {length} ids in [0, {aud.vocab_size})"
                return toks, rows, i, bad, None, False, marks
        laws, seq_marks = _laws(aud, batch, seqs, s, logit_tol)
        rows.extend(laws)
        marks.extend(seq_marks)
        toks.extend(t for seq in seqs for t in seq)
        i += len(seqs)
    return toks, rows, i, None, None, True, marks


def _tested(toks, marks) -> int:
    """Tokens the stream test sees: all but those emitted at an ambiguous filter boundary."""
    return len(toks) - int(sum(m[:, 0].sum() for m in marks))


def _boundary_count(marks: np.ndarray, logit_tol: float) -> dict:
    """The tokens emitted at ambiguous filter boundaries against the most the tolerance allows: a
    count stochastically below a Poisson-binomial of the per-position bounds (each bound holds
    given the past), so its upper tail is a valid p-value."""
    amb = marks[:, 0] > 0
    bounds = np.minimum(marks[:, 1][marks[:, 1] > 0], 1.0)
    n = int(amb.sum())
    pvalue = float(poisson_binom(bounds).sf(n - 1)) if n else 1.0
    return {
        "logit_tol": logit_tol,
        "excused": n,
        "at_most_expected": round(float(bounds.sum()), 3),
        "positions_with_ambiguity": len(bounds),
        "pvalue": pvalue,
    }


def _boundary_outcome(label, fam: TestFamily, boundary: dict, n: int) -> CheckOutcome | None:
    """A FAIL when more tokens sit at ambiguous filter boundaries than logit errors within the
    tolerance explain (the engine keeps tokens its filters should drop)."""
    if boundary["pvalue"] > fam.alpha_fixed:
        return None
    return CheckOutcome(
        name=label,
        status=FAIL,
        kind="statistical",
        summary=f"{label}: {boundary['excused']} tokens at top-k/top-p/min-p boundaries, more than logit errors "
        f"of at most {boundary['logit_tol']:g} explain (at most {boundary['at_most_expected']:.1f} expected; "
        f"p = {boundary['pvalue']:.2g}): the filters keep tokens they should drop",
        pvalue=boundary["pvalue"],
        n=n,
        details={"boundary": boundary},
    )


def _conclude_setting(
    label, fam: TestFamily, toks, rows, n_seq, length, complete, eps, rng, marks=None, logit_tol=0.0
) -> CheckOutcome:
    """The setting's verdict; with ``logit_tol``, tokens at ambiguous filter boundaries are left
    out of the stream test (their positions' laws are already restricted to the sure tokens) and
    counted against their bound instead."""
    toks = np.asarray(toks)
    keep = np.ones(len(toks), dtype=bool)
    boundary = None
    if logit_tol > 0 and marks:
        m = np.concatenate(marks)
        keep = m[:, 0] == 0
        boundary = _boundary_count(m, logit_tol)
        if (c := _boundary_outcome(label, fam, boundary, len(toks))) is not None:
            return c
    law = StreamLaw(np.concatenate(rows)[keep])
    res = default_stream_test(
        law,
        toks[keep],
        np.arange(int(keep.sum())),
        rng=rng,
        alpha=fam.alpha_fixed,
        beta=fam.beta,
        stratum="all generated tokens",
    )
    detail = {"components": [str(c) for c in res.components], "sequences": n_seq, "length": length}
    note = ""
    if boundary is not None:
        detail["boundary"] = boundary
        if boundary["excused"]:
            note = (
                f"; {boundary['excused']} more at filter boundaries within logit tolerance "
                f"{logit_tol:g} left out (at most {boundary['at_most_expected']:.1f} expected)"
            )
    return _stream_outcome(label, fam, res, int(keep.sum()), complete, eps, detail, note)


def _stream_outcome(label, fam: TestFamily, res, n_tok: int, complete, eps, detail, note) -> CheckOutcome:
    """FAIL at the family's alpha, PASS when the sample reached eps, else INCONCLUSIVE."""
    common = dict(name=label, kind="statistical", pvalue=res.pvalue, eps=res.min_detectable_tv, n=n_tok, details=detail)
    if res.pvalue <= fam.alpha_fixed:
        common.pop("name")
        return failed_outcome(label, failure_of("all generated tokens", res.worst, res.pvalue), note, **common)
    if complete and res.min_detectable_tv <= eps * (1 + 1e-9):
        summary = f"no deviation of TV >= {res.min_detectable_tv:.4f} over {n_tok:,} tokens"
        return CheckOutcome(status=PASS, summary=summary + note, **common)
    summary = (
        f"not reached: eps {res.min_detectable_tv:.4f} > {eps:g} after "
        f"{n_tok:,} tokens ({fam.tokens_per_stratum():,} planned); no deviation found"
    )
    return CheckOutcome(status=INCONCLUSIVE, summary=summary + note, **common)


def _collect_with_looks(generate, aud, prompts, s, label, fam, *, looks, need, eps, test_rng, length, **kw):
    """Sample one setting up to each look in turn (group-sequential); stop at the first look whose
    test FAILs. (tokens, laws, sequences, error, unsupported, complete, early FAIL or None, marks)."""
    state: tuple = ((), (), 0, ())
    tol = kw.get("logit_tol", 0.0)
    for n_look, look in enumerate(looks, 1):
        toks, rows, n_seq, err, unsup, complete, marks = _sample_setting(
            generate, aud, prompts, s, length=length, need=max(1, round(need * look)), start=state, **kw
        )
        state = (toks, rows, n_seq, marks)
        if unsup or err or not complete or n_look == len(looks):
            return toks, rows, n_seq, err, unsup, complete, None, marks
        c = _conclude_setting(label, fam, toks, rows, n_seq, length, False, eps, test_rng(), marks, tol)
        if c.status == FAIL:
            c.summary += f" (stopped at look {n_look} of {len(looks)}: {len(toks):,} tokens)"
            return toks, rows, n_seq, err, unsup, False, c, marks
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
    logit_tol: float = 0.0,
) -> Verdict:
    """Audit ``generate`` against ``target_model`` (module docstring). ``settings=()`` with
    ``greedy_check=True`` is a greedy-only audit. ``looks`` (fractions of the planned sample,
    e.g. ``(0.25, 0.5, 1.0)``) tests each setting at several sample sizes and stops at the first
    FAIL, with alpha split over the looks: a gross bug is found with a quarter of the tokens, at
    the price of a slightly larger planned sample for a PASS. ``logit_tol`` bounds |engine logit -
    float64 logit| (an engine in float16 or bfloat16, or with a low-precision KV cache): a token
    whose inclusion by top-k, top-p or min-p flips within it is left out of the test and counted
    against the most such tokens the tolerance allows (a second test: alpha is halved)."""
    t0 = time.monotonic()
    length = length or 4 * (gamma + 1)
    aud = _auditor(target_model)
    looks = _checked_looks(looks)
    # Each setting is tested at every look: alpha is split over settings and looks (union bound).
    if not (np.isfinite(logit_tol) and logit_tol >= 0):
        raise ValueError(f"logit_tol={logit_tol!r}: a bound on |engine logit - float64 logit|, finite and >= 0")
    tests = max(len(settings), 1) * len(looks) * (2 if logit_tol > 0 else 1)
    fam = TestFamily(alpha / tests, beta, eps, strata=1, sequential=False)
    need = fam.tokens_per_stratum()
    rng = np.random.default_rng(seed)
    checks, total = [], 0
    for idx, s in enumerate(settings):
        c, n = _setting_outcome(
            generate, aud, prompts, s, f"settings[{idx}] {s.short()}", fam, looks=looks, length=length, need=need,
            rng=rng, eps=eps, test_rng=lambda idx=idx: np.random.default_rng([seed, idx]),
            deadline=t0 + budget_s * (idx + 1) / len(settings), max_sequences=max_sequences, timeout=call_timeout,
            name=name, logit_tol=logit_tol,
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
    toks, rows, n_seq, err, unsup, complete, early, marks = _collect_with_looks(
        generate, aud, prompts, s, label, fam, length=length, eps=eps, test_rng=test_rng, **kw
    )
    if unsup:
        return CheckOutcome(name=f"{label}: implementation", status=UNSUPPORTED, kind="exact", summary=unsup), 0
    if err:
        return CheckOutcome(name=f"{label}: implementation", status=FAIL, kind="exact", summary=err), 0
    tol = kw.get("logit_tol", 0.0)
    return early or _conclude_setting(
        label, fam, toks, rows, n_seq, length, complete, eps, test_rng(), marks, tol
    ), len(toks)


def _needed(checks, need: int, length: int) -> dict | None:
    """What would settle an INCONCLUSIVE: the planned tokens per setting."""
    short = [c for c in checks if c.status == INCONCLUSIVE]
    if not short:
        return None
    tested = sum(c.n or 0 for c in short)
    total = sum((c.n or 0) + (c.details or {}).get("boundary", {}).get("excused", 0) for c in short)
    per_seq = length * (tested / total if total and tested else 1.0)  # tokens at filter boundaries do not count
    head = f"{len(short)} setting(s) short of {need:,} tested tokens"
    tail = f"(sequences of {length} tokens; about {math.ceil(need / per_seq):,} per setting)"
    return {
        "statement": f"{head}: raise --budget or --rounds {tail}",
        "statement_python": f"{head}: raise budget_s or max_sequences {tail}",  # audit_lm's keywords
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
    from ...runners import target_only_generate

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
