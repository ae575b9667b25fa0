"""The audit run: plan, sample in batches with early stopping and checkpoints, test, conclude.

Plan. For each sampling setting s in the plan, the audit wants every stratum's deviation of TV >=
eps (on the sorted-mass projection) detected with probability >= 1 - beta, at a family-wise
false-fail rate alpha shared by Bonferroni across settings and Holm across strata. The tokens
needed follow from :func:`specverify.stats.min_samples_for_tv`.

Run. Batches of rounds (or sequences) are drawn until the plan is met or the time budget is spent.
After every batch an e-process on the pooled sorted-mass cells is updated (anytime-valid: the
audit may stop with FAIL as soon as it crosses 1/alpha_seq, half of the setting's rate being
reserved for it) and a checkpoint is written, so
``resume=True`` continues an interrupted audit without losing a sample.

Conclude. The stratified default test runs on everything collected; exact checks (a uniform of 0
against a zero-probability draft, seeded reproducibility) run beside it; the verdict follows
DESIGN.md's contract.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from ..catalogue._engine import Generation
from ..dists import SamplingSettings
from ..errors import ImplementationError, SpecVerifyError
from ..lm.synthetic import make_markov_pair, make_positional_pair
from ..stats import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    CheckOutcome,
    MultinomialEProcess,
    StreamLaw,
    Verdict,
    min_detectable_tv,
    min_samples_for_tv,
    stratified_stream_test,
)
from ..stats._stratified import WHITEBOX_STRATA_WITH_DRAFTS
from ..stats._stream import DEFAULT_BINS, DEFAULT_COMPONENTS
from ..theory import expected_tokens_position_dependent
from .adapters import Adapter
from .exact_checks import EXACT_CHECKS

__all__ = ["AuditConfig", "audit", "DEFAULT_SETTINGS"]

DEFAULT_SETTINGS = (
    SamplingSettings(),
    SamplingSettings(temperature=0.7, top_p=0.9),
    SamplingSettings(temperature=0.9, top_k=12, top_p=0.85, min_p=0.08),
)


@dataclasses.dataclass
class AuditConfig:
    alpha: float = 1e-6
    beta: float = 1e-3
    eps: float = 0.05
    budget_s: float = 60.0
    seed: int = 0
    gamma: int = 4
    vocab: int = 64
    settings: tuple = DEFAULT_SETTINGS
    target_alpha: float = 0.7  # acceptance of the synthetic pair
    batch: int = 4000
    max_units: int | None = None
    checkpoint: str | None = None
    resume: bool = False
    progress: bool = False
    exact_checks: bool = True


def _pair(adapter: Adapter, cfg: AuditConfig, settings, idx):
    seed = cfg.seed * 1000 + idx
    if adapter.harness == "sequence":
        return make_markov_pair(cfg.vocab, alpha=cfg.target_alpha, seed=seed, settings=settings)
    return make_positional_pair(cfg.vocab, cfg.gamma, alpha=cfg.target_alpha, seed=seed, settings=settings)


def _white_box(adapter) -> bool:
    """The white-box strata apply: a kernel-harness implementation that declares the full rule."""
    return getattr(adapter, "rule", None) == "full" and adapter.harness == "kernel"


def _concat(parts: list[Generation]) -> Generation:
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return Generation(z, z, z, z, z, 0)
    seq_off, toks, rows, pos, seqs, accs, rounds = 0, [], [], [], [], [], 0
    for g in parts:
        toks.append(g.tokens), rows.append(g.row), pos.append(g.position), seqs.append(g.sequence + seq_off)
        accs.append(g.num_accepted)
        seq_off += (g.sequence.max() + 1) if len(g.sequence) else 0
        rounds += g.rounds
    drafts = np.concatenate([g.drafts for g in parts]) if all(g.drafts is not None for g in parts) else None
    return Generation(*(np.concatenate(x) for x in (toks, rows, pos, seqs, accs)), rounds, drafts, parts[0].drafts_from_implementation)


def _save_checkpoint(path, state):
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:  # a file object: numpy adds no suffix; os.replace makes it atomic
        np.savez_compressed(f, **{k: v for k, v in state.items() if isinstance(v, np.ndarray)},
                            meta=json.dumps({k: v for k, v in state.items() if not isinstance(v, np.ndarray)}))
    os.replace(tmp, path)


def _load_checkpoint(path):
    with np.load(path, allow_pickle=False) as z:
        state = {k: z[k] for k in z.files if k != "meta"}
        state.update(json.loads(str(z["meta"])))
    return state


def _progress(cfg):
    if not cfg.progress:
        return None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} tokens"), TimeElapsedColumn())


def audit(adapter: Adapter, config: AuditConfig | None = None, **overrides) -> Verdict:
    """Audit ``adapter``; keyword overrides set fields of :class:`AuditConfig`."""
    cfg = dataclasses.replace(config or AuditConfig(), **overrides)
    t0 = time.perf_counter()
    n_set = len(cfg.settings)
    # Bonferroni across settings; inside a setting, half of the rate goes to the sequential
    # e-process (which may stop the run early) and half to the fixed-n family (stream strata and
    # white-box strata under Holm), so that either way of failing keeps the family-wise rate.
    alpha_setting = cfg.alpha / n_set
    alpha_s = alpha_setting / 2
    alpha_seq = alpha_setting / 2
    strata = cfg.gamma + 2  # positions 0..gamma plus the pooled stratum
    if _white_box(adapter):
        strata += WHITEBOX_STRATA_WITH_DRAFTS  # the white-box strata join the Holm family
    per_test_alpha = alpha_s / strata
    need = min_samples_for_tv(cfg.eps, df=DEFAULT_BINS - 1, alpha=per_test_alpha / DEFAULT_COMPONENTS, beta=cfg.beta)
    checks: list[CheckOutcome] = []
    evidence: list[str] = []
    total_tokens = 0
    eps_reached = 0.0
    state = _load_checkpoint(cfg.checkpoint) if (cfg.resume and cfg.checkpoint and Path(cfg.checkpoint).exists()) else None
    if state is not None and state.get("fingerprint") != _fingerprint(adapter, cfg):
        raise SpecVerifyError(f"checkpoint {cfg.checkpoint} belongs to another audit (different adapter or options); "
                              "delete it or run without --resume")
    done_settings = state.get("done", []) if state else []
    prog = _progress(cfg)
    if prog:
        prog.start()
    try:
        for idx, s in enumerate(cfg.settings):
            label = f"settings[{idx}] {s.short()}"
            if state and idx < len(done_settings):
                checks.append(CheckOutcome(**done_settings[idx]))
                total_tokens += checks[-1].n or 0
                continue
            pair = _pair(adapter, cfg, s, idx)
            law = StreamLaw(pair.target_table(s))
            rng = np.random.default_rng([cfg.seed, idx])
            parts: list[Generation] = []
            ep = MultinomialEProcess(DEFAULT_BINS)
            if state and state.get("current") == idx:
                parts = [Generation(state["tokens"], state["row"], state["position"], state["sequence"], state["num_accepted"], int(state["rounds"]),
                                    state.get("drafts"), bool(state.get("drafts_from_implementation", False)))]
                rng.bit_generator.state = state["rng_state"]
                ep = MultinomialEProcess.from_state(state["eprocess"])
            n_tok = sum(len(g.tokens) for g in parts)
            pos_counts = np.bincount(np.concatenate([g.position for g in parts]), minlength=cfg.gamma + 1) if parts else np.zeros(cfg.gamma + 1, int)
            task = prog.add_task(label, total=need) if prog else None
            stopped_early = False
            error: str | None = None
            # Until every position stratum has the planned tokens; positions reached by under 5% of
            # the tokens are pooled into one tail stratum (see _strata) and planned as one.
            while not parts or _strata_min(pos_counts) < need:
                if time.perf_counter() - t0 > cfg.budget_s * (idx + 1) / n_set and n_tok > 0:
                    break
                if cfg.max_units and sum(g.rounds for g in parts) >= cfg.max_units:
                    break
                try:
                    g = adapter.generate(pair, cfg.batch, cfg.gamma, rng, s)
                except ImplementationError as exc:
                    error = str(exc)
                    break
                parts.append(g)
                n_tok += len(g.tokens)
                pc = np.bincount(g.position, minlength=len(pos_counts))
                if len(pc) > len(pos_counts):
                    pos_counts = np.pad(pos_counts, (0, len(pc) - len(pos_counts)))
                pos_counts = pos_counts + pc[: len(pos_counts)]
                cell_of, mass, _ = law.cells("sorted_mass", DEFAULT_BINS)
                ep.update(cell_of[g.row, g.tokens], mass[g.row], groups=g.row)
                if prog:
                    prog.update(task, completed=int(min(_strata_min(pos_counts), need)))
                if cfg.checkpoint:
                    allg = _concat(parts)
                    _save_checkpoint(cfg.checkpoint, {
                        "fingerprint": _fingerprint(adapter, cfg), "done": [dataclasses.asdict(c) for c in checks if c.name.startswith("settings[")],
                        "current": idx, "tokens": allg.tokens, "row": allg.row, "position": allg.position, "sequence": allg.sequence,
                        "num_accepted": allg.num_accepted, "rounds": allg.rounds,
                        "drafts": allg.drafts, "drafts_from_implementation": allg.drafts_from_implementation, "rng_state": rng.bit_generator.state, "eprocess": ep.state()})
                if ep.rejects(alpha_seq):
                    stopped_early = True
                    break
            if error is not None:
                checks.append(CheckOutcome(f"{label}: implementation", FAIL, "exact", error))
                evidence.append(f"{label}: {error}")
                continue
            gen = _concat(parts)
            total_tokens += len(gen.tokens)
            # White-box strata (issue: stratified tests) for declared full-rule kernels, each
            # against its own exact law, in the same Holm family as the stream strata.
            wb = []
            if _white_box(adapter):
                from ..stats import holm, whitebox_round_tests

                wb = whitebox_round_tests(gen.tokens, gen.position, gen.sequence, gen.num_accepted,
                                          pair.target_table(s)[: cfg.gamma + 1], pair.draft_table(s)[: cfg.gamma],
                                          drafts=gen.drafts, drafts_from_implementation=gen.drafts_from_implementation,
                                          rng=np.random.default_rng([cfg.seed, idx, 3]))
            # The eps a PASS states is computed at the first Holm step of the whole family.
            results, adj = stratified_stream_test(law, gen.tokens, gen.row, _strata(gen.position, pos_counts), rng=np.random.default_rng([cfg.seed, idx, 1]),
                                                  alpha=alpha_s, beta=cfg.beta, extra_family=len(wb))
            if wb:
                allp = [r.pvalue for r in results] + [w.result.pvalue for w in wb]
                adj_all = holm(allp)
                adj = adj_all[: len(results)]
                for w, a in zip(wb, adj_all[len(results):]):
                    w.adjusted_pvalue = float(a)
            worst = int(np.argmin(adj))
            pooled = results[0]
            eps_here = max(r.min_detectable_tv for r in results)
            eps_reached = max(eps_reached, eps_here)
            from ..stats import pit_values

            u = pit_values(law, gen.tokens, gen.row, np.random.default_rng([cfg.seed, idx, 2]))
            sm = results[worst].components[0]
            detail = {
                "pit_hist": np.bincount(np.minimum((u * 20).astype(int), 19), minlength=20).tolist(),
                "worst_stratum": results[worst].stratum,
                "worst_stratum_bins": {"observed": sm.observed, "expected": sm.expected},
                "strata": [{"stratum": r.stratum, "n": r.n, "pvalue_holm": float(a), "min_detectable_tv": r.min_detectable_tv,
                            "components": [str(c) for c in r.components]} for r, a in zip(results, adj)],
                "eprocess_max_log_e": ep.max_log_e, "stopped_early": stopped_early,
                "acceptance": _acceptance(pair, s, gen, cfg.gamma, adapter),
            }
            wb_fail = [w for w in wb if w.adjusted_pvalue <= alpha_s]
            detail["whitebox"] = [{"stratum": w.stratum, "pvalue_holm": w.adjusted_pvalue, "result": str(w.result)} for w in wb]
            failed = adj[worst] <= alpha_s or ep.rejects(alpha_seq) or bool(wb_fail)
            if failed and wb_fail and adj[worst] > alpha_s and not ep.rejects(alpha_seq):
                w = min(wb_fail, key=lambda x: x.adjusted_pvalue)
                msg = f"{label}, white-box {w.stratum}: {w.result} (Holm-adjusted {w.adjusted_pvalue:.3g})"
                evidence.append(msg)
                checks.append(CheckOutcome(label, FAIL, "statistical", msg, w.adjusted_pvalue, max(r.min_detectable_tv for r in results), len(gen.tokens), detail))
            elif failed:
                w = results[worst].worst
                cells = "; ".join(f"{c.label}: observed {c.observed:.0f}, expected {c.expected:.1f}" for c in w.worst_cells[:3])
                msg = (f"{label}, {results[worst].stratum}: {w.test} p={w.pvalue:.3g} (Holm-adjusted {adj[worst]:.3g}); "
                       f"TV on its cells {w.tv_estimate:.4f} [{w.tv_interval[0]:.4f}, {w.tv_interval[1]:.4f}]; {cells}")
                if ep.rejects(alpha_seq) and adj[worst] > alpha_s:
                    msg = f"{label}: sequential e-process crossed 1/alpha (max e = {math.exp(min(ep.max_log_e, 700)):.3g}) after {ep.t:,} tokens"
                evidence.append(msg)
                checks.append(CheckOutcome(label, FAIL, "statistical", msg, float(adj[worst]), eps_here, len(gen.tokens), detail))
            else:
                checks.append(CheckOutcome(label, PASS, "statistical",
                                           f"no deviation of TV >= {eps_here:.4f} in any of {len(results)} strata "
                                           f"(sorted-mass projection; pooled {pooled.min_detectable_tv:.4f})", float(adj[worst]), eps_here, len(gen.tokens), detail))
            if prog:
                prog.update(task, completed=need)
        dev = getattr(getattr(adapter, "sampler", None), "exact_deviation", None)
        if dev is not None:
            s0 = cfg.settings[0]
            mean_tv, max_tv = dev(_pair(adapter, cfg, s0, 0), s0)
            label = "lossy by design" if getattr(adapter, "lossy_by_design", False) else ("exact by construction" if mean_tv < 1e-12 else "inexact")
            checks.append(CheckOutcome("deviation of the rule, computed exactly", PASS if mean_tv < 1e-12 else FAIL, "exact",
                                       f"{label}: TV between the first emitted token's law and the target's, computed by enumeration: "
                                       f"mean {mean_tv:.4g}, max {max_tv:.4g} over contexts", lossy_by_design=getattr(adapter, "lossy_by_design", False)))
            if mean_tv >= 1e-12:
                evidence.append(checks[-1].summary)
        if cfg.exact_checks:
            for fn in EXACT_CHECKS:
                try:
                    c = fn(adapter, cfg)
                except ImplementationError as exc:
                    c = CheckOutcome(fn.__name__.strip("_").replace("_", " "), FAIL, "exact", str(exc))
                if c is not None:
                    checks.append(c)
                    if c.status == FAIL:
                        evidence.append(f"{c.name}: {c.summary}")
    finally:
        if prog:
            prog.stop()
    if any(c.status == FAIL for c in checks):
        status = FAIL
    elif eps_reached > cfg.eps:
        status = INCONCLUSIVE
    else:
        status = PASS
    needed = None
    if status == INCONCLUSIVE:
        needed = {"tokens_per_setting": need, "collected_tokens": total_tokens, "budget_s_estimate": round(cfg.budget_s * need * n_set / max(total_tokens, 1), 1)}
    v = Verdict(status, cfg.alpha, cfg.beta, eps_reached if eps_reached else math.inf, cfg.eps, cfg.seed, checks, evidence, needed,
                total_tokens, time.perf_counter() - t0, adapter.name, lossy_by_design=getattr(adapter, "lossy_by_design", False))
    if cfg.checkpoint and Path(cfg.checkpoint).exists() and status != INCONCLUSIVE:
        Path(cfg.checkpoint).unlink()
    return v


def _tail_start(pos_counts) -> int:
    share = pos_counts / max(pos_counts.sum(), 1)
    ok = np.nonzero(share >= 0.05)[0]
    return int(ok.max()) if len(ok) else 0


def _strata(position, pos_counts):
    """Stratum per token: its position in the round, positions past the last one holding >= 5% of
    the tokens pooled with it (a rule on positions only, never on token values)."""
    return np.minimum(position, _tail_start(pos_counts))


def _strata_min(pos_counts) -> int:
    j = _tail_start(pos_counts)
    merged = np.append(pos_counts[:j], pos_counts[j:].sum())
    return int(merged.min())


def _acceptance(pair, s, gen: Generation, gamma, adapter):
    """Measured accepted drafts per round against the full rule's product-form prediction."""
    from ..theory import accepted_length_law_position_dependent

    acc = gen.num_accepted
    out = {"rounds": int(len(acc)), "mean_accepted": float(acc.mean()) if len(acc) else None,
           "accepted_hist": np.bincount(acc, minlength=gamma + 1).tolist() if len(acc) else []}
    if hasattr(pair, "gamma") and len(acc):
        p, q = pair.target_table(s), pair.draft_table(s)
        a = [float(np.minimum(p[j], q[j]).sum()) for j in range(gamma)]
        out["predicted_mean_accepted_full_rule"] = float(expected_tokens_position_dependent(a) - 1)
        out["predicted_accepted_law_full_rule"] = [float(x) for x in accepted_length_law_position_dependent(a)]
        out["per_position_alpha"] = a
    return out


def _fingerprint(adapter, cfg):
    d = dataclasses.asdict(cfg)
    for k in ("checkpoint", "resume", "progress", "budget_s"):
        d.pop(k)
    d["settings"] = [x.short() for x in cfg.settings]
    return json.dumps([adapter.name, d], sort_keys=True, default=str)
