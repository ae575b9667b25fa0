"""The golden verdicts: audits whose JSON verdicts are recorded (tests/golden/verdicts.json) and must
stay equal, apart from timing, through refactors of the pipeline (issue 20).

Every shape is here: the catalogue's bugs and decoys (the sampler adapter), user-style round steps,
kernels and generators (correct, buggy, declining a setting, malformed), a subprocess kernel, an
LM audit on tiny transformers models, and an endpoint audit against `specverify serve`'s model.
Sizes are small so that the whole set runs in about a minute: the point is that the same inputs
give the same verdict, not that the verdict is strong.

``python scripts/golden_verdicts.py`` rewrites the file (only when a change of verdicts is meant).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

GOLDEN = HERE / "golden" / "verdicts.json"
CATALOGUE_EPS = 0.2  # quick FAILs and PASSes; the verdicts' content, not their power, is what is kept
DIAGNOSED = ("residual_softmax", "replacement_from_p")  # catalogue FAILs recorded with their diagnosis


def _catalogue(name: str) -> Callable[[], Any]:
    def run():
        from specverify.audit import SamplerAdapter, audit
        from specverify.catalogue import BUGS, DECOYS

        cls = next(c for c in (*BUGS, *DECOYS) if c.name == name)
        return audit(SamplerAdapter(cls()), eps=CATALOGUE_EPS, diagnose=name in DIAGNOSED)

    return run


def _user(shape: str, spec: str, **options: Any) -> Callable[[], Any]:
    """A user-style implementation from tests/user_impls (module:function) in one shape."""

    def run():
        import importlib

        from specverify.audit import GeneratorAdapter, KernelAdapter, RoundAdapter, audit

        mod, fn = spec.split(":")
        impl = getattr(importlib.import_module(mod), fn)
        adapter_kw = {k: options.pop(k) for k in ("logits", "greedy", "rule") if k in options}
        adapter = {"round": RoundAdapter, "kernel": KernelAdapter, "generator": GeneratorAdapter}[shape]
        return audit(adapter(impl, **adapter_kw), diagnose=False, **{"vocab": 16, "gamma": 3, **options})

    return run


def _malformed_round():
    from user_impls.round_numpy import step_correct

    from specverify.audit import RoundAdapter, audit

    def step(*args):
        return [float(t) for t in step_correct(*args)]

    return audit(RoundAdapter(step, name="floats"), vocab=16, gamma=2, rounds=3, diagnose=False)


def _declining_round():
    """A settings-aware step that declines min-p and greedy (UNSUPPORTED rows, never FAIL)."""
    from user_impls.logits_steppers import step_logits_correct

    from specverify.audit import RoundAdapter, audit

    def step(prefix, draft, target, gamma, rng, settings):
        if settings.min_p or settings.temperature == 0:
            raise NotImplementedError("min-p and greedy are not implemented")
        return step_logits_correct(prefix, draft, target, gamma, rng, settings)

    return audit(RoundAdapter(step, name="declines", logits=True), vocab=16, gamma=2, eps=0.3, diagnose=False)


def _cmd_kernel():
    from specverify.audit import SubprocessAdapter, audit

    adapter = SubprocessAdapter(f"{sys.executable} {HERE / 'clients' / 'logits_kernel.py'}", logits=True)
    try:
        return audit(adapter, vocab=16, gamma=2, eps=0.3, diagnose=False, exact_checks=False)
    finally:
        adapter.close()


def _models():
    import torch

    from specverify.lm.transformers_lm import early_exit_copy, layered_target

    torch.set_num_threads(1)
    t = layered_target("llama", vocab=48, hidden=32, layers=3, heads=2, seed=4, lm_head_scale=20.0, keep=1, damp=0.2)
    return t, early_exit_copy(t, layers=1)


def _lm_audit():
    import torch

    from specverify import SamplingSettings
    from specverify.audit.sources.lm_audit import audit_lm
    from specverify.runners import speculative_generate

    t, d = _models()

    def generate(prompt, n, seed, settings):
        return list(
            speculative_generate(t, d, prompt, n, settings, torch.Generator().manual_seed(seed), gamma=3).tokens
        )

    s = (SamplingSettings(temperature=0.8), SamplingSettings(top_k=5))
    return audit_lm(generate, t, prompts=[[1, 2, 3], [4, 5, 6, 7]], gamma=3, eps=0.3, settings=s, name="lm")


@contextlib.contextmanager
def _served() -> Iterator[tuple[str, Any]]:
    """`specverify serve --speculative` in a thread: (base URL, its target model)."""
    from specverify.runners.serve import default_models, make_server

    target, draft = default_models(vocab=64, seed=0, speculative=True)
    server = make_server(target, draft, port=0, gamma=3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", target
    finally:
        server.shutdown()
        server.server_close()


def _endpoint_audit():
    from specverify import SamplingSettings
    from specverify.audit.sources.http_adapter import http_generator
    from specverify.audit.sources.lm_audit import audit_lm

    with _served() as (url, target):
        gen = http_generator(url, timeout=60)
        s = (SamplingSettings(temperature=0.9),)
        return audit_lm(gen, target, prompts=[[1, 2, 3], [5, 6]], length=4, eps=0.3, settings=s, name="endpoint")


def cases() -> dict[str, Callable[[], Any]]:
    """name -> a function that runs the audit and returns its Verdict."""
    from specverify.catalogue import BUGS, DECOYS

    out: dict[str, Callable[[], Any]] = {f"catalogue/{c.name}": _catalogue(c.name) for c in (*BUGS, *DECOYS)}
    out |= {
        "round/correct": _user("round", "user_impls.round_numpy:step_correct", eps=0.2),
        "round/residual_from_p": _user("round", "user_impls.round_numpy:step_residual_from_p", rounds=400),
        "round/too_few_rounds": _user("round", "user_impls.round_numpy:step_correct", rounds=20),
        "round/full_rule_bonus_from_q": _user(
            "round", "user_impls.round_numpy:step_bonus_from_q", rule="full", rounds=400
        ),
        "round/logits_temp_target_only": _user(
            "round", "user_impls.logits_steppers:step_logits_temp_target_only", logits=True, rounds=300
        ),
        "round/greedy_argmax": _user("round", "user_impls.greedy:greedy_argmax", greedy=True),
        "round/greedy_settings_correct": _user("round", "user_impls.greedy:step_settings_correct", eps=0.3),
        "round/malformed_floats": _malformed_round,
        "round/declines_min_p_and_greedy": _declining_round,
        "kernel/vectorised": _user("kernel", "user_impls.kernels:kernel_vectorised", eps=0.2),
        "kernel/residual_from_p": _user("kernel", "user_impls.kernels:kernel_residual_from_p", eps=0.2),
        "generator/correct": _user("generator", "user_impls.generators:generate_correct", eps=0.3),
        "generator/unverified_tail": _user("generator", "user_impls.generators:generate_unverified_tail", rounds=200),
        "cmd/logits_kernel": _cmd_kernel,
        "lm/speculative_generate": _lm_audit,
        "endpoint/serve_speculative": _endpoint_audit,
    }
    return out


# --- what is compared -------------------------------------------------------------------------

_TIMING_KEYS = {"seconds", "estimated_seconds", "wall_s", "elapsed"}
# the time-based parts of an INCONCLUSIVE's advice (a rate measured on this machine)
_TIMING_TEXT = [
    (re.compile(r"(at least|>=) [\d,]+( s)?"), r"\1 <T>"),
    (re.compile(r"measured [\d,.]+ per second"), "measured <R> per second"),
    # float32 torch reductions depend on the thread count: the gap is a measurement, not a verdict
    (re.compile(r"logit gap [\d.e+-]+"), "logit gap <G>"),
]


def normalised(value: Any) -> Any:
    """A verdict's JSON without timing: the keys above dropped, rates, time estimates and float32 logit gaps
    in text masked."""
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in _TIMING_KEYS}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    if isinstance(value, str):
        for pattern, repl in _TIMING_TEXT:
            value = pattern.sub(repl, value)
    return value


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Where two normalised verdicts differ: numbers within a relative 1e-9 (float reductions may
    differ in the last bits between CPUs), everything else exactly."""
    if isinstance(want, dict) and isinstance(got, dict):
        keys = sorted(set(got) | set(want))
        return [d for k in keys for d in differences(got.get(k), want.get(k), f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{path}[{i}]")]
    numbers = (int, float)
    if isinstance(want, numbers) and isinstance(got, numbers) and not isinstance(want, bool):
        if got == want or abs(got - want) <= 1e-9 * max(abs(got), abs(want)):
            return []
    elif got == want:
        return []
    return [f"{path}: {str(got)[:200]!r} != golden {str(want)[:200]!r}"]
