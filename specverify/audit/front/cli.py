"""``specverify audit`` and ``specverify selftest``.

Every option is checked before any sampling; a bad one ends the command with exit code 2 and one
line, ``specverify: error: <problem>; <fix>``. See docs/verdict.md for what a verdict states and
docs/adapters.md for the shapes an implementation may take.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ...errors import InvalidSettingsError, SpecVerifyError

if TYPE_CHECKING:  # the CLI imports what an audit needs only when it runs one
    from rich.console import Console

    from ...dists import SamplingSettings
    from ...stats import CheckOutcome, Verdict
    from ..pipeline.config import AuditConfig, LMAuditConfig, Rule
    from ..sources.adapters import Adapter, SubprocessAdapter
    from ..sources.http_adapter import HttpGenerate

#: the verdict's exit codes; 2 is a usage error and 4 an internal error (specverify.cli), never verdicts
# the statuses by name: stats.Status is a str enum, equal to and hashed as its name; importing
# specverify.stats here would load scipy before a usage error or --help could be answered
PASS, FAIL, INCONCLUSIVE, UNSUPPORTED = "PASS", "FAIL", "INCONCLUSIVE", "UNSUPPORTED"
EXIT: dict[str, int] = {PASS: 0, FAIL: 1, INCONCLUSIVE: 3, UNSUPPORTED: 5}
EXIT_USAGE = 2

CHECKS = """checks run by an audit:
  distribution   per sampling setting: the stratified default test (sorted-mass bins, top-K + rest,
                 salted hash buckets, PIT / Anderson-Darling, log-likelihood score) per position in the round
                 and pooled, Holm across strata, Bonferroni across settings; a sequential e-process may stop early
  white-box      with --full-rule (and for catalogue samplers), per setting in the same Holm family: drafts ~ q
                 (samplers that draw them), acceptance given the draft ~ Bernoulli(min(1, p/q)), rejected draft
                 and replacement independent, repeat e-process, accepted ~ min(p, q)/beta, replacements ~
                 (p - q)+/(1 - beta), bonus ~ p
  block          with --rule block (and for kernels or steps that declare it), per setting in the same Holm
                 family: kept drafts given the drafts ~ P(tau = i | x) (Pearson on tau x expected-tau bands),
                 the token after no kept draft ~ (p - q)+, after tau kept ~ (w_tau p - q)+, bonus ~ p,
                 drafts ~ q (round steps)
  acceptance     observed accepted drafts per round against the full rule's product-form prediction (reported)
  boundary       exact: acceptance uniforms forced to 0 never accept a draft with p(x) = 0 (catalogue samplers)
  greedy         exact: at temperature 0 (and with --greedy) every emitted token is the target's argmax given its
                 prefix, ties to the lowest id; for models and endpoints, tie-aware token-for-token equality with
                 target-only greedy (a divergence is excused only at a near-tie of the top-two logits); round
                 steps and generators also over 8 sequences of --long-length tokens, LM audits over that length
  requests       exact (LM generators, endpoints): a request ends at its first stop id or max_new_tokens (tokens
                 after a stop, an early end, more ids than asked, ids outside the vocabulary are findings);
                 returned logprobs equal the target's law within logprob_tol; the stop unit also counts its stops
                 against the law's P(stop) (union of Ville bounds); the long unit is tested per offset bucket
  round steps    a stop unit (low-overlap pair, the last id heavy: 5% of the target's mass; --stop-token-ids):
                 a request ends at the first stop a round emits, and the stops are counted against the law's
                 P(stop) in the unit's Holm family; the 512-token unit also tests each offset bucket (0-63,
                 64-127, 128-255, 256-511) on its own, in the same family
  differential   exact: a kernel that takes injected uniforms is run beside the reference on the same draws and
                 must emit the same tokens
  reproducible   exact: the same seed gives the same output
  seeds          exact (generators): six requests of one prompt with six seeds give six different samples, each
                 long enough that a repeat under the target law has probability at most alpha / 1000 (LM audits:
                 a repeat FAILs when its own probability is that small); seeded=True must reproduce a request and
                 batch_invariant=True must give it the same tokens alone and among concurrent requests; where
                 seed=None is a request without a seed (endpoints), two unseeded requests, each sent after one
                 with the same seed, must not repeat
  two-sample     with --baseline-endpoint: per position, salted hash buckets of the speculative endpoint's tokens
                 against the non-speculative endpoint's, Holm across positions and settings
  reference      with --reference-endpoint: the one-sample tests against the law the non-speculative endpoint
                 reports (prompt_logprobs); with --reference-logprobs K, tokens outside its top K are counted
                 against the bound on their mass, as tokens at filter boundaries are"""

# Positional arguments each shape is called with (docs/adapters.md).
SIGNATURES = {
    "round": ("step(prefix, draft, target, gamma, rng)", "step(prefix, draft, target, gamma, rng, settings)"),
    "kernel": (
        "kernel(draft_tokens, draft_probs, target_probs, generator)",
        "kernel(draft_tokens, draft_logits, target_logits, settings, generator)",
    ),
    "generator": ("generate(prompt, max_new_tokens, seed, model)", "generate(prompt, max_new_tokens, seed, model)"),
    "lm_generator": ("make(target, draft)", "make(target, draft)"),
}


ENDPOINT_LENGTH = 4  # tokens per request of an endpoint audit

#: what is audited: a shape of docs/adapters.md, a --cmd process, an --endpoint, or a catalogue entry
Shape = Literal["round", "kernel", "generator", "lm_generator", "cmd", "endpoint", "catalogue"]
#: the sampling settings the options name (None: the audit's defaults)
Settings = tuple["SamplingSettings", ...] | None
_P = TypeVar("_P", bound=argparse.ArgumentParser)


class UsageError(SpecVerifyError):
    """A bad option: exit code 2 with one line, before any sampling."""


def add_commands(sub: argparse._SubParsersAction[_P]) -> None:
    a = sub.add_parser(
        "audit",
        help="audit an implementation; exit 0 PASS, 1 FAIL, 2 usage error, 3 INCONCLUSIVE, 5 UNSUPPORTED",
        description="Audit a speculative-decoding implementation for losslessness. Exit codes: 0 PASS, 1 FAIL, "
        "2 usage or input error, 3 INCONCLUSIVE, 4 internal error of specverify, 5 UNSUPPORTED (the implementation "
        "declined every setting audited). The contract: docs/verdict.md.",
    )
    _add_what_to_audit(a.add_argument_group("what to audit (a catalogue entry, or one of the shapes)"))
    _add_law_source_options(a.add_argument_group("endpoints: where the target's law comes from"))
    _add_request_options(a.add_argument_group("request-level units and endpoint traffic"))
    _add_rule_options(a.add_argument_group("the rule and the interface the implementation declares"))
    _add_plan_options(a.add_argument_group("rates, sizes and models"))
    _add_settings_options(a.add_argument_group("sampling settings (default: the plan's grid)"))
    _add_run_options(a.add_argument_group("running and reporting"))
    a.set_defaults(func=run_audit)

    s = sub.add_parser(
        "selftest", help="audit every catalogued bug and decoy; non-zero unless all bugs FAIL and all decoys PASS"
    )
    s.add_argument("--eps", type=float, default=0.05)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", metavar="FILE")
    s.set_defaults(func=run_selftest)


def _add_what_to_audit(grp: argparse._ArgumentGroup) -> None:
    """The implementation under audit: a catalogue entry or one of the shapes of docs/adapters.md."""
    grp.add_argument("target", nargs="?", help="'reference', or a catalogue entry name (see selftest)")
    g = grp.add_mutually_exclusive_group()
    g.add_argument("--round", metavar="MOD:FN", help="step(prefix, draft, target, gamma, rng) -> tokens of one round")
    g.add_argument(
        "--kernel", metavar="MOD:FN", help="kernel(draft_tokens, draft_probs, target_probs, generator) -> [B, g+1]"
    )
    g.add_argument("--generator", metavar="MOD:FN", help="generate(prompt, max_new_tokens, seed, model) -> ids")
    g.add_argument(
        "--lm-generator",
        metavar="MOD:FN",
        help="make(target, draft) -> generate(prompt, max_new_tokens, seed, settings): audited on specverify's "
        "tiny transformers pairs at the request level (stops, long outputs, seeds, logprobs; docs/adapters.md)",
    )
    g.add_argument("--cmd", metavar="COMMAND", help="a process speaking the JSON-lines protocol (docs/protocol.md)")
    g.add_argument(
        "--endpoint",
        metavar="URL",
        help="an OpenAI-compatible /v1/completions endpoint (token-id prompts), "
        "audited against the target's law computed from --model",
    )


def _add_law_source_options(grp: argparse._ArgumentGroup) -> None:
    """An endpoint's reference: a local model, a baseline endpoint (two-sample) or a reference endpoint."""
    grp.add_argument(
        "--baseline-endpoint",
        metavar="URL",
        help="with --endpoint: compare it with this non-speculative endpoint (two-sample; no local model needed)",
    )
    grp.add_argument(
        "--reference-endpoint",
        metavar="URL",
        help="with --endpoint: read the target's law from this non-speculative endpoint of the same model "
        "(vLLM's prompt_logprobs) instead of computing it from --model: one-sample, no local model",
    )
    grp.add_argument(
        "--reference-logprobs",
        type=int,
        default=-1,
        metavar="K",
        help="with --reference-endpoint: tokens whose log-probabilities the reference reports per position "
        "(default -1: every token, vLLM started with --max-logprobs -1; with K the rest is bounded, not known)",
    )
    grp.add_argument(
        "--model",
        metavar="DIR|builtin[:VOCAB[:SEED]]",
        default=None,
        help="with --endpoint: the target model, a local model directory or 'builtin' (default: the seeded model "
        "`specverify serve` serves by default; builtin:VOCAB:SEED for serve's --vocab and --seed)",
    )
    grp.add_argument(
        "--length", type=int, default=None, help=f"with --endpoint: tokens per request (default {ENDPOINT_LENGTH})"
    )
    grp.add_argument(
        "--logit-tol",
        type=float,
        default=0.0,
        help="with --endpoint: how far the engine's logits may be from the float64 target's (fp16/bf16 engines, "
        "low-precision KV caches); a token whose inclusion by top-k/top-p/min-p flips within it is left out and "
        "counted against the most the tolerance allows (default 0: exact)",
    )
    grp.add_argument(
        "--temperature-last",
        action="store_true",
        help="with --endpoint: the server applies temperature after top-k/top-p/min-p (llama.cpp's server)",
    )


def _add_request_options(grp: argparse._ArgumentGroup) -> None:
    """Stop ids, logprobs, concurrency and long outputs: the request-level units."""
    grp.add_argument(
        "--stop-token-ids",
        type=lambda x: tuple(int(t) for t in x.split(",") if t.strip()),
        default=None,
        help="ids that end a request in the stop unit, comma-separated; with --endpoint sent as stop_token_ids "
        "(default: none, no stop unit; pick ids with real mass under the model, e.g. its EOS); with --round the "
        "ids the stop unit makes heavy (default: the last id; '' for no stop unit)",
    )
    grp.add_argument(
        "--check-logprobs",
        choices=["processed", "raw"],
        default=None,
        help="with --endpoint: check the token_logprobs the server returns against the target's law, processed "
        "by the request's settings or raw (vLLM's logprobs_mode); off by default",
    )
    grp.add_argument(
        "--concurrency",
        type=int,
        default=4,
        metavar="N",
        help="with --endpoint: requests in flight at once (default 4; the server batches them, as in production)",
    )
    grp.add_argument(
        "--batch-invariant",
        action="store_true",
        help="with --endpoint: the server promises that a seeded request's tokens do not depend on the requests "
        "batched with it (vLLM's batch-invariant mode); the seed check sends it alone and among others",
    )
    grp.add_argument(
        "--long-length",
        type=int,
        default=512,
        help="with --endpoint: tokens per request of the long unit, crossing cache block boundaries (default 512; "
        "0: no long unit)",
    )


def _add_rule_options(grp: argparse._ArgumentGroup) -> None:
    """What the implementation declares: its rule (white-box strata) and whether it applies the settings."""
    grp.add_argument("--one-hot", action="store_true", help="the kernel takes no draft probabilities")
    grp.add_argument(
        "--full-rule",
        action="store_true",
        help="the kernel (or round step) implements accept iff u < p/q with the (p - q)+ residual: also test each "
        "stratum of a round (acceptance given the draft, replacements, draft/replacement independence, bonus)",
    )
    grp.add_argument(
        "--rule",
        choices=["full", "block"],
        default=None,
        help="the rule the kernel (or round step) implements: 'full' is --full-rule; 'block' is block verification "
        "(Sun et al., ICLR 2025): also test the drafts it keeps given the drafts and the token after them",
    )
    grp.add_argument(
        "--logits",
        action="store_true",
        help="the implementation takes raw logits plus the sampling settings and applies them itself",
    )
    grp.add_argument(
        "--parity-pairs",
        choices=["alternate", "both"],
        default="alternate",
        help="with --logits: each setting after the first runs on one model pair, low and high overlap in turn "
        "(default), or on both (every knob is shown rejections and full acceptances; about twice the time)",
    )
    grp.add_argument("--greedy", action="store_true", help="the implementation decodes greedily (--round, --generator)")


def _add_plan_options(grp: argparse._ArgumentGroup) -> None:
    """The guarantee (alpha, beta, eps), the sample size and time cap, and the audit's synthetic models."""
    grp.add_argument("--alpha", type=float, default=1e-6, help="family-wise false-fail rate (default 1e-6)")
    grp.add_argument("--beta", type=float, default=1e-3, help="false-pass rate at eps (default 1e-3)")
    grp.add_argument("--eps", type=float, default=0.05, help="total variation to detect (default 0.05)")
    grp.add_argument(
        "--budget",
        type=float,
        default=600.0,
        help="time cap in seconds (default 600): sampling stops at the plan or --rounds, never at a time, "
        "unless this cap is reached, which makes the verdict INCONCLUSIVE",
    )
    grp.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="N",
        help="rounds (or sequences) per audit unit; makes the verdict a function of implementation, seed and "
        "options only; the budget becomes a cap (a long unit draws the tokens of N 32-token sequences in "
        "fewer, longer ones)",
    )
    grp.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="sample in N processes (importable implementations). Default: the cores this process may use, for "
        "--round, --kernel, --generator and catalogue targets on Linux, where every batch then runs in a fresh "
        "fork, so that a state the implementation keeps across calls cannot carry from batch to batch and the "
        "verdict is the same for any N; for --lm-generator on Linux too, where N units are sampled at once, each "
        "in a fresh fork on one torch thread, with 1 too (the same verdict for any N, for a generator that keeps a "
        "state across requests as well); 1 (in this process, batches in "
        f"order) for --cmd, --endpoint, --context transformers and an implementation that loaded "
        f"{', '.join(FORK_UNSAFE)} (forking them is not safe)",
    )
    grp.add_argument("--seed", type=int, default=0)
    grp.add_argument("--gamma", type=int, default=4, help="draft tokens per round (default 4)")
    grp.add_argument(
        "--vocab", type=int, default=64, help="vocabulary size of the audit's synthetic models (default 64)"
    )
    grp.add_argument(
        "--context",
        choices=["tables", "transformers"],
        default="tables",
        help="the models round steps and generators are audited on: hashed order-2, position-dependent "
        "tables (default, fast) or two seeded tiny transformers models (the law depends on the whole prefix)",
    )
    grp.add_argument(
        "--greedy-ties",
        choices=["lowest-id", "any"],
        default="lowest-id",
        help="greedy reference on exact ties of the top probability: the lowest id (target-only greedy "
        "decoding, default) or any of the tied tokens",
    )


def _add_settings_options(grp: argparse._ArgumentGroup) -> None:
    """One sampling setting given on the command line in place of the plan's defaults."""
    grp.add_argument("--temperature", type=float, action="append", help="audit these temperatures (repeatable)")
    grp.add_argument("--top-k", type=int, default=0)
    grp.add_argument("--top-p", type=float, default=1.0)
    grp.add_argument("--min-p", type=float, default=0.0)
    grp.add_argument("--repetition-penalty", type=float, default=1.0, help="over prompt and generated tokens")
    grp.add_argument("--presence-penalty", type=float, default=0.0, help="over generated tokens only (OpenAI)")
    grp.add_argument("--frequency-penalty", type=float, default=0.0, help="over generated tokens only (OpenAI)")
    grp.add_argument(
        "--penalty-window",
        type=int,
        default=0,
        metavar="N",
        help="the penalties count the last N of their tokens (llama.cpp's repeat_last_n); 0: all (default)",
    )
    grp.add_argument(
        "--logit-bias",
        type=_bias_option,
        default=(),
        metavar="ID:BIAS,...",
        help="added to the raw logits before everything else (OpenAI logit_bias), e.g. 0:3,1:-3",
    )


def _add_run_options(grp: argparse._ArgumentGroup) -> None:
    """Timeouts, checkpoints, reports and what the run prints."""
    grp.add_argument("--call-timeout", type=float, default=30.0, help="per-call timeout in seconds")
    grp.add_argument("--checkpoint", help="checkpoint file (written after every batch)")
    grp.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    grp.add_argument("--json", metavar="FILE", help="write the verdict as JSON (schema specverify.verdict/2)")
    grp.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    grp.add_argument("--list-checks", action="store_true", help="describe every check and exit")
    grp.add_argument("--no-progress", action="store_true")
    grp.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first unit that FAILs (the status is the same; the units after it and the exact checks "
        "are listed as SKIPPED): a quicker red in CI",
    )
    grp.add_argument(
        "--no-diagnosis",
        action="store_true",
        help="report a FAIL without ranking its likely root causes (the diagnosis takes seconds to a minute; "
        "the verdict is the same)",
    )


# ---------------------------------------------------------------------------------------------
# Validation: everything that can be checked before sampling is checked here.


def _shape(args: argparse.Namespace) -> Shape:
    shapes: tuple[Shape, ...] = ("round", "kernel", "generator", "lm_generator", "cmd", "endpoint")
    for k in shapes:
        if getattr(args, k) is not None:
            return k
    return "catalogue"


def _in_unit_interval(name: str, x: float, example: str) -> None:
    if not (0 < x < 1):  # also false for NaN
        raise UsageError(f"--{name} {x:g} is outside (0, 1); pass a rate such as {example}")


def _writable(opt: str, path: str) -> None:
    if not path or not path.strip():
        raise UsageError(f"{opt} is empty; pass a file name")
    if os.path.isdir(path):
        raise UsageError(f"{opt} {path!r} is a folder; pass a file name inside it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{opt} {path!r}: the folder {folder!r} does not exist; create it or pass another path")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{opt} {path!r}: the folder {folder!r} is not writable; pass another path")


def _binds(fn: Callable[..., Any], n: int, **kw: Any) -> bool | None:
    """Whether fn can be called with n positional arguments and ``kw`` (None: the signature is not visible)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*range(n), **kw)
    except TypeError:
        return False
    return True


def _round_call(fn: Callable[..., Any]) -> tuple[int, dict[str, Any]]:
    """How a round step is called under SETTINGS_RULE: (positional count, keyword arguments)."""
    from ...harness import settings_arguments
    from ..sources.adapters import settings_parameter

    extra, kw = settings_arguments(settings_parameter(fn), None)
    return 5 + len(extra), kw


def _check_signature(kind: str, fn: Callable[..., Any], spec: str, logits: bool) -> None:
    plain, with_logits = SIGNATURES[kind]
    want = with_logits if (logits and kind != "generator") else plain
    n, kw = _round_call(fn) if kind == "round" else (want.count(",") + 1, {})
    if kind == "round" and logits and not kw and n == 5:
        from ..sources.adapters import SETTINGS_RULE

        raise UsageError(
            f"--round {spec} --logits: the step has no `settings` parameter ({SETTINGS_RULE}); add one, or drop "
            "--logits if it takes probabilities"
        )
    ok = _binds(fn, n, **kw)
    if ok is None or ok:
        return
    try:
        got = f"{getattr(fn, '__name__', spec)}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        got = spec
    hint = ""
    if kind in ("round", "kernel") and not logits and _binds(fn, n + 1):
        hint = " (it takes one more argument: pass --logits if it takes raw logits and the settings)"
    elif kind == "kernel" and logits and _binds(fn, n - 1):
        hint = " (it takes one argument fewer: drop --logits if it takes probabilities)"
    raise UsageError(
        f"--{kind} {spec}: {got} cannot be called as {want}{hint}; give it that signature (docs/adapters.md)"
    )


def _check_cmd(cmd: str) -> None:
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise UsageError(f"--cmd {cmd!r} cannot be split into words ({exc}); check its quotes") from exc
    if not argv:
        raise UsageError(
            "--cmd is empty; pass the command line of a process speaking the JSON-lines protocol (docs/protocol.md)"
        )
    prog = argv[0]
    if os.sep in prog or (os.altsep and os.altsep in prog):
        if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
            raise UsageError(
                f"--cmd: {prog!r} is not an executable file; check the path (or run it through its interpreter, "
                'e.g. --cmd "node kernel.js")'
            )
    elif shutil.which(prog) is None:
        raise UsageError(f"--cmd: no program {prog!r} on PATH; install it or pass its full path")


def _check_url(opt: str, url: str) -> str:
    """The server's base URL: ``url`` itself, or with the path that `specverify serve` prints
    (/v1/completions, or /v1) taken off."""
    if not url.strip():
        raise UsageError(f"{opt} is empty; pass the server's base URL, e.g. http://127.0.0.1:8000")
    if not (url.startswith("http://") or url.startswith("https://")):
        raise UsageError(f"{opt} {url!r} is not an http(s) URL; pass the server's base URL, e.g. http://127.0.0.1:8000")
    base = url.strip().rstrip("/")
    for tail in ("/v1/completions", "/v1"):
        base = base.removesuffix(tail)
    return base


def _parse_model(spec: str) -> tuple[Literal["builtin"], int, int] | tuple[Literal["dir"], str, None]:
    """('builtin', vocab, seed) or ('dir', path, None)."""
    if spec.split(":")[0] == "builtin":
        parts = spec.split(":")
        try:
            vocab = int(parts[1]) if len(parts) > 1 else 256
            seed = int(parts[2]) if len(parts) > 2 else 0
        except ValueError as exc:
            raise UsageError(
                f"--model {spec!r} has a part that is not an integer; write builtin, builtin:VOCAB or "
                "builtin:VOCAB:SEED"
            ) from exc
        if len(parts) > 3 or vocab < 2:
            raise UsageError(
                f"--model {spec!r} is not a builtin model name; write builtin, builtin:VOCAB or builtin:VOCAB:SEED "
                "(VOCAB >= 2)"
            )
        return "builtin", vocab, seed
    if not os.path.isdir(spec):
        raise UsageError(
            f"--model {spec!r} is not a folder; pass a local model directory, or 'builtin' for the model "
            "`specverify serve` serves by default"
        )
    return "dir", spec, None


def _settings(args: argparse.Namespace) -> Settings:
    """The settings the options name, or None: the audit's defaults (its own grid for --logits)."""
    from ...dists import SamplingSettings

    knobs = {k: getattr(args, k) for k in _KNOB_OPTIONS if k != "temperature"}
    if not args.temperature and knobs == {k: getattr(SamplingSettings(), k) for k in knobs}:
        return None
    try:
        return tuple(SamplingSettings(temperature=t, **knobs) for t in args.temperature or [1.0])
    except InvalidSettingsError as exc:
        raise UsageError(f"{_KNOB_OPTIONS.get(exc.field or '', exc.field or 'settings')}: {exc}") from exc


#: the sampling settings the CLI sets, each with its option
_KNOB_OPTIONS = {
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "min_p": "--min-p",
    "repetition_penalty": "--repetition-penalty",
    "presence_penalty": "--presence-penalty",
    "frequency_penalty": "--frequency-penalty",
    "penalty_window": "--penalty-window",
    "logit_bias": "--logit-bias",
}


def _bias_option(text: str) -> tuple[tuple[int, float], ...]:
    """``ID:BIAS,...`` as (id, bias) pairs (argparse reports a ValueError as a usage error)."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        t, _, b = part.partition(":")
        pairs.append((int(t), float(b)))
    return tuple(pairs)


def validate(args: argparse.Namespace) -> tuple[Settings, Callable[..., Any] | None]:
    """Every check that needs no sampling; raises UsageError with the problem and its fix."""
    _check_numbers(args)
    settings = _settings(args)
    shape = _shape(args)
    _check_targets(args, shape)
    _check_shape_options(args, shape)
    for opt in ("checkpoint", "json", "html"):
        if getattr(args, opt) is not None:
            _writable(f"--{opt}", getattr(args, opt))
    if shape in ("round", "kernel", "generator", "lm_generator"):
        from ..sources.adapters import load_callable

        spec = getattr(args, shape)
        fn = load_callable(spec)
        _check_signature(shape, fn, spec.strip(), args.logits)
    else:
        fn = None
    if args.workers is None:
        args.workers = default_workers(shape, args.context)
    # isolated batches (pipeline.collect) make --workers 1 sample what any --workers N samples
    args.isolate_batches = fork_safe(shape, args.context)
    return settings, fn


#: modules that are not safe to fork once loaded (threads, device contexts): their users sample in-process
FORK_UNSAFE = ("torch", "jax", "tensorflow", "cupy")


def fork_safe(shape: Shape, context: str) -> bool:
    """Whether the audit may sample in forked processes: an importable implementation given tables,
    on Linux, that loaded none of FORK_UNSAFE."""
    if shape not in ("round", "kernel", "generator", "catalogue") or context != "tables":
        return False
    return sys.platform == "linux" and not any(m in sys.modules for m in FORK_UNSAFE)


def default_workers(shape: Shape, context: str) -> int:
    """The sampling processes an audit uses without --workers (its help says when and why)."""
    lm_forks = shape == "lm_generator" and sys.platform == "linux"  # its forks run on one torch thread
    if not (fork_safe(shape, context) or lm_forks):
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity call on this platform
        return max(1, os.cpu_count() or 1)


def _check_numbers(args: argparse.Namespace) -> None:
    """Rates, sizes, budgets and timeouts in their ranges."""
    _in_unit_interval("alpha", args.alpha, "1e-6")
    _in_unit_interval("beta", args.beta, "1e-3")
    _in_unit_interval("eps", args.eps, "0.05")
    if args.gamma < 1:
        raise UsageError(f"--gamma {args.gamma} is below 1; pass the number of draft tokens per round (>= 1)")
    if args.vocab < 2:
        raise UsageError(f"--vocab {args.vocab} is below 2; pass a vocabulary size of at least 2")
    if not (args.budget > 0) or math.isinf(args.budget):
        raise UsageError(f"--budget {args.budget:g} is not a positive number of seconds; pass e.g. --budget 60")
    if not (args.call_timeout > 0):
        raise UsageError(
            f"--call-timeout {args.call_timeout:g} is not a positive number of seconds; pass e.g. --call-timeout 30"
        )
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(
            f"--rounds {args.rounds} is below 1; pass the rounds (or sequences) per audit unit, or omit it"
        )
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers} is below 1; pass the number of sampling processes (1 or more)")
    if args.length is not None and args.length < 1:
        raise UsageError(f"--length {args.length} is below 1; pass the tokens per request (>= 1)")
    if not (math.isfinite(args.logit_tol) and args.logit_tol >= 0):
        raise UsageError(
            f"--logit-tol {args.logit_tol:g} is not a tolerance; pass the largest |engine logit - float64 logit| "
            "(e.g. 0.02 for an engine with an f16 KV cache) or 0 for an exact audit"
        )
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed} is negative; pass a seed >= 0")


def _check_targets(args: argparse.Namespace, shape: Shape) -> None:
    """What is audited: non-empty specs, a runnable --cmd, endpoints and --model."""
    for k in ("round", "kernel", "generator", "lm_generator"):
        v = getattr(args, k)
        if v is not None and not v.strip():
            opt, fn = k.replace("_", "-"), {"round": "step", "lm_generator": "make"}.get(k, k)
            raise UsageError(f"--{opt} is empty; pass MOD:FN, e.g. --{opt} mypkg.spec:{fn}")
    if args.cmd is not None:
        _check_cmd(args.cmd)
    if shape != "catalogue" and args.target:
        raise UsageError(f"both a target ({args.target!r}) and --{shape} were given; pass one of them")
    if args.baseline_endpoint is not None:
        if shape != "endpoint":
            raise UsageError("--baseline-endpoint needs --endpoint; pass the speculative endpoint to compare with it")
        args.baseline_endpoint = _check_url("--baseline-endpoint", args.baseline_endpoint)
    _check_reference(args, shape)
    if shape == "endpoint":
        args.endpoint = _check_url("--endpoint", args.endpoint)
        if args.baseline_endpoint is None and args.reference_endpoint is None:
            _parse_model(args.model or "builtin")
        elif args.model is not None:
            raise UsageError("--model does not apply with --baseline-endpoint (two endpoints need no model); drop it")
    else:
        used = [("--model", args.model is not None), ("--length", args.length is not None and shape != "lm_generator")]
        for opt, on in used:
            if on:
                raise UsageError(f"{opt} applies to --endpoint only; drop it, or audit an endpoint")


def _check_reference(args: argparse.Namespace, shape: Shape) -> None:
    """--reference-endpoint: with --endpoint, instead of --model and --baseline-endpoint."""
    if args.reference_logprobs != -1 and args.reference_endpoint is None:
        raise UsageError("--reference-logprobs applies to --reference-endpoint; drop it, or pass the reference")
    if args.reference_logprobs == 0 or args.reference_logprobs < -1:
        raise UsageError(f"--reference-logprobs {args.reference_logprobs}: pass K >= 1, or -1 for every token")
    if args.reference_endpoint is None:
        return
    if shape != "endpoint":
        raise UsageError("--reference-endpoint needs --endpoint; pass the speculative endpoint to audit against it")
    for opt, given in (
        ("--model", args.model is not None),
        ("--baseline-endpoint", args.baseline_endpoint is not None),
    ):
        if given:
            raise UsageError(f"--reference-endpoint and {opt} are two sources of the target's law; pass one of them")
    args.reference_endpoint = _check_url("--reference-endpoint", args.reference_endpoint)


def _check_resumable(path: str) -> None:
    """--resume needs a checkpoint that exists and holds something (a missing one would start afresh
    unannounced; an empty one is what an audit killed while creating it leaves)."""
    if not os.path.exists(path):
        raise UsageError(
            f"--resume: no checkpoint at {path!r}; pass the file the interrupted audit wrote, or drop --resume "
            "to start afresh"
        )
    if os.path.getsize(path) == 0:
        raise UsageError(f"--resume: the checkpoint {path!r} is empty; delete it and run without --resume")


def _check_shape_options(args: argparse.Namespace, shape: Shape) -> None:
    """Options that only some shapes can use."""
    rule = getattr(args, "rule", None)
    if args.full_rule and rule == "block":
        raise UsageError("--full-rule and --rule block name two rules; pass one of them")
    opt = "--full-rule" if args.full_rule or rule == "full" else f"--rule {rule}"
    if (args.full_rule or rule) and shape not in ("kernel", "round"):
        what = {
            "catalogue": "a reference or catalogue target (catalogue samplers declare their own rule)",
            "generator": "--generator (a black box shows no rounds)",
            "lm_generator": "--lm-generator (a black box shows no rounds)",
            "cmd": "--cmd (the JSON-lines protocol carries no rule)",
            "endpoint": "--endpoint (a black box shows no rounds)",
        }[shape]
        raise UsageError(f"{opt} does not apply to {what}; use it with --kernel (or --round), or drop it")
    if (args.full_rule or rule) and args.one_hot:
        raise UsageError(
            f"{opt} and --one-hot exclude each other: the one-hot rule has no draft probabilities; drop one"
        )
    if args.one_hot and shape != "kernel":
        raise UsageError("--one-hot applies to --kernel only; drop it")
    _check_logits_options(args, shape)
    if args.context != "tables" and shape == "lm_generator":
        raise UsageError("--context does not apply to --lm-generator (it is audited on transformers pairs); drop it")
    if (args.workers or 1) > 1 and shape in ("cmd", "endpoint"):
        raise UsageError(f"--workers applies to importable implementations, not --{shape}; drop it")
    _check_endpoint_options(args, shape)
    if args.resume and not args.checkpoint:
        raise UsageError("--resume needs --checkpoint FILE; pass the checkpoint file to continue from")
    if args.checkpoint and args.baseline_endpoint:
        raise UsageError("--checkpoint applies to audits that checkpoint (not --baseline-endpoint); drop it")
    if args.fail_fast and args.baseline_endpoint:
        raise UsageError("--fail-fast applies to audits of units (a two-sample test is one); drop it")
    if args.resume:
        _check_resumable(args.checkpoint)
    _check_lm_options(args, shape)


def _check_logits_options(args: argparse.Namespace, shape: Shape) -> None:
    """--logits, --parity-pairs and --greedy: what the implementation is handed."""
    if args.logits and shape not in ("kernel", "round", "generator", "cmd"):
        raise UsageError("--logits applies to --kernel, --round, --generator and --cmd; drop it")
    if args.parity_pairs != "alternate" and not args.logits:
        raise UsageError("--parity-pairs applies with --logits (without it every setting runs on both pairs); drop it")
    if args.greedy and shape not in ("round", "generator"):
        raise UsageError("--greedy applies to --round and --generator; drop it")
    if args.greedy and args.logits:
        raise UsageError("--greedy and --logits exclude each other (a greedy step takes raw probabilities); drop one")


def _check_endpoint_options(args: argparse.Namespace, shape: Shape) -> None:
    """--concurrency and --batch-invariant: how an endpoint is sent its requests."""
    if args.concurrency < 1:
        raise UsageError(f"--concurrency {args.concurrency}: pass the number of requests in flight (>= 1)")
    if shape != "endpoint" and (args.concurrency != 4 or args.batch_invariant):
        raise UsageError("--concurrency and --batch-invariant apply to --endpoint; drop them")


def _check_lm_options(args: argparse.Namespace, shape: Shape) -> None:
    """Options of audits against a model's computed law: endpoints (with --model) and LM generators."""
    for opt, used, lm in (
        ("--logit-tol", args.logit_tol != 0.0, False),
        ("--temperature-last", args.temperature_last, False),
        ("--check-logprobs", args.check_logprobs is not None, False),
        ("--stop-token-ids", args.stop_token_ids is not None, True),
        ("--long-length", args.long_length != 512, True),
    ):
        if opt == "--long-length" and shape in ("round", "generator"):
            continue  # their long unit too
        if opt == "--stop-token-ids" and shape == "round":
            continue  # a round step's stop unit too
        if used and not (lm and shape == "lm_generator") and (shape != "endpoint" or args.baseline_endpoint):
            where = "--endpoint audited against --model" + (" or --lm-generator" if lm else "")
            where += " or --round" if opt == "--stop-token-ids" else ""
            raise UsageError(f"{opt} applies to {where}; drop it")


# ---------------------------------------------------------------------------------------------


def _adapter(args: argparse.Namespace, fn: Callable[..., Any] | None) -> Adapter:
    from ...catalogue import BUGS, DECOYS, ChainSampler
    from ..sources.adapters import GeneratorAdapter, KernelAdapter, RoundAdapter, SamplerAdapter, SubprocessAdapter

    t = args.call_timeout
    rule: Rule | None = "full" if args.full_rule else getattr(args, "rule", None)
    if args.round:
        assert fn is not None  # validate() loads the callable of --round, --kernel and --generator
        return RoundAdapter(
            fn, logits=args.logits, greedy=args.greedy, rule=rule, call_timeout=t, spec=args.round.strip()
        )
    if args.kernel:
        assert fn is not None
        return KernelAdapter(
            fn, one_hot=args.one_hot, logits=args.logits, rule=rule, call_timeout=t, spec=args.kernel.strip()
        )
    if args.generator:
        assert fn is not None
        return GeneratorAdapter(fn, logits=args.logits, greedy=args.greedy, call_timeout=t, spec=args.generator.strip())
    if args.cmd:
        return SubprocessAdapter(args.cmd, call_timeout=t, logits=args.logits)
    name = args.target or "reference"
    table = {c.name: c for c in [ChainSampler, *BUGS, *DECOYS]}
    if name not in table:
        close = [n for n in sorted(table) if name.lower() in n or n in name.lower()][:3]
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise UsageError(
            f"unknown audit target {name!r}; {hint}use 'reference', a catalogue name "
            "(`specverify selftest` lists them), or one of --round/--kernel/--generator/--cmd/--endpoint"
        )
    return SamplerAdapter(table[name]())


def _config(args: argparse.Namespace, settings: Settings) -> AuditConfig:
    """The audit's options, one AuditConfig field per CLI option (a new option: one field, one line here)."""
    from ..pipeline.config import AuditConfig

    return AuditConfig(
        alpha=args.alpha,
        beta=args.beta,
        eps=args.eps,
        budget_s=args.budget,
        seed=args.seed,
        gamma=args.gamma,
        vocab=args.vocab,
        settings=settings,
        checkpoint=args.checkpoint,
        resume=args.resume,
        progress=not args.no_progress and sys.stderr.isatty(),
        context=args.context,
        parity_pairs=args.parity_pairs,
        greedy_ties=args.greedy_ties,
        diagnose=not args.no_diagnosis,
        fail_fast=args.fail_fast,
        rounds=args.rounds,
        workers=args.workers,
        isolate_batches=args.isolate_batches,
        long_length=args.long_length,
        stop_token_ids=args.stop_token_ids,
    )


#: below this many columns (an 80-column terminal, a pipe, a CI log) each check is a line with its
#: summary wrapped beneath it; a table's summary column would be a dozen characters wide there
WIDE_TERMINAL = 120
_COLOR: dict[str, str] = {PASS: "green", FAIL: "red", UNSUPPORTED: "magenta"}


def _figures(c: CheckOutcome) -> str:
    """kind, n and (not on FAIL rows, where the deviation was found) the TV the check could detect."""
    parts = [c.kind] + ([f"n {c.n:,}"] if c.n else [])
    if c.eps and c.status != FAIL and math.isfinite(c.eps):
        parts.append(f"detects TV >= {c.eps:.4f}")
    return ", ".join(parts)


def _print_check_lines(v: Verdict, console: Console) -> None:
    import textwrap

    from rich.markup import escape

    width, pad = max(console.width, 40), " " * 14
    console.print(f"[bold]specverify audit: {escape(v.subject)}[/]", soft_wrap=True)
    for c in v.checks:
        status = f"{c.status:<12}  "
        head = textwrap.wrap(f"{c.name} ({_figures(c)})", width - len(pad), break_on_hyphens=False)
        color = _COLOR.get(c.status, "yellow")
        console.print(f"[{color}]{status}[/]" + escape(head[0]), soft_wrap=True, highlight=False)
        body = head[1:] + textwrap.wrap(c.summary, width - len(pad), break_on_hyphens=False)
        for line in body:
            console.print(pad + escape(line), soft_wrap=True, highlight=False)


def _print_check_table(v: Verdict, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"specverify audit: {escape(v.subject)}")
    for col in ("check", "kind", "status", "n", "detects TV >=", "summary"):
        table.add_column(col, overflow="fold")
    for c in v.checks:
        table.add_row(
            escape(c.name),
            c.kind,
            f"[{_COLOR.get(c.status, 'yellow')}]{c.status}[/]",
            f"{c.n:,}" if c.n else "",
            f"{c.eps:.4f}" if c.eps and c.status != FAIL and math.isfinite(c.eps) else "",
            escape(c.summary),
        )
    console.print(table)


def print_verdict(v: Verdict, console: Console | None = None) -> None:
    """The checks (a table on wide terminals, one line each with the summary beneath on narrow ones
    and in pipes), the diagnosis lead of a FAIL, then the headline."""
    from rich.console import Console
    from rich.markup import escape

    console = console or Console()
    (_print_check_table if console.width >= WIDE_TERMINAL else _print_check_lines)(v, console)
    for line in v.diagnosis_lead():  # a diagnosed FAIL leads with its root cause
        console.print(escape(line), soft_wrap=True)
    console.print(escape(v.headline()), soft_wrap=True)


def _write_outputs(v: Verdict, args: argparse.Namespace) -> bool:
    ok = True
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(v.to_dict(), f, indent=1)
        except OSError as exc:
            print(
                f"specverify: error: could not write --json {args.json!r}: {exc.strerror or exc}; the verdict above "
                "stands",
                file=sys.stderr,
            )
            ok = False
    if args.html:
        try:
            from .report import write_html

            write_html(v, args.html)
        except OSError as exc:
            print(
                f"specverify: error: could not write --html {args.html!r}: {exc.strerror or exc}; the verdict above "
                "stands",
                file=sys.stderr,
            )
            ok = False
    return ok


def _endpoint_prompts(vocab: int, seed: int, n: int = 8, length: int = 3) -> list[list[int]]:
    import numpy as np

    rng = np.random.default_rng([seed, 7])
    return [rng.integers(0, vocab, length).tolist() for _ in range(n)]


def _preflight(url: str, timeout: float) -> Any:
    """GET /v1/models; returns its JSON (or None) and raises UsageError when nothing answers."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=min(timeout, 10)) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError:
        return None  # it answers; /v1/models is optional
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"nothing answers at {url} ({reason}); start the server or fix the URL") from exc


def _audit_lm_generator(args: argparse.Namespace, settings: Settings, make: Callable[..., Any]) -> Verdict:
    """--lm-generator: ``make(target, draft)`` audited on lm_pairs (a low- and a high-overlap tiny Llama
    pair whose last id is an EOS with real mass), with the stop and long units and the seed check."""
    try:
        import torch

        from ..sources.lm_audit import LM_VOCAB, audit_lm_pairs, lm_pairs
    except ImportError as exc:
        raise UsageError(f"--lm-generator needs transformers ({exc}); pip install 'specverify[models]'") from exc
    torch.set_num_threads(1)
    vocab = args.vocab if args.vocab != 64 else LM_VOCAB  # 64 is the table audits' default
    cfg = dataclasses.replace(
        _lm_config(args, settings, prompts=[]),
        prompts=None,
        gamma=args.gamma,
        length=args.length,
        name=args.lm_generator.strip(),
    )
    # units in forks, one torch thread each, as here; with one worker too, so that a generator that keeps
    # a state across requests gets the verdict of any --workers
    isolate = None if sys.platform == "linux" else False  # forks only where default_workers forks (Linux)
    cfg = dataclasses.replace(cfg, workers=args.workers or 1, isolate_units=isolate)
    return audit_lm_pairs(make, lm_pairs(vocab=vocab, seed=args.seed), cfg)


def _audit_endpoint(args: argparse.Namespace, settings: Settings) -> Verdict:
    from ..pipeline.run import DEFAULT_SETTINGS
    from ..sources.http_adapter import http_generator

    settings = settings or DEFAULT_SETTINGS
    if args.temperature_last:
        settings = tuple(dataclasses.replace(s, temperature_last=True) for s in settings)
    info = _preflight(args.endpoint, args.call_timeout)
    gen = http_generator(
        args.endpoint, timeout=args.call_timeout, temperature_last=args.temperature_last,
        check_logprobs=args.check_logprobs, concurrency=args.concurrency, batch_invariant=args.batch_invariant,
    )  # fmt: skip
    if args.baseline_endpoint:
        return _audit_against_baseline(args, info, gen, settings)
    if args.reference_endpoint:
        return _audit_against_reference(args, info, gen, settings)
    model = _parse_model(args.model or "builtin")
    try:
        import torch

        from ...lm.transformers_lm import load_local
        from ...runners.serve import default_models
        from ..sources.lm_audit import audit_lm
    except ImportError as exc:
        raise UsageError(f"auditing an endpoint needs transformers ({exc}); pip install 'specverify[models]'") from exc
    torch.set_num_threads(1)
    target = load_local(model[1]) if model[0] == "dir" else default_models(vocab=model[1], seed=model[2])[0]
    vocab = int(target.config.vocab_size)
    try:
        served = int(info["data"][0]["vocab_size"])
    except (TypeError, KeyError, IndexError, ValueError):
        served = None
    if served is not None and served != vocab:
        raise UsageError(
            f"the endpoint serves a vocabulary of {served} but --model {args.model or 'builtin'} has {vocab}; pass "
            f"the model the endpoint serves (for `specverify serve --vocab {served}`: --model builtin:{served})"
        )
    return audit_lm(gen, target, _lm_config(args, settings, prompts=_endpoint_prompts(vocab, args.seed)))


def _served_vocab(info: Any) -> int | None:
    try:
        return int(info["data"][0]["vocab_size"])
    except (TypeError, KeyError, IndexError, ValueError):
        return None


def _audit_against_reference(
    args: argparse.Namespace, info: Any, gen: HttpGenerate, settings: tuple[SamplingSettings, ...]
) -> Verdict:
    """--reference-endpoint: one-sample against the law the non-speculative endpoint reports."""
    from ..sources.lm_audit import audit_lm_reported
    from ..sources.reported_law import ReportedLaw, probe_vocab

    info_r = _preflight(args.reference_endpoint, args.call_timeout)
    vocabs = {v for v in (_served_vocab(info), _served_vocab(info_r)) if v is not None}
    if not vocabs and (v := probe_vocab(args.reference_endpoint, timeout=max(args.call_timeout or 0, 60.0))):
        vocabs = {v}  # vLLM's /v1/models does not list it; its prompt_logprobs=-1 counts it
    if len(vocabs) > 1:
        raise UsageError(
            f"the endpoint and the reference serve vocabularies of {sorted(vocabs)} tokens; the reference must "
            "serve the same model"
        )
    if not vocabs and args.vocab == 64:  # the default: never taken for a served model's
        raise UsageError(
            f"neither endpoint says its vocabulary size, and {args.reference_endpoint} refuses prompt_logprobs=-1; "
            "pass --vocab V (the model's vocab_size)"
        )
    vocab = vocabs.pop() if vocabs else args.vocab
    law = ReportedLaw(
        args.reference_endpoint, vocab_size=vocab, top_logprobs=args.reference_logprobs,
        timeout=max(args.call_timeout or 0, 120.0),
    )  # fmt: skip
    cfg = _lm_config(args, settings, prompts=_endpoint_prompts(vocab, args.seed))
    return audit_lm_reported(gen, law, cfg)


def _lm_config(args: argparse.Namespace, settings: Settings, *, prompts: list[list[int]]) -> LMAuditConfig:
    """An endpoint audit's options, one LMAuditConfig field per CLI option (as :func:`_config`)."""
    from ..pipeline.config import LMAuditConfig

    return LMAuditConfig(
        alpha=args.alpha,
        beta=args.beta,
        eps=args.eps,
        budget_s=args.budget,
        seed=args.seed,
        settings=settings,
        prompts=tuple(tuple(p) for p in prompts),
        length=args.length or ENDPOINT_LENGTH,
        max_sequences=args.rounds,
        name=args.endpoint,
        call_timeout=args.call_timeout,
        logit_tol=args.logit_tol,
        stop_token_ids=args.stop_token_ids,
        long_length=args.long_length,
        diagnose=not args.no_diagnosis,
        fail_fast=args.fail_fast,
        checkpoint=args.checkpoint,
        resume=args.resume,
    )


def _audit_against_baseline(
    args: argparse.Namespace, info: Any, gen: HttpGenerate, settings: tuple[SamplingSettings, ...]
) -> Verdict:
    """--baseline-endpoint: the two endpoints' samples compared (two-sample tests), no model needed."""
    from ..sources.http_adapter import http_generator, two_sample_endpoints

    info_b = _preflight(args.baseline_endpoint, args.call_timeout)
    vocab: int | None = None
    for i in (info, info_b):
        with contextlib.suppress(TypeError, KeyError, IndexError, ValueError):
            vocab = vocab or int(i["data"][0]["vocab_size"])
    prompts = _endpoint_prompts(vocab or args.vocab, args.seed)
    ref = http_generator(args.baseline_endpoint, timeout=args.call_timeout)
    return two_sample_endpoints(
        gen,
        ref,
        prompts=prompts,
        settings=settings,
        vocab_size=vocab,
        n_sequences=args.rounds or 400,
        length=args.length or ENDPOINT_LENGTH,
        alpha=args.alpha,
        beta=args.beta,
        eps=args.eps,
        seed=args.seed,
    )


def _start_cmd(adapter: SubprocessAdapter) -> None:
    """A --cmd process that cannot answer its hello is a usage error (the command is wrong), before sampling."""
    from ...errors import ImplementationError

    try:
        adapter.start()
    except ImplementationError as exc:
        raise UsageError(f"--cmd: {exc}; run the command by hand to see why (docs/protocol.md)") from exc


def run_audit(args: argparse.Namespace) -> int:
    if args.list_checks:
        print(CHECKS)
        return 0
    adapter: Adapter | None = None
    try:
        settings, fn = validate(args)
        if args.endpoint:
            v = _audit_endpoint(args, settings)
        elif args.lm_generator:
            assert fn is not None
            v = _audit_lm_generator(args, settings, fn)
        else:
            from ..pipeline.run import audit  # after the options are validated: a usage error stays quick
            from ..sources.adapters import SubprocessAdapter

            cfg = _config(args, settings)
            adapter = _adapter(args, fn)
            if isinstance(adapter, SubprocessAdapter):  # --cmd
                _start_cmd(adapter)
            v = audit(adapter, cfg)
    except SpecVerifyError as exc:
        one_line = str(exc).replace("\n", "\\n")  # a user's import error may span lines; the error stays one
        print(f"specverify: error: {one_line}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if adapter is not None and hasattr(adapter, "close"):
            adapter.close()
    print_verdict(v)
    _write_outputs(v, args)
    return EXIT[v.status]


def run_selftest(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ...catalogue import BUGS, DECOYS
    from ..pipeline.run import audit
    from ..sources.adapters import SamplerAdapter

    try:
        _in_unit_interval("eps", args.eps, "0.05")
        if args.json:
            _writable("--json", args.json)
    except UsageError as exc:
        print(f"specverify: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows: list[tuple[str, str, str, str, int, float, bool, str]] = []
    ok = True
    for cls in [*BUGS, *DECOYS]:
        t = time.perf_counter()
        v = audit(SamplerAdapter(cls()), eps=args.eps, seed=args.seed)
        expected = PASS if cls.exact else FAIL
        good = v.status == expected
        ok &= good
        rows.append(
            (
                cls.name,
                "decoy" if cls.exact else "bug",
                v.status,
                expected,
                v.samples,
                time.perf_counter() - t,
                good,
                (v.evidence[0] if v.evidence else v.headline())[:160],
            )
        )
    table = Table(title="specverify selftest: every bug must FAIL, every decoy must PASS")
    for col in ("entry", "kind", "verdict", "expected", "samples", "seconds", "ok"):
        table.add_column(col)
    for r in rows:
        table.add_row(r[0], r[1], r[2], r[3], f"{r[4]:,}", f"{r[5]:.1f}", "[green]yes[/]" if r[6] else "[red]NO[/]")
    Console().print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [
                    dict(zip(("entry", "kind", "verdict", "expected", "samples", "seconds", "ok", "evidence"), r))
                    for r in rows
                ],
                f,
                indent=1,
            )
    print("selftest:", "all bugs caught, all decoys passed" if ok else "MISMATCH (see table)")
    return 0 if ok else 1
