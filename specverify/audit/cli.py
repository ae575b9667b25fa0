"""``specverify audit`` and ``specverify selftest``."""

from __future__ import annotations

import json
import sys
import time

from ..errors import SpecVerifyError

EXIT = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}

CHECKS = """checks run by an audit:
  distribution   per sampling setting: the stratified default test (sorted-mass bins, top-K + rest,
                 salted hash buckets, PIT / Anderson-Darling, log-likelihood score) per position in the round and pooled,
                 Holm across strata, Bonferroni across settings; a sequential e-process may stop early
  white-box      with --full-rule (and for catalogue samplers), per setting in the same Holm family: drafts ~ q
                 (samplers that draw them), acceptance given the draft ~ Bernoulli(min(1, p/q)), rejected draft
                 and replacement independent, repeat e-process, accepted ~ min(p, q)/beta, replacements ~
                 (p - q)+/(1 - beta), bonus ~ p
  acceptance     measured accepted drafts per round against the full rule's product-form prediction (reported)
  boundary       exact: acceptance uniforms forced to 0 never accept a draft with p(x) = 0 (catalogue samplers)
  reproducible   exact: the same seed gives the same output"""


def add_commands(sub):
    a = sub.add_parser("audit", help="audit an implementation; exit 0 PASS, 1 FAIL, 2 usage error, 3 INCONCLUSIVE")
    a.add_argument("target", nargs="?", help="'reference', or a catalogue entry name (see selftest)")
    g = a.add_mutually_exclusive_group()
    g.add_argument("--round", metavar="MOD:FN", help="step(prefix, draft, target, gamma, rng) -> tokens")
    g.add_argument("--kernel", metavar="MOD:FN", help="kernel(draft_tokens, draft_probs, target_probs, generator) -> [B, g+1]")
    g.add_argument("--generator", metavar="MOD:FN", help="generate(prompt, max_new_tokens, seed, model) -> ids")
    g.add_argument("--cmd", metavar="COMMAND", help="a process speaking the JSON-lines protocol")
    a.add_argument("--one-hot", action="store_true", help="the kernel takes no draft probabilities")
    a.add_argument("--full-rule", action="store_true",
                   help="the kernel implements accept iff u < p/q with the (p - q)+ residual: also test each stratum of "
                        "a round (acceptance given the draft, replacements, draft/replacement independence, bonus)")
    a.add_argument("--alpha", type=float, default=1e-6, help="family-wise false-fail rate (default 1e-6)")
    a.add_argument("--beta", type=float, default=1e-3, help="false-pass rate at eps (default 1e-3)")
    a.add_argument("--eps", type=float, default=0.05, help="total variation to detect (default 0.05)")
    a.add_argument("--budget", type=float, default=60.0, help="time budget in seconds (default 60)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--gamma", type=int, default=4)
    a.add_argument("--vocab", type=int, default=64)
    a.add_argument("--temperature", type=float, action="append", help="audit these temperatures (repeatable)")
    a.add_argument("--top-k", type=int, default=0)
    a.add_argument("--top-p", type=float, default=1.0)
    a.add_argument("--min-p", type=float, default=0.0)
    a.add_argument("--call-timeout", type=float, default=30.0, help="per-call timeout in seconds")
    a.add_argument("--checkpoint", help="checkpoint file (written after every batch)")
    a.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    a.add_argument("--json", metavar="FILE", help="write the verdict as JSON (schema specverify.verdict/1)")
    a.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    a.add_argument("--list-checks", action="store_true")
    a.add_argument("--no-progress", action="store_true")
    a.set_defaults(func=run_audit)

    s = sub.add_parser("selftest", help="audit every catalogued bug and decoy; non-zero unless all bugs FAIL and all decoys PASS")
    s.add_argument("--eps", type=float, default=0.05)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", metavar="FILE")
    s.set_defaults(func=run_selftest)


def _adapter(args):
    from ..catalogue import BUGS, DECOYS, ChainSampler
    from .adapters import GeneratorAdapter, KernelAdapter, RoundAdapter, SamplerAdapter, SubprocessAdapter, load_callable

    t = args.call_timeout
    if args.round:
        return RoundAdapter(load_callable(args.round), call_timeout=t)
    if args.kernel:
        if args.full_rule and args.one_hot:
            raise SpecVerifyError("--full-rule and --one-hot exclude each other: the one-hot rule has no draft probabilities")
        return KernelAdapter(load_callable(args.kernel), one_hot=args.one_hot, call_timeout=t, rule="full" if args.full_rule else None)
    if args.generator:
        return GeneratorAdapter(load_callable(args.generator), call_timeout=t)
    if args.cmd:
        return SubprocessAdapter(args.cmd, call_timeout=t)
    name = args.target or "reference"
    table = {c.name: c for c in [ChainSampler, *BUGS, *DECOYS]}
    if name not in table:
        raise SpecVerifyError(f"unknown audit target {name!r}; use 'reference', a catalogue name ({', '.join(sorted(table)[:5])}, ...), "
                              "or one of --round/--kernel/--generator/--cmd")
    return SamplerAdapter(table[name]())


def _settings(args):
    from ..dists import SamplingSettings
    from .run import DEFAULT_SETTINGS

    if not args.temperature and not args.top_k and args.top_p == 1.0 and not args.min_p:
        return DEFAULT_SETTINGS
    temps = args.temperature or [1.0]
    return tuple(SamplingSettings(temperature=t, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p) for t in temps)


def print_verdict(v, console=None):
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"specverify audit: {v.subject}")
    for col in ("check", "kind", "status", "n", "eps", "summary"):
        table.add_column(col, overflow="fold")
    for c in v.checks:
        color = {"PASS": "green", "FAIL": "red"}.get(c.status, "yellow")
        table.add_row(c.name, c.kind, f"[{color}]{c.status}[/]", f"{c.n:,}" if c.n else "", f"{c.eps:.4f}" if c.eps else "", c.summary)
    console.print(table)
    console.print(v.headline())


def run_audit(args) -> int:
    from .run import AuditConfig, audit

    if args.list_checks:
        print(CHECKS)
        return 0
    try:
        adapter = _adapter(args)
        cfg = AuditConfig(alpha=args.alpha, beta=args.beta, eps=args.eps, budget_s=args.budget, seed=args.seed, gamma=args.gamma,
                          vocab=args.vocab, settings=_settings(args), checkpoint=args.checkpoint, resume=args.resume,
                          progress=not args.no_progress and sys.stderr.isatty())
        v = audit(adapter, cfg)
    except SpecVerifyError as exc:
        print(f"specverify: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if "adapter" in locals() and hasattr(adapter, "close"):
            adapter.close()
    print_verdict(v)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(v.to_dict(), f, indent=1)
    if args.html:
        from .report import write_html

        write_html(v, args.html)
    return EXIT[v.status]


def run_selftest(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..catalogue import BUGS, DECOYS
    from .adapters import SamplerAdapter
    from .run import audit

    rows, ok = [], True
    for cls in [*BUGS, *DECOYS]:
        t = time.perf_counter()
        v = audit(SamplerAdapter(cls()), eps=args.eps, seed=args.seed)
        expected = "PASS" if cls.exact else "FAIL"
        good = v.status == expected
        ok &= good
        rows.append((cls.name, "decoy" if cls.exact else "bug", v.status, expected, v.samples, time.perf_counter() - t, good,
                     (v.evidence[0] if v.evidence else v.headline())[:160]))
    table = Table(title="specverify selftest: every bug must FAIL, every decoy must PASS")
    for col in ("entry", "kind", "verdict", "expected", "samples", "seconds", "ok"):
        table.add_column(col)
    for r in rows:
        table.add_row(r[0], r[1], r[2], r[3], f"{r[4]:,}", f"{r[5]:.1f}", "[green]yes[/]" if r[6] else "[red]NO[/]")
    Console().print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(zip(("entry", "kind", "verdict", "expected", "samples", "seconds", "ok", "evidence"), r)) for r in rows], f, indent=1)
    print("selftest:", "all bugs caught, all decoys passed" if ok else "MISMATCH (see table)")
    return 0 if ok else 1
