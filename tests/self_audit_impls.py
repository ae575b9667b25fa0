"""Misbehaving implementations for ``tests/test_self_audit.py``: a correct implementation of one
shape, wrapped so that it misbehaves in one chosen way.

A :class:`Misbehaviour` names the shape (``round``, ``kernel``, ``generator``), the mode (what the
implementation is handed: ``probs``; ``settings``, a round step with a ``settings`` parameter on
probabilities; ``logits``), the family and kind of misbehaviour, from which call on it misbehaves
(``start``) and at which settings (``when``, one of :data:`WHEN`); ``build()`` returns the
callable, ``adapter()`` the audit's adapter around it. The wrapper keeps what it did in
``Core.fired`` (calls that misbehaved) and ``Core.returned`` (the last malformed output).

The correct implementations (each PASSes its audits in tests/test_user_suite.py or the docs):

* round steps: ``user_impls.round_numpy.step_correct`` (probs), ``user_impls.greedy.step_settings_correct``
  (settings), ``user_impls.logits_steppers.step_logits_correct`` (logits);
* kernels: ``docs/examples/kernel.py:verify`` (probs), :func:`kernel_logits_correct` (logits);
* generators: ``user_impls.generators.generate_correct`` (probs), :func:`generate_logits_correct` (logits).

``CURRENT`` is what the in-process CLI audits (``--round self_audit_impls:CURRENT``); the test sets it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from specverify.audit import GeneratorAdapter, KernelAdapter, RoundAdapter
from specverify.dists import SamplingSettings, probs_from_logits

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from user_impls.generators import generate_correct  # noqa: E402
from user_impls.greedy import step_settings_correct  # noqa: E402
from user_impls.logits_steppers import step_logits_correct  # noqa: E402
from user_impls.round_numpy import step_correct  # noqa: E402


def _example(file: str, name: str) -> Callable[..., Any]:
    spec = importlib.util.spec_from_file_location(
        f"_self_audit_example_{Path(file).stem}", ROOT / "docs/examples" / file
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


kernel_correct = _example("kernel.py", "verify")


def _probs(logits, settings, history=None, n_prompt=0):
    """The law under ``settings``; the repetition penalty over ``history``, presence and frequency over
    its generated part (after the first ``n_prompt`` tokens)."""
    if history is None:
        return probs_from_logits(np.asarray(logits, dtype=np.float64), settings)
    v = np.shape(logits)[-1]
    seen = np.bincount(np.asarray(history, dtype=np.int64), minlength=v)
    out = np.bincount(np.asarray(history[n_prompt:], dtype=np.int64), minlength=v)
    return probs_from_logits(np.asarray(logits, dtype=np.float64), settings, seen_counts=seen, output_counts=out)


def kernel_logits_correct(draft_tokens, draft_logits, target_logits, settings, generator):
    """Correct: the settings applied to every row (kernels see no history), then the docs' kernel."""
    return kernel_correct(draft_tokens, _probs(draft_logits, settings), _probs(target_logits, settings), generator)


class _ProbsFromLogits:
    """A generator's ``model`` that turns the logits it is handed into the laws under ``model.settings``."""

    def __init__(self, model, n_prompt):
        self.model, self.vocab_size, self.settings, self.n_prompt = model, model.vocab_size, model.settings, n_prompt

    def target_probs(self, prefix):
        return _probs(self.model.target_logits(prefix), self.settings, list(prefix), self.n_prompt)

    def draft_probs(self, prefix):
        return _probs(self.model.draft_logits(prefix), self.settings, list(prefix), self.n_prompt)


def generate_logits_correct(prompt, max_new_tokens, seed, model):
    """Correct: ``generate_correct`` on the laws it computes itself from the logits and ``model.settings``."""
    return generate_correct(prompt, max_new_tokens, seed, _ProbsFromLogits(model, len(prompt)))


#: the correct implementation of each (shape, mode)
BASES: dict[tuple[str, str], Callable[..., Any]] = {
    ("round", "probs"): step_correct,
    ("round", "settings"): step_settings_correct,
    ("round", "logits"): step_logits_correct,
    ("kernel", "probs"): kernel_correct,
    ("kernel", "logits"): kernel_logits_correct,
    ("generator", "probs"): generate_correct,
    ("generator", "logits"): generate_logits_correct,
}
MODES = {"round": ("probs", "settings", "logits"), "kernel": ("probs", "logits"), "generator": ("probs", "logits")}
PARAMS = {
    ("round", "probs"): "prefix, draft, target, gamma, rng",
    ("kernel", "probs"): "draft_tokens, draft_probs, target_probs, generator",
    ("kernel", "logits"): "draft_tokens, draft_logits, target_logits, settings, generator",
    ("generator", "probs"): "prompt, max_new_tokens, seed, model",
    ("generator", "logits"): "prompt, max_new_tokens, seed, model",
}

#: the settings a misbehaviour applies at (implementations that see no settings: 'always' only)
WHEN: dict[str, Callable[[SamplingSettings], bool]] = {
    "always": lambda s: True,
    "greedy": lambda s: s.temperature == 0,
    "temperature": lambda s: s.temperature not in (0, 1),
    "top_k": lambda s: s.top_k > 0,
    "top_p": lambda s: s.top_p < 1,
    "min_p": lambda s: s.min_p > 0,
    "penalty": lambda s: s.repetition_penalty != 1,
    "everything": lambda s: True,
}

HANG_S, HANG_TIMEOUT_S = 1.5, 0.5  # a hang sleeps past its call timeout, then raises (its thread ends)


# ----------------------------------------------------------------------------- one call


@dataclasses.dataclass
class Call:
    """One call into the implementation: its arguments as received, and what they mean."""

    shape: str
    mode: str
    args: list

    @property
    def settings(self) -> SamplingSettings | None:
        if self.shape == "generator":
            return self.args[3].settings
        if self.shape == "kernel":
            return self.args[3] if self.mode == "logits" else None
        return self.args[5] if self.mode != "probs" else None

    @property
    def vocab(self) -> int:
        if self.shape == "generator":
            return int(self.args[3].vocab_size)
        if self.shape == "kernel":
            return int(np.shape(self.args[2])[-1])
        return len(np.asarray(self.args[1](list(self.args[0]))))

    @property
    def gamma(self) -> int:
        return int(self.args[0].shape[1]) if self.shape == "kernel" else int(self.args[3])

    def with_arg(self, i: int, value) -> Call:
        args = list(self.args)
        args[i] = value
        return dataclasses.replace(self, args=args)

    def base(self):
        return BASES[(self.shape, self.mode)](*self.args)

    def ids(self) -> np.ndarray:
        """The correct output as an int64 array ([n] or [B, gamma + 1])."""
        return np.asarray(self.base(), dtype=np.int64)


# ----------------------------------------------------------------------------- output families


def _set(arr: np.ndarray, value: int, where: int) -> list:
    out = arr.tolist()
    if arr.ndim == 2:
        out[0][where] = value
    else:
        out[where] = value
    return out


def _one_float(arr):
    out = arr.tolist()
    if arr.ndim == 2:
        out[0][0] = float(out[0][0])
    else:
        out[-1] = float(out[-1])
    return out


#: return types (family 1): (transform of the correct ids, the words a FAIL row must hold)
RETURN_TYPES: dict[str, tuple[Callable[[np.ndarray], Any], str]] = {
    "float_list": (lambda a: a.astype(float).tolist(), "a float"),
    "float_array": (lambda a: a.astype(np.float64), "float64"),
    "one_float": (_one_float, "a float"),
    "str_list": (lambda a: a.astype(str).tolist(), "a str"),
    "string": (lambda a: " ".join(map(str, a.ravel())), "a str"),
    "bool_list": (lambda a: (a != 0).tolist(), "a bool"),
    "bool_array": (lambda a: a != 0, "dtype bool"),
    "nested_list": (lambda a: a[..., None].tolist(), "nested"),
    "none": (lambda a: None, "a NoneType"),
    "dict": (lambda a: {"tokens": a.tolist()}, "a dict"),
    "bare_int": (lambda a: int(a.flat[0]), "a int"),
    "float_tensor": (lambda a: torch.tensor(a, dtype=torch.float32), "float32"),
    "object_array": (lambda a: a.astype(object), "dtype object"),
    "bfloat16_tensor": (lambda a: torch.tensor(a, dtype=torch.bfloat16), "bfloat16"),
    "unprintable": (lambda a: Unprintable(), "Unprintable"),
}


class Unprintable:
    """A return value whose repr raises."""

    def __repr__(self):
        raise RuntimeError("this object cannot be printed")


def _kernel_row0(a: np.ndarray, row: list[int]) -> np.ndarray:
    out = a.copy()
    out[0] = row + [-1] * (a.shape[1] - len(row))
    return out


def _kernel_shapes(a: np.ndarray, call: Call) -> dict[str, Any]:
    x0, v = int(call.args[0][0, 0]), call.vocab
    ragged = a.tolist()
    ragged[0] = ragged[0][:-1]
    return {
        "fewer_rows": a[:-1],
        "more_rows": np.concatenate([a, a[:1]]),
        "narrow": a[:, :-1],
        "wide": np.concatenate([a, np.full((len(a), 1), -1)], 1),
        "flat": a.reshape(-1),
        "three_d": a[None],
        "ragged": ragged,
        "no_token": _kernel_row0(a, []),
        "hole": _kernel_row0(a, [x0, -1, 0]),
        "not_draft": _kernel_row0(a, [(x0 + 1) % v, 0]),
    }


def shape_output(kind: str, a: np.ndarray, call: Call):
    """Return shapes (family 2): the malformed output of ``kind``."""
    if call.shape == "kernel":
        return _kernel_shapes(a, call)[kind]
    if kind == "too_many":
        return a.tolist() + [int(a[-1])] * (call.gamma + 2 - len(a))
    if kind == "too_few":
        return a.tolist()[:-1]
    return {"empty": [], "two_d": a[None]}[kind]


def shape_words(kind: str, out, shape: str) -> str:
    """What a FAIL row must say of a malformed shape."""
    if kind in ("fewer_rows", "more_rows", "narrow", "wide"):
        return f"shape {tuple(out.shape)}"
    fixed = {
        "flat": "1 dimension(s)",
        "three_d": "3 dimension(s)",
        "two_d": "2 dimension(s)",
        "ragged": "different lengths",
        "no_token": "emitted no token",
        "hole": "-1 inside",
        "not_draft": "must repeat the draft",
    }
    if kind in fixed:
        return fixed[kind]
    return f"returned {len(out)} tokens" if shape == "round" else f"returned {out}"


SHAPES = {
    "round": ("too_many", "empty", "two_d"),
    "kernel": (
        "fewer_rows",
        "more_rows",
        "narrow",
        "wide",
        "flat",
        "three_d",
        "ragged",
        "no_token",
        "hole",
        "not_draft",
    ),
    "generator": ("too_few", "empty", "two_d"),
}


def bad_id(kind: str, call: Call, arg: int) -> int:
    """Ids out of range (family 3): the id that replaces a correct one."""
    v = call.vocab
    return {"at_vocab": v, "above_vocab": v + arg, "large": 2**40 + arg, "negative": -arg, "huge": 2**64 + arg}[kind]


def range_output(kind: str, a: np.ndarray, call: Call, arg: int) -> tuple[list, int]:
    """The output with one id out of range, and that id."""
    bad = bad_id(kind, call, arg)
    if call.shape == "kernel" and kind == "negative":
        # -1 is a kernel's padding: a negative id is one below it, as the last token of a longer round
        n = (a >= 0).sum(1)
        r = int(np.argmax(n >= 2)) if (n >= 2).any() else 0
        out = a.tolist()
        out[r][max(int(n[r]) - 1, 0)] = -1 - arg
        return out, -1 - arg
    return _set(a, bad, where=0 if a.ndim == 2 or call.shape == "generator" else len(a) - 1), bad


RANGES = ("at_vocab", "above_vocab", "large", "negative", "huge")


def _strided(a):
    out = np.zeros((a.shape[0], 2 * a.shape[1]), dtype=np.int64)
    out[:, ::2] = a
    return out[:, ::2]


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


#: legitimate variations (family 12): the same ids in another container; must audit as the list does
LEGIT: dict[str, Callable[[np.ndarray], Any]] = {
    "tuple": lambda a: tuple(tuple(r) for r in a.tolist()) if a.ndim == 2 else tuple(a.tolist()),
    "list": lambda a: a.tolist(),
    "int32_array": lambda a: a.astype(np.int32),
    "uint16_array": lambda a: a.astype(np.uint16),
    "torch_long": lambda a: torch.from_numpy(a.copy()),
    "torch_int32": lambda a: torch.tensor(a, dtype=torch.int32),
    "np_scalars": lambda a: list(a),
    "readonly_array": _readonly,
    "strided": lambda a: _strided(a) if a.ndim == 2 else a[::-1][::-1],
    "fortran": np.asfortranarray,
    "longer": lambda a: a.tolist() + [0, 0, 0],
    "torch_rows": lambda a: [torch.from_numpy(r.copy()) for r in a],
}
LEGIT_KINDS = {
    "round": (
        "tuple",
        "list",
        "int32_array",
        "uint16_array",
        "torch_long",
        "torch_int32",
        "np_scalars",
        "readonly_array",
    ),
    "kernel": (
        *("tuple", "list", "int32_array", "torch_long", "torch_int32"),
        *("np_scalars", "readonly_array", "strided", "torch_rows"),
    ),
    "generator": ("tuple", "int32_array", "uint16_array", "torch_long", "np_scalars", "readonly_array", "longer"),
}


# ----------------------------------------------------------------------------- raising, timing, printing


class ImplBug(Exception):
    """An exception type of the implementation's own."""


class BrokenStr(Exception):
    """An exception whose text cannot be made (its __str__ raises)."""

    def __str__(self):
        raise RuntimeError("this exception has no text")


EXCEPTIONS: dict[str, type[BaseException]] = {
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "KeyError": KeyError,
    "TypeError": TypeError,
    "ZeroDivisionError": ZeroDivisionError,
    "AssertionError": AssertionError,
    "IndexError": IndexError,
    "ImplBug": ImplBug,
    "SystemExit": SystemExit,
    "BrokenStr": BrokenStr,
}


def _print(kind: str, n: int) -> None:
    text = f"debug: call {n}, accepted tokens so far\n"
    if kind in ("stdout", "both"):
        print(text, end="")
    if kind in ("stderr", "both"):
        print(text, end="", file=sys.stderr)
    if kind == "fd":
        os.write(1, text.encode())
        os.write(2, text.encode())


# ----------------------------------------------------------------------------- state, seeds, inputs


class _Memo:
    """A correct cache (keyed on the role, draft or target, and the whole prefix) or a stale one (keyed on the role
    and the prefix's length, last writer wins: the rows handed back are those of the previous call of
    that role at that length)."""

    def __init__(self, stale: bool):
        self.stale, self.rows = stale, {}

    def __call__(self, role, fn, prefix, *rest):
        # keyed on the role too: draft and target rows of one length must not evict each other
        key = (role, len(prefix)) if self.stale else (role, tuple(int(t) for t in prefix), *(tuple(r) for r in rest))
        fresh = fn(prefix, *rest)
        old = self.rows.get(key)
        self.rows[key] = fresh
        if self.stale and old is not None and np.shape(old) == np.shape(fresh):
            return old
        return fresh


class _ModelProxy:
    def __init__(self, model, memo: _Memo):
        self.model, self.memo = model, memo
        self.vocab_size, self.settings = model.vocab_size, model.settings

    def __getattr__(self, name):
        fn = getattr(self.model, name)
        return functools.partial(self.memo, name, fn) if name.endswith(("_probs", "_logits")) else fn


def with_memo(call: Call, memo: _Memo) -> Call:
    if call.shape == "generator":
        return call.with_arg(3, _ModelProxy(call.args[3], memo))
    draft, target = call.args[1], call.args[2]
    call = call.with_arg(1, functools.partial(memo, "draft", draft))
    return call.with_arg(2, lambda prefix, proposed: memo("target", target, prefix, proposed))


def with_rng(call: Call, kind: str, shared: np.random.Generator) -> Call:
    """Seeds ignored (family 10): randomness from the global numpy RNG, one Generator shared by every
    call, or a Generator seeded with a constant at every call."""
    if kind == "global_numpy":
        rng = np.random.default_rng(np.random.randint(2**31))
    elif kind == "shared_generator":
        rng = shared
    else:
        rng = np.random.default_rng(1234)
    if call.shape == "generator":
        return call.with_arg(2, int(rng.integers(2**31)))
    return call.with_arg(4 if call.shape == "round" else len(call.args) - 1, rng)


def write_rows(call: Call) -> None:
    """Mutating inputs (family 11): write into a row handed over (read-only: it raises)."""
    if call.shape == "kernel":
        call.args[2][0, 0, 0] = 0.0
    elif call.shape == "generator":
        m = call.args[3]
        (m.target_logits if call.mode == "logits" else m.target_probs)(list(call.args[0]))[0] = 0.0
    else:
        call.args[1](list(call.args[0]))[0] = 0.0


def mutate_after(call: Call) -> None:
    """Mutating the prefix (family 11) after the round: the list is the implementation's own copy."""
    if call.shape == "kernel":
        call.args[0][...] = 0  # draft_tokens: the auditor's own array
    else:
        call.args[0].reverse()
        call.args[0].append(0)


# ----------------------------------------------------------------------------- the wrapper


def _output(core: Core, call: Call):
    m, a = core.m, call.ids()
    if m.family == "return_type":
        out, core.words = RETURN_TYPES[m.kind][0](a), (RETURN_TYPES[m.kind][1],)
    elif m.family == "shape":
        out = shape_output(m.kind, a, call)
        core.words = (shape_words(m.kind, out, call.shape),)
    elif m.family == "range":
        out, bad = range_output(m.kind, a, call, m.arg)
        core.words = (str(bad),)
    else:
        out = LEGIT[m.kind](a)
    core.returned = out
    return out


def _raise(core: Core, call: Call):
    m = core.m
    if m.family == "unsupported":
        core.words = ("NotImplementedError", m.message)
        raise NotImplementedError(m.message)
    core.words = (m.kind,) if m.kind == "BrokenStr" else (m.kind, m.message)
    raise EXCEPTIONS[m.kind](m.message)


def _timing(core: Core, call: Call):
    if core.m.kind == "hang":
        core.words = ("did not return within",)
        time.sleep(HANG_S)
        raise RuntimeError("woke up after the hang")
    if core.calls % 20 == 1:
        time.sleep(core.m.arg / 1000)  # 1 to 9 ms every 20th call, far under the call timeout
    return call.base()


def _inputs(core: Core, call: Call):
    core.words = ("read-only",)  # writing into the rows is refused; draft_tokens should be too
    if core.m.kind == "write_rows":
        write_rows(call)
    out = call.base()
    mutate_after(call)
    return out


HANDLERS: dict[str, Callable[[Core, Call], Any]] = {
    "return_type": _output,
    "shape": _output,
    "range": _output,
    "legit": _output,
    "raises": _raise,
    "unsupported": _raise,
    "timing": _timing,
    "printing": lambda core, call: (_print(core.m.kind, core.calls), call.base())[1],
    "state": lambda core, call: with_memo(call, core.memo).base(),
    "seeds": lambda core, call: with_rng(call, core.m.kind, core.shared).base(),
    "inputs": _inputs,
}


class Core:
    """The state of one wrapped implementation: calls made, calls that misbehaved, what it said."""

    def __init__(self, m: Misbehaviour):
        self.m, self.calls, self.fired = m, 0, 0
        self.returned: Any = None
        self.words: tuple[str, ...] = ()
        self.shared = np.random.default_rng(7)
        self.memo = _Memo(stale=m.kind == "stale_rows")

    def _active(self, call: Call) -> bool:
        self.calls += 1
        if self.m.kind == "hang":
            return self.calls == self.m.start  # one hang: the calls after it behave
        s = call.settings
        applies = WHEN[self.m.when](s) if s is not None else self.m.when == "always"
        return self.calls >= self.m.start and applies

    def __call__(self, call: Call):
        if not self._active(call):
            return call.base()
        self.fired += 1
        words = self.words
        try:
            return HANDLERS[self.m.family](self, call)
        finally:
            self.words = words or self.words  # what the first misbehaving call did (the first FAIL row's)


def _face(core: Core, shape: str, mode: str) -> Callable[..., Any]:
    """The wrapper, with the signature of the correct implementation it wraps."""
    if shape == "round" and mode == "probs":

        def step(prefix, draft, target, gamma, rng):
            return core(Call(shape, mode, [prefix, draft, target, gamma, rng]))

        return step
    if shape == "round":

        def step_settings(prefix, draft, target, gamma, rng, settings):
            return core(Call(shape, mode, [prefix, draft, target, gamma, rng, settings]))

        return step_settings
    if shape == "kernel" and mode == "probs":

        def kernel(draft_tokens, draft_probs, target_probs, generator):
            return core(Call(shape, mode, [draft_tokens, draft_probs, target_probs, generator]))

        return kernel
    if shape == "kernel":

        def kernel_logits(draft_tokens, draft_logits, target_logits, settings, generator):
            return core(Call(shape, mode, [draft_tokens, draft_logits, target_logits, settings, generator]))

        return kernel_logits

    def generate(prompt, max_new_tokens, seed, model):
        return core(Call(shape, mode, [prompt, max_new_tokens, seed, model]))

    return generate


# ----------------------------------------------------------------------------- signatures (family 6)

#: signature variants of an n-argument call that must get exactly the n arguments: (parameters, what must
#: hold, the call); {p}: the implementation's parameters, {n}: their count, {r}: the same renamed
PLAIN_SIGNATURES = {
    "varargs": ("*args", "len(args) == {n}", "*args"),
    "args_kwargs": ("*args, **kwargs", "len(args) == {n} and not kwargs", "*args"),
    "kwargs": ("{p}, **kwargs", "not kwargs", "{p}"),
    "optional": ("{p}, debug=False", "debug is False", "{p}"),
    "kwonly": ("{p}, *, session=None", "session is None", "{p}"),
    "posonly": ("{p}, /", "True", "{p}"),
    "renamed": ("{r}", "True", "{r}"),
    "other_annotation": ("{p}, opts: 'dict | None' = None", "opts is None", "{p}"),
}
#: round steps that take the settings: variants that must receive a SamplingSettings, (parameters, the
#: parameter that receives it, what else must hold)
SETTINGS_SIGNATURES = {
    "plain": ("{p}, settings", "settings", "True"),
    "default": ("{p}, settings=None", "settings", "True"),
    "kwonly": ("{p}, *, settings", "settings", "True"),
    "posonly": ("{p}, settings, /", "settings", "True"),
    "annotated": ("{p}, cfg: SamplingSettings", "cfg", "True"),
    "annotated_optional": ("{p}, cfg: Optional[SamplingSettings] = None", "cfg", "True"),
    "string_annotation": ("{p}, cfg: 'SamplingSettings'", "cfg", "True"),
    "other_annotation": ("{p}, settings: dict = None", "settings", "True"),
    "varargs_settings": ("*args, settings=None", "settings", "len(args) == 5"),
    "settings_kwargs": ("{p}, settings, **kwargs", "settings", "not kwargs"),
}
OBJECT_SIGNATURES = ("callable_varargs", "bound_method", "partial")


def expect(ok: bool, got) -> None:
    if not ok:
        raise TypeError(f"signature rule broken: received {got!r}")


def expect_settings(s) -> None:
    expect(isinstance(s, SamplingSettings), s)


class _VarargsCallable:
    """``__call__(self, *args)``: a callable object that forwards what it gets."""

    def __init__(self, base, n):
        self.base, self.n = base, n

    def __call__(self, *args):
        expect(len(args) == self.n, args)
        return self.base(*args)

    def method(self, *args):
        return self(*args)


class _SettingsCallable:
    """``__call__(self, prefix, draft, target, gamma, rng, settings)``: a callable object that takes the settings."""

    def __init__(self, base):
        self.base = base

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        expect_settings(settings)
        return self.base(prefix, draft, target, gamma, rng, settings)


def _partial_target(base, n, *args):
    expect(len(args) == n, args)
    return base(*args)


def signature_kinds(shape: str, mode: str) -> tuple[str, ...]:
    if shape == "round" and mode != "probs":
        return (*SETTINGS_SIGNATURES, "callable_settings")
    return (*PLAIN_SIGNATURES, *OBJECT_SIGNATURES)


def signature_variant(shape: str, mode: str, kind: str) -> Callable[..., Any]:
    """The correct implementation of (shape, mode) behind signature ``kind``."""
    base = BASES[(shape, mode)]
    takes_settings = shape == "round" and mode != "probs"
    names = PARAMS.get((shape, mode), PARAMS[("round", "probs")])
    n = len(names.split(",")) + (1 if takes_settings else 0)
    if kind == "callable_settings":
        return _SettingsCallable(base)
    if kind in OBJECT_SIGNATURES:
        obj = _VarargsCallable(base, n)
        variants = {"callable_varargs": obj, "bound_method": obj.method}
        return variants.get(kind) or functools.partial(_partial_target, base, n)
    if takes_settings:
        params, name, check = SETTINGS_SIGNATURES[kind]
        call = "*args" if params.startswith("*args") else "{p}"
        body = f"    expect({check}, locals())\n    expect_settings({name})\n    return base({call}, {name})"
    else:
        params, check, call = PLAIN_SIGNATURES[kind]
        body = f"    expect({check}, locals())\n    return base({call})"
    renamed = ", ".join(f"a{i}" for i in range(n))
    source = f"def f({params}):\n{body}\n".format(p=names, n=n, r=renamed)
    scope = {"base": base, "expect": expect, "expect_settings": expect_settings}
    scope.update(SamplingSettings=SamplingSettings, Optional=Optional)
    exec(source, scope)  # the variants are this module's own text
    fn = scope["f"]
    fn.__name__ = fn.__qualname__ = f"{shape}_{kind}"
    return fn


# ----------------------------------------------------------------------------- what is built

FAMILIES = (
    "return_type",
    "shape",
    "range",
    "raises",
    "unsupported",
    "signature",
    "timing",
    "printing",
    "state",
    "seeds",
    "inputs",
    "legit",
)
#: neutral kinds: the verdict must be the bare implementation's, row for row
NEUTRAL = {"slow", "cache_correct", "mutate_prefix"}
#: kinds whose output depends on more than the call's arguments (call counts, shared state)
STATEFUL = {"hang", "stale_rows", "global_numpy", "shared_generator"}


def kinds(family: str, shape: str, mode: str) -> tuple[str, ...]:
    """The kinds of ``family`` that apply to (shape, mode)."""
    table: dict[str, tuple[str, ...]] = {
        "return_type": tuple(RETURN_TYPES),
        "shape": SHAPES[shape],
        "range": RANGES,
        "raises": tuple(EXCEPTIONS),
        "unsupported": ("declines",),
        "signature": signature_kinds(shape, mode),
        "timing": ("slow", "hang"),
        "printing": ("stdout", "stderr", "both", "fd"),
        "state": ("cache_correct", "stale_rows") if shape != "kernel" else (),
        "seeds": ("global_numpy", "shared_generator", "fixed_per_call"),
        "inputs": ("write_rows", "mutate_prefix") if shape != "kernel" else ("write_rows", "write_draft_tokens"),
        "legit": LEGIT_KINDS[shape],
    }
    return table[family]


@dataclasses.dataclass(frozen=True)
class Misbehaviour:
    shape: str  # round | kernel | generator
    mode: str  # probs | settings (round steps) | logits
    family: str = "none"  # one of FAMILIES, or 'none': the correct implementation itself
    kind: str = "none"
    start: int = 1  # the first call that misbehaves (1-based)
    when: str = "always"  # the settings it misbehaves at (WHEN)
    arg: int = 1  # the kind's parameter (an offset, a sleep in half-milliseconds, ...)

    @property
    def message(self) -> str:
        return f"misbehaviour {self.family}/{self.kind} #{self.arg}"

    @property
    def sees_settings(self) -> bool:
        return self.shape == "generator" or self.mode != "probs"

    @property
    def neutral(self) -> bool:
        """The verdict must be the correct implementation's, check for check."""
        return self.family in ("signature", "printing", "legit") or self.kind in NEUTRAL

    @property
    def input_deterministic(self) -> bool:
        """Each call's output is a function of that call's arguments (so of the seed and the options)."""
        return self.start == 1 and self.kind not in STATEFUL

    def build(self) -> Callable[..., Any]:
        if self.family == "none":
            return BASES[(self.shape, self.mode)]
        if self.family == "signature":
            return signature_variant(self.shape, self.mode, self.kind)
        core = Core(self)
        fn = _face(core, self.shape, self.mode)
        fn.core = core  # type: ignore[attr-defined]
        return fn

    def adapter(self, fn: Callable[..., Any] | None = None, length: int = 8):
        """The audit's adapter (round steps and generators: ``length`` tokens per sequence)."""
        fn = fn if fn is not None else self.build()
        kw = {"logits": self.mode == "logits", "call_timeout": self.call_timeout}
        if self.shape == "kernel":
            return KernelAdapter(fn, **kw)
        return (RoundAdapter if self.shape == "round" else GeneratorAdapter)(fn, length=length, **kw)

    @property
    def call_timeout(self) -> float:
        return HANG_TIMEOUT_S if self.kind == "hang" else 30.0

    def cli_args(self, spec: str = "self_audit_impls:CURRENT") -> list[str]:
        out = [f"--{self.shape}", spec] + (["--logits"] if self.mode == "logits" else [])
        return out + ["--call-timeout", str(self.call_timeout)]


def core_of(fn) -> Core | None:
    return getattr(fn, "core", None)


# ----------------------------------------------------------------------------- for the CLI's usage errors

CURRENT: Callable[..., Any] = step_correct
NOT_CALLABLE = 3


def wrong_arity(prefix, draft):
    return [0]
