"""Adapters: how an implementation under audit is driven.

* :class:`SamplerAdapter` wraps a :class:`specverify.catalogue.ChainSampler` (the reference, the
  bug catalogue, or your own subclass).
* :class:`RoundAdapter` wraps the seed article's shape, ``step(prefix, draft, target, gamma, rng)``:
  ``draft(prefix)`` returns q(. | prefix) as a list/array of V floats, ``target(prefix, proposed)``
  returns the gamma + 1 target rows of one pass, ``rng`` is a ``numpy.random.Generator`` that the
  step draws all its randomness from; it returns the tokens emitted this round.

      def step(prefix, draft, target, gamma, rng):
          ...
      specverify audit --round mypkg.spec:step

* :class:`KernelAdapter` wraps a batched verification kernel, the shape of vLLM's and
  transformers' rejection samplers::

      def kernel(draft_tokens, draft_probs, target_probs, generator):
          # draft_tokens [B, g] int64, draft_probs [B, g, V] (None with one_hot=True),
          # target_probs [B, g + 1, V], generator: numpy.random.Generator
          return tokens  # [B, g + 1], -1 after the emitted ones

  With ``logits=True`` it receives logits and a SamplingSettings instead (``kernel(draft_tokens,
  draft_logits, target_logits, settings, generator)``), so that parity bugs inside the kernel are
  in scope. With ``accepts_uniforms=True`` it also takes ``uniforms=(u_accept [B, g], u_final [B])``
  and the audit adds exact differential checks against the reference on the same draws.
* :class:`GeneratorAdapter` wraps ``generate(prompt, max_new_tokens, seed, model) -> list[int]``;
  ``model`` gives the target (and draft) next-token laws (:class:`TableModelView`).
* :class:`SubprocessAdapter` speaks the JSON-lines protocol of ``docs/protocol.md`` with another
  process, so implementations in any language can be audited.

Every call is guarded: an exception, malformed output (wrong shape, ids out of range, -1 inside
the emitted prefix, an "accepted" token that is not the draft) or a call exceeding the per-call
timeout becomes a finding in the verdict, never a crash of the auditor.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import shlex
import subprocess
import tempfile
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ...catalogue import ChainSampler
from ...dists import SamplingSettings, inverse_cdf_sample
from ...errors import ImplementationError, ImplementationTimeout, MalformedOutputError, SpecVerifyError
from ...harness import (
    PAD,
    ContextPair,
    Generation,
    RoundOutput,
    SequenceView,
    as_token_ids,
    call_with_timeout,
    run_generator,
    run_round_step,
    run_sampler,
)
from ...lm.synthetic import PositionalPair, TablePair
from ..pipeline.config import Harness, PairKind, Rule, StrataRule

__all__ = [
    "Adapter",
    "SamplerAdapter",
    "RoundAdapter",
    "KernelAdapter",
    "GeneratorAdapter",
    "SubprocessAdapter",
    "load_callable",
    "declared_rule",
    "RULE_ATTRIBUTE",
    "SETTINGS_RULE",
    "settings_parameter",
    "call_with_timeout",
]


def load_callable(spec: str) -> Callable[..., Any]:
    """'package.module:function' (or a file path 'path/to/file.py:function') to the callable.

    Every failure is a :class:`SpecVerifyError` whose message says what was wrong and how to fix it."""
    if not isinstance(spec, str) or not spec.strip():
        raise SpecVerifyError("empty MOD:FN; pass 'package.module:function' or 'path/to/file.py:function'")
    spec = spec.strip()
    if ":" not in spec:
        raise SpecVerifyError(f"{spec!r} is not MOD:FN; write it as 'package.module:function' or 'file.py:function'")
    mod, fn = spec.rsplit(":", 1)
    if not mod or not fn:
        raise SpecVerifyError(
            f"{spec!r} is not MOD:FN (the {'module' if not mod else 'function'} part is empty); "
            "write it as 'package.module:function' or 'file.py:function'"
        )
    import os

    if mod.endswith(".py"):
        if not os.path.isfile(mod):
            raise SpecVerifyError(f"no file {mod!r}; pass an existing path or a module name 'package.module:function'")
        try:
            s = importlib.util.spec_from_file_location("_specverify_user_module", mod)
            if s is None or s.loader is None:
                raise ImportError(f"cannot load {mod!r} as a module")
            m = importlib.util.module_from_spec(s)
            s.loader.exec_module(m)
        except Exception as exc:  # noqa: BLE001 - the user's import failing is a usage error
            raise SpecVerifyError(
                f"could not import {mod!r}: {type(exc).__name__}: {exc}; fix the error in that file"
            ) from exc
    else:
        import sys

        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.append(os.getcwd())  # as with `python -m`: modules of the current folder resolve
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            missing = exc.name or mod
            where = "" if missing == mod else f" (imported by {mod!r})"
            raise SpecVerifyError(
                f"no module named {missing!r}{where}; check PYTHONPATH (the folder holding it must be on "
                "it) or pass a file path 'path/to/file.py:function'"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - the user's import failing is a usage error
            raise SpecVerifyError(
                f"could not import {mod!r}: {type(exc).__name__}: {exc}; fix the error in that module "
                "(check PYTHONPATH if it imports others)"
            ) from exc
    try:
        obj: Callable[..., Any] = getattr(m, fn)
    except AttributeError as exc:
        raise SpecVerifyError(f"{mod!r} has no attribute {fn!r}; check the name after ':' (MOD:FN)") from exc
    if not callable(obj):
        raise SpecVerifyError(
            f"{spec} is a {type(obj).__name__}, not a function; pass MOD:FN naming a function or callable object"
        )
    return obj


class Adapter:
    """Base: ``generate(pair, n, gamma, rng, settings) -> Generation``."""

    name = "adapter"
    #: which pairs the audit builds: 'kernel' (positional rows), 'sequence' (order-1 Markov, the
    #: catalogue's samplers) or 'context' (whole prefixes on order-k, position-dependent pairs)
    harness: Harness = "kernel"
    #: the pair kinds audited per setting (see specverify.audit.pipeline.plan)
    pair_kinds: tuple[PairKind, ...] = ("default",)
    #: how emitted tokens are stratified: 'positions' in the round (tail under 5% pooled),
    #: 'first-later' (first token of a round, the rest), 'pooled' (a black box shows no rounds)
    strata_rule: StrataRule = "positions"
    exact_by_design = True
    rule: Rule | None = None  # 'full' enables the white-box strata
    call_timeout: float | None = 30.0
    accepts_uniforms = False
    logits = False  # takes raw logits plus the settings
    greedy = False  # decodes greedily: the audit is the exact greedy check
    takes_settings = False  # receives the settings (greedy audits on raw rows need it)
    spec: str | None = None  # 'pkg.mod:fn', for --workers and the checkpoint fingerprint

    def identity(self) -> dict[str, Any]:
        """What a checkpoint is keyed on."""
        return {"adapter": type(self).__name__, "name": self.name, "spec": self.spec}

    def generate(
        self,
        pair: TablePair | ContextPair,
        n: int,
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None,
    ) -> Generation:
        raise NotImplementedError


class SamplerAdapter(Adapter):
    def __init__(self, sampler: ChainSampler) -> None:
        self.sampler = sampler
        self.rule = getattr(sampler, "rule", None)
        self.name = sampler.name
        self.harness = sampler.harness
        self.exact_by_design = sampler.exact
        self.lossy_by_design = getattr(sampler, "lossy_by_design", False)

    def identity(self) -> dict[str, Any]:
        return {"adapter": "SamplerAdapter", **implementation_identity(self.sampler)}

    def generate(
        self,
        pair: TablePair | ContextPair,
        n: int,
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None,
    ) -> Generation:
        return run_sampler(self.sampler, pair, n=n, gamma=gamma, rng=rng, settings=settings)


def _check_round_tokens(
    tokens: ArrayLike, drafts: np.ndarray, gamma: int, v: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Validate [B, g + 1] output; return num_accepted."""
    t = as_token_ids(tokens, what, ndim=2)
    b = drafts.shape[0]
    if t.shape != (b, gamma + 1):
        raise MalformedOutputError(f"{what} returned shape {t.shape}; expected [B, gamma + 1] = [{b}, {gamma + 1}]")
    if (t < PAD).any():
        r, j = (int(x[0]) for x in np.nonzero(t < PAD))
        raise MalformedOutputError(
            f"{what}: round {r} holds the id {int(t[r, j])} at position {j}: ids lie in [0, vocabulary), and -1 only "
            "pads after the emitted tokens"
        )
    valid = t != PAD
    n_emit = valid.sum(1)
    if (n_emit == 0).any():
        raise MalformedOutputError(
            f"{what} emitted no token in round {int(np.argmin(n_emit))}; every round emits at least one"
        )
    if (valid != (np.arange(gamma + 1)[None, :] < n_emit[:, None])).any():
        r = int(np.nonzero((valid != (np.arange(gamma + 1)[None, :] < n_emit[:, None])).any(1))[0][0])
        raise MalformedOutputError(f"{what}: round {r} has -1 inside its emitted prefix: {t[r].tolist()}")
    if (t >= v).any():
        raise MalformedOutputError(f"{what} returned token id {int(t.max())} >= vocabulary size {v}")
    n_acc = n_emit - 1
    acc_mask = np.arange(gamma)[None, :] < n_acc[:, None]
    if (acc_mask & (t[:, :gamma] != drafts)).any():
        r = int(np.nonzero((acc_mask & (t[:, :gamma] != drafts)).any(1))[0][0])
        raise MalformedOutputError(
            f"{what}: round {r} emitted {t[r].tolist()} but the drafts were {drafts[r].tolist()}; "
            "accepted positions must repeat the draft tokens"
        )
    return t.astype(np.int64), n_acc


class _AdapterSampler(ChainSampler):
    """Drives an adapter's callable through the catalogue engine's ``generate``."""

    def __init__(self, adapter: KernelAdapter) -> None:
        self.a = adapter
        self.name = adapter.name
        self.rule = getattr(adapter, "rule", None)


class _KernelSampler(_AdapterSampler):
    draws_drafts = False  # the auditor draws the drafts and hands them over

    def round(
        self,
        pair: TablePair,
        ctx: np.ndarray,
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        a = self.a
        b = len(ctx)
        if isinstance(pair, PositionalPair):
            # Every round sees the same rows: hand them over as read-only broadcast views
            # ([B, g + 1, V] with stride 0 on B), which also protects them from in-place writes.
            tp, dq = pair.target_table(settings), pair.draft_table(settings)
            P = np.broadcast_to(tp[None, : gamma + 1], (b, gamma + 1, tp.shape[1]))
            Q = np.broadcast_to(dq[None, :gamma], (b, gamma, dq.shape[1]))
            u = rng.random((b, gamma))
            X = np.empty((b, gamma), dtype=np.int64)
            for j in range(gamma):
                cq = np.cumsum(dq[j])
                X[:, j] = np.minimum(np.searchsorted(cq, u[:, j] * cq[-1], side="right"), dq.shape[1] - 1)
        else:
            P = np.stack([pair.target_table(settings)[pair.row_index(ctx, j)] for j in range(gamma + 1)], 1)
            Q = np.stack([pair.draft_table(settings)[pair.row_index(ctx, j)] for j in range(gamma)], 1)
            X = inverse_cdf_sample(Q, rng.random((b, gamma)))
        gen = np.random.default_rng(rng.integers(2**63))
        if a.logits:
            TL = (
                np.broadcast_to(pair.target_logits[None, : gamma + 1], P.shape)
                if isinstance(pair, PositionalPair)
                else np.stack([pair.target_logits[pair.row_index(ctx, j)] for j in range(gamma + 1)], 1)
            )
            DL = (
                np.broadcast_to(pair.draft_logits[None, :gamma], Q.shape)
                if isinstance(pair, PositionalPair)
                else np.stack([pair.draft_logits[pair.row_index(ctx, j)] for j in range(gamma)], 1)
            )
            out = call_with_timeout(
                a.fn, X.copy(), DL, TL, settings or SamplingSettings(), gen, timeout=a.call_timeout, what=a.name
            )
        else:
            # a copy of the drafts: a kernel that writes into its input cannot change what it is checked against
            out = call_with_timeout(
                a.fn, X.copy(), None if a.one_hot else Q, P, gen, timeout=a.call_timeout, what=a.name
            )
        tokens, n_acc = _check_round_tokens(out, X, gamma, pair.vocab_size, a.name)
        return RoundOutput(tokens, n_acc, X, tokens[np.arange(b), n_acc])


class KernelAdapter(Adapter):
    """A batched verification kernel (see the module docstring for the signature)."""

    harness = "kernel"
    pair_kinds = ("low", "high")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        one_hot: bool = False,
        logits: bool = False,
        accepts_uniforms: bool = False,
        call_timeout: float | None = 30.0,
        rule: Rule | None = None,
        spec: str | None = None,
    ) -> None:
        """``rule='full'`` declares the min(1, p/q) rule with the (p - q)+ residual: the audit then
        adds white-box strata (acceptance rate, accepted tokens, replacements, bonus tokens), which
        localise a bug and detect it with fewer samples. ``rule='block'`` declares block
        verification (Sun et al., ICLR 2025): its strata are the kept drafts given the drafts and the
        token after them (:mod:`specverify.stats._block`). Leave it None for any other exact rule;
        a kernel may also declare its rule itself (:func:`declared_rule`)."""
        self.fn, self.one_hot, self.logits, self.accepts_uniforms = fn, one_hot, logits, accepts_uniforms
        self.rule, self.spec = rule if rule is not None else declared_rule(fn), spec
        self.name = name or str(getattr(fn, "__name__", "kernel"))
        self.call_timeout = call_timeout
        self.takes_settings = logits

    def identity(self) -> dict[str, Any]:
        return {
            "adapter": "KernelAdapter",
            "spec": self.spec,
            "one_hot": self.one_hot,
            "logits": self.logits,
            "rule": self.rule,
            **implementation_identity(self.fn),
        }

    def generate(
        self,
        pair: TablePair | ContextPair,
        n: int,
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None,
    ) -> Generation:
        return run_sampler(_KernelSampler(self), pair, n=n, gamma=gamma, rng=rng, settings=settings)


#: the attribute by which a kernel or round step declares its rule (``fn.specverify_rule = "block"``)
RULE_ATTRIBUTE = "specverify_rule"


def declared_rule(fn: Callable[..., Any]) -> Rule | None:
    """The rule ``fn`` declares through :data:`RULE_ATTRIBUTE` ('full' or 'block'), None if none: the
    same as passing ``rule=`` (``--full-rule``), for implementations that know their rule."""
    rule = getattr(fn, RULE_ATTRIBUTE, None)
    if rule is None:
        return None
    if rule not in typing.get_args(Rule):
        raise SpecVerifyError(
            f"{getattr(fn, '__name__', fn)!r} declares {RULE_ATTRIBUTE} = {rule!r}; the declared rules are "
            f"{', '.join(map(repr, typing.get_args(Rule)))}: set one of them or remove the attribute"
        )
    out: Rule = rule
    return out


#: The one rule by which a round step receives the settings (docs/adapters.md).
SETTINGS_RULE = (
    "a round step receives the sampling settings only through a parameter named `settings` (or one annotated "
    "SamplingSettings); any other signature, *args, **kwargs and optional extra parameters included, is called "
    "with the five arguments (prefix, draft, target, gamma, rng)"
)


def settings_parameter(fn: Callable[..., Any]) -> inspect.Parameter | None:
    """The parameter of ``fn`` that receives the settings under :data:`SETTINGS_RULE`, or None."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for p in named:
        if p.name == "settings" or "SamplingSettings" in str(p.annotation):
            return p
    return None


def implementation_identity(obj: object) -> dict[str, Any]:
    """Name, defining file and a hash of that file's source: what a checkpoint is keyed on."""
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) else type(obj)
    out: dict[str, Any] = {
        "qualname": getattr(target, "__qualname__", repr(target)),
        "module": getattr(target, "__module__", ""),
    }
    try:
        path = inspect.getsourcefile(target)
        out["file"] = os.path.realpath(path) if path else None
        out["sha256"] = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except (TypeError, OSError):
        out["file"] = out["sha256"] = None
    return out


class _SequenceAdapter(Adapter):
    """Shared by round steps and generators: whole prefixes on context pairs, in a mode."""

    harness: Harness = "context"
    pair_kinds: tuple[PairKind, ...] = ("low", "high")
    strata_rule: StrataRule = "first-later"  # positions past the first are rare on the low-overlap pair

    def _setup(
        self,
        fn: Callable[..., Any],
        name: str | None,
        spec: str | None,
        logits: bool,
        greedy: bool,
        call_timeout: float | None,
        length: int,
        default_name: str,
    ) -> None:
        self.fn, self.spec, self.logits, self.greedy = fn, spec, logits, greedy
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__ or default_name
        self.call_timeout, self.length = call_timeout, length

    def mode(self, settings: SamplingSettings) -> str:
        if self.logits:
            return "logits"
        return "greedy" if (self.greedy or settings.is_greedy) else "probs"

    def identity(self) -> dict[str, Any]:
        return {
            "adapter": type(self).__name__,
            "spec": self.spec,
            "logits": self.logits,
            "greedy": self.greedy,
            **implementation_identity(self.fn),
        }


class RoundAdapter(_SequenceAdapter):
    """``step(prefix, draft, target, gamma, rng[, settings])``: one round per call (module docstring).

    ``logits=True``: draft/target return raw logits and the step receives the settings and applies
    them. ``greedy=True``: the step decodes greedily on raw probabilities; the audit is the exact
    greedy check. A step with a ``settings`` parameter (:data:`SETTINGS_RULE`) receives the settings
    in any mode (so a greedy audit on raw rows applies to it too); any other signature gets the
    five-argument call. ``rule='full'`` declares the full rule. A round step gets a stop unit: its
    requests end at the first stop id the rounds emit (the driver cuts the round there, as an
    engine's stop check does; a step handed the settings reads ``settings.stop_token_ids``)."""

    request_stops = True

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        spec: str | None = None,
        logits: bool = False,
        greedy: bool = False,
        rule: Rule | None = None,
        call_timeout: float | None = 30.0,
        length: int = 32,
    ) -> None:
        self._setup(fn, name, spec, logits, greedy, call_timeout, length, "step")
        self.rule = rule if rule is not None else declared_rule(fn)
        self.settings_param = settings_parameter(fn)
        if logits and self.settings_param is None:
            raise SpecVerifyError(
                f"{self.name} takes no `settings` parameter, but with logits=True (--logits) the step applies the "
                f"settings itself; rule: {SETTINGS_RULE}; add a sixth parameter `settings` (docs/adapters.md)"
            )
        self.takes_settings = self.settings_param is not None

    def generate(  # type: ignore[override]  # context pairs only
        self, pair: ContextPair, n: int, gamma: int, rng: np.random.Generator, settings: SamplingSettings,
        length: int | None = None,
    ) -> Generation:  # fmt: skip
        view = SequenceView(pair, settings, self.mode(settings))
        return run_round_step(
            self.fn,
            view,
            n=n,
            length=length or self.length,
            gamma=gamma,
            rng=rng,
            settings_param=self.settings_param,
            timeout=self.call_timeout,
            name=self.name,
        )


class GeneratorAdapter(_SequenceAdapter):
    """``generate(prompt, max_new_tokens, seed, model) -> list[int]``. ``model`` has
    ``target_probs(prefix)``, ``draft_probs(prefix)`` (read-only float64 [V]), ``target_logits``,
    ``draft_logits``, ``settings`` and ``vocab_size``; with ``logits=True`` only the logits are
    handed over and the generator applies ``model.settings`` itself. Every token is tested against
    the target's law given its true prefix; a black box shows no round positions, so one stratum."""

    strata_rule = "pooled"

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        spec: str | None = None,
        logits: bool = False,
        greedy: bool = False,
        call_timeout: float | None = 30.0,
        length: int = 32,
    ) -> None:
        self._setup(fn, name, spec, logits, greedy, call_timeout, length, "generate")
        # model.settings is always there, but a generator is told to decode greedily on raw rows
        # only when it declares that it reads the settings (logits) or decodes greedily.
        self.takes_settings = logits or greedy

    def generate(  # type: ignore[override]  # context pairs only
        self, pair: ContextPair, n: int, gamma: int, rng: np.random.Generator, settings: SamplingSettings,
        length: int | None = None,
    ) -> Generation:  # fmt: skip
        view = SequenceView(pair, settings, self.mode(settings))
        n_tok = length or self.length
        return run_generator(self.fn, view, n=n, length=n_tok, rng=rng, timeout=self.call_timeout, name=self.name)


class SubprocessAdapter(Adapter):
    """Another process speaking JSON lines (one request per line on stdin, one reply per line on
    stdout). Request: {"op": "verify", "draft_tokens": [[...]], "draft_probs": [[[...]]],
    "target_probs": [[[...]]], "seed": int}. Reply: {"tokens": [[...]]} (-1 padded) or
    {"error": "message"}. The first line sent is {"op": "hello"}; the reply names the
    implementation: {"name": "...", "one_hot": false}. With ``logits=True`` (CLI ``--cmd ...
    --logits``) the request carries "draft_logits" and "target_logits" (finite floats) and
    "settings" (temperature, top_k, top_p, min_p, repetition_penalty, ...) instead of the
    probabilities, and the process applies the settings itself."""

    harness = "kernel"
    pair_kinds = ("low", "high")

    def __init__(self, cmd: str, *, call_timeout: float | None = 30.0, logits: bool = False) -> None:
        self.cmd = cmd
        self.call_timeout = call_timeout
        self.logits = self.takes_settings = logits
        self.proc: subprocess.Popen[str] | None = None
        self.name = cmd
        self.one_hot = False

    def identity(self) -> dict[str, Any]:
        return {"adapter": "SubprocessAdapter", "cmd": self.cmd, "logits": self.logits}

    def start(self) -> None:
        """Start the process (if it is not running) and read its hello."""
        if self.proc is None or self.proc.poll() is not None:
            # stderr goes to a file: a pipe nobody reads could fill and block the process
            self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the process
            self.proc = subprocess.Popen(
                shlex.split(self.cmd),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
                bufsize=1,
            )
            hello = self._ask({"op": "hello"})
            self.name = hello.get("name", self.cmd)
            self.one_hot = bool(hello.get("one_hot", False))

    def _exited(self, proc: subprocess.Popen[str]) -> ImplementationError:
        """The finding for a process that closed its pipes: its exit code and the end of its stderr."""
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.proc = None
        self._stderr.seek(0)
        tail = self._stderr.read()[-600:].strip()
        said = f"; its stderr ended: {tail!r}" if tail else "; it wrote nothing to stderr"
        return ImplementationError(f"{self.cmd!r} exited early (exit code {code}) instead of answering{said}")

    def _ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        proc = self.proc
        # start() made the process, with pipes on both ends
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        stdout = proc.stdout
        try:
            proc.stdin.write(_json_line(msg))
            proc.stdin.flush()
        except OSError as exc:  # BrokenPipeError: the process is gone
            raise self._exited(proc) from exc
        box: dict[str, str] = {}

        def read() -> None:
            box["line"] = stdout.readline()

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(self.call_timeout)
        if t.is_alive():
            proc.kill()
            self.proc = None
            raise ImplementationTimeout(
                f"{self.cmd!r} did not answer within {self.call_timeout} s; the process was killed"
            )
        line = box.get("line", "")
        if not line:
            raise self._exited(proc)
        try:
            reply: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MalformedOutputError(f"{self.cmd!r} replied with a line that is not JSON: {line[:200]!r}") from exc
        if "error" in reply:
            raise ImplementationError(f"{self.cmd!r} reported an error: {reply['error']}")
        return reply

    def kernel(self, X: np.ndarray, Q: np.ndarray | None, P: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        rows = {"draft_probs": Q, "target_probs": P}
        return self._verify(X, rows, gen)

    def kernel_logits(
        self, X: np.ndarray, DL: ArrayLike, TL: ArrayLike, settings: SamplingSettings, gen: np.random.Generator
    ) -> np.ndarray:
        rows = {
            "draft_logits": np.asarray(DL),
            "target_logits": np.asarray(TL),
            "settings": settings.to_dict(),
        }
        return self._verify(X, rows, gen)

    def _verify(self, X: np.ndarray, rows: dict[str, Any], gen: np.random.Generator) -> np.ndarray:
        """One ``verify`` request (the drafts, the rows in either mode, a seed) and its tokens."""
        reply = self._ask({"op": "verify", "draft_tokens": X, **rows, "seed": int(gen.integers(2**31))})
        if "tokens" not in reply:
            raise MalformedOutputError(f"{self.cmd!r} reply has no 'tokens': {str(reply)[:200]}")
        return np.asarray(reply["tokens"])

    def generate(
        self,
        pair: TablePair | ContextPair,
        n: int,
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None,
    ) -> Generation:
        self.start()
        inner = KernelAdapter(
            self.kernel_logits if self.logits else self.kernel,
            name=self.name,
            one_hot=self.one_hot,
            logits=self.logits,
            call_timeout=None,
        )
        return inner.generate(pair, n, gamma, rng, settings)

    def close(self) -> None:
        if self.proc is not None:
            try:
                assert self.proc.stdin is not None  # a missing pipe goes the way of a failed close
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                self.proc.kill()
            self.proc = None


def _json_line(msg: dict[str, Any]) -> str:
    """A request as one JSON line, its arrays as nested lists. orjson writes a batch of rows about
    20x faster than json, with the same shortest round-trip digits; json where an array holds a
    value that is not finite (orjson would write null, json writes NaN or Infinity)."""
    arrays = {k: np.asarray(v) for k, v in msg.items() if isinstance(v, np.ndarray)}
    if all(a.dtype.kind in "iub" or np.isfinite(a).all() for a in arrays.values()):
        try:
            import orjson

            opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
            plain = {k: np.ascontiguousarray(a) for k, a in arrays.items()}
            return orjson.dumps({**msg, **plain}, option=opts).decode()
        except ImportError:  # an install without it: the standard library's, slower
            pass
    return json.dumps({**msg, **{k: a.tolist() for k, a in arrays.items()}}) + "\n"
