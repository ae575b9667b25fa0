"""A verdict depends on the implementation, the seed and the options alone (issue 19).

Each test meets a defect of the Why list as a user met it: correct implementations written the way
users write them, in modules outside the repository, audited through the installed CLI (or the
Python API and pytest where that is the entry point), asserting the message and not only the exit
code. Statistical verdicts here are seeded; a false FAIL of a correct implementation is bounded by
the audit's alpha (1e-6 per audit).
"""

from __future__ import annotations

import math
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_entry_points import run_cli  # noqa: E402

from specverify.audit import GeneratorAdapter, KernelAdapter, RoundAdapter, audit  # noqa: E402
from specverify.dists import SamplingSettings  # noqa: E402
from specverify.stats import FAIL, PASS, UNSUPPORTED  # noqa: E402

FAST = ["--vocab", "16", "--gamma", "2", "--eps", "0.2", "--no-progress"]

PICKY = '''
"""A correct settings-aware step: temperature > 0, top-k and top-p, nothing else."""
import numpy as np
from specverify.dists import SamplingSettings, probs_from_logits

CALLS = {}


def _refuse(s):
    if s.temperature == 0 or s.min_p or s.repetition_penalty != 1.0 or s.presence_penalty or s.frequency_penalty:
        raise NotImplementedError(f"only temperature > 0, top-k and top-p (got {s.short()})")


def _sample(w, rng):
    return int(rng.choice(len(w), p=w / w.sum()))


def step(prefix, draft, target, gamma, rng, settings):
    CALLS[settings.short()] = CALLS.get(settings.short(), 0) + 1
    _refuse(settings)
    xs, qs = [], []
    for _ in range(gamma):
        q = probs_from_logits(np.asarray(draft(list(prefix) + xs)), settings)
        xs.append(_sample(q, rng))
        qs.append(q)
    rows = np.asarray(target(list(prefix), xs))
    ps = [probs_from_logits(rows[j], settings) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(_sample(np.maximum(ps[i] - qs[i], 0.0), rng))
        return out
    return out + [_sample(ps[gamma], rng)]


def step_annotated(prefix, draft, target, gamma, rng, s: SamplingSettings):
    return step(prefix, draft, target, gamma, rng, s)
'''

SHAPES = '''
"""Correct five-argument steps written in the shapes users write."""
import numpy as np


def _sample(w, rng):
    return int(rng.choice(len(w), p=np.asarray(w) / np.sum(w)))


def _round(prefix, draft, target, gamma, rng):
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs))
        xs.append(_sample(q, rng))
        qs.append(q)
    ps = np.asarray(target(list(prefix), xs))
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        return out + [_sample(np.maximum(ps[i] - qs[i], 0.0), rng)]
    return out + [_sample(ps[gamma], rng)]


class Stepper:
    def __call__(self, *args):
        return _round(*args)


star = Stepper()


def debug(prefix, draft, target, gamma, rng, debug=False):
    return _round(prefix, draft, target, gamma, rng)


def session(prefix, draft, target, gamma, rng, session=None):
    return _round(prefix, draft, target, gamma, rng)


def kwargs(prefix, draft, target, gamma, rng, **kw):
    return _round(prefix, draft, target, gamma, rng)


def floats(prefix, draft, target, gamma, rng):
    return [float(t) for t in _round(prefix, draft, target, gamma, rng)]
'''


@pytest.fixture(scope="module")
def usermods(tmp_path_factory):
    d = tmp_path_factory.mktemp("integrity_mods")
    (d / "picky.py").write_text(PICKY)
    (d / "shapes.py").write_text(SHAPES)
    (d / "dies_at_hello.py").write_text(
        "import sys\nsys.stderr.write('ImportError: no module mykernel\\n')\nsys.exit(7)\n"
    )
    (d / "dies_after_hello.py").write_text(
        "import json, sys\nsys.stdin.readline()\nprint(json.dumps({'name': 'dies'}), flush=True)\n"
        "sys.stderr.write('Traceback: index out of range in verify\\n')\nsys.exit(3)\n"
    )
    (d / "empty.ckpt").write_text("")
    return d


def _rows(stdout: str, status: str) -> list[str]:
    """Check lines of the narrow layout that carry ``status``."""
    return [ln for ln in stdout.splitlines() if ln.startswith(status + " ")]


# --- UNSUPPORTED is an outcome everywhere -------------------------------------------------------


def test_refusing_step_passes_what_it_takes_and_reports_the_rest_unsupported(usermods):
    r = run_cli("audit", "--round", "picky:step", "--logits", *FAST, path=[usermods], env_extra={"COLUMNS": "80"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout
    unsupported = " ".join(_rows(r.stdout, "UNSUPPORTED"))
    for name in ("greedy equivalence (temperature 0)", "min_p=0.1", "repetition_penalty=1.3", "presence_penalty=1.5"):
        assert name in unsupported, r.stdout
    headline = r.stdout.strip().splitlines()[-1]
    assert headline.startswith("PASS: no deviation of TV >= ")
    # min-p, the three penalties and the combined setting, and greedy
    assert "7 UNSUPPORTED by the implementation, not covered: " in headline  # the long greedy run too


def test_every_setting_declined_is_unsupported_with_exit_5(usermods):
    r = run_cli("audit", "--round", "picky:step", "--logits", "--min-p", "0.1", *FAST, path=[usermods])
    assert r.returncode == 5, r.stdout + r.stderr
    assert "FAIL" not in r.stdout  # the reproducibility check runs on a setting the step takes, or not at all
    headline = r.stdout.strip().splitlines()[-1]
    assert headline.startswith("UNSUPPORTED: the implementation declined every setting audited (6)")  # units
    assert "only temperature > 0, top-k and top-p" in headline


def test_a_declined_unit_stops_at_its_first_call(usermods):
    """Before, the collector kept calling a declining step until the time cap (10,000+ calls, 600 s)."""
    sys.path.insert(0, str(usermods))
    import picky

    picky.CALLS.clear()
    settings = (SamplingSettings(top_k=5), SamplingSettings(min_p=0.1))
    v = audit(RoundAdapter(picky.step, logits=True), settings=settings, vocab=16, gamma=2, eps=0.2, diagnose=False)
    assert v.status == PASS, v.headline()
    declined = [c.status for c in v.checks if "min_p" in c.name]
    assert declined and set(declined) == {UNSUPPORTED}
    assert picky.CALLS["min_p=0.1"] == len(declined)  # one call per unit, then the unit stops


# --- no verdict depends on the machine: the advice of a capped audit -------------------------------


def test_a_cap_reached_before_any_unit_never_advises_zero_rounds(usermods):
    r = run_cli("audit", "--round", "shapes:debug", "--budget", "1e-9", *FAST, path=[usermods])
    assert r.returncode == 3, r.stdout + r.stderr
    headline = r.stdout.strip().splitlines()[-1]
    assert "--rounds 0" not in headline and "about 0 rounds" not in headline
    assert "were not sampled before the time cap" in headline and "--budget above 1e-09 s" in headline


def test_units_the_cap_left_unsampled_are_estimated_from_the_sampled_ones():
    from specverify.audit import SamplerAdapter
    from specverify.audit.pipeline.collect import UnitSample, WorkerPool, collect_unit
    from specverify.audit.pipeline.plan import plan_audit
    from specverify.audit.pipeline.run import AuditConfig, _needed
    from specverify.catalogue import ChainSampler

    adapter, cfg = SamplerAdapter(ChainSampler()), AuditConfig(eps=0.05, rounds=None)
    plan = plan_audit(adapter, cfg)
    u0 = plan.units[0]
    s0 = UnitSample()
    pool = WorkerPool(1, adapter, {u0.index: u0.make_pair(adapter.harness, cfg)})
    collect_unit(u0, u0.make_pair(adapter.harness, cfg), cfg, plan.need(u0), s0, pool, deadline=math.inf)
    s0.complete = False  # as if the cap cut it after its first batches
    samples = {u.index: UnitSample() for u in plan.units} | {u0.index: s0}
    needed = _needed(plan, samples, cfg, elapsed=2.0)
    assert needed is not None and all(r["needed"] and r["needed"] > 0 for r in needed["units"])
    assert needed["rounds_per_unit"] >= max(r["needed"] for r in needed["units"]) > 0
    assert f"--rounds {needed['rounds_per_unit']}" in needed["statement"]
    assert f"rounds={needed['rounds_per_unit']}" in needed["statement_python"]
    assert "--" not in needed["statement_python"]


# --- one explicit signature rule ---------------------------------------------------------------


@pytest.mark.parametrize("fn", ["star", "debug", "session", "kwargs"])
def test_five_argument_steps_in_every_shape_pass(usermods, fn):
    """*args, an optional sixth parameter or **kwargs: the five-argument call (before, the settings
    went in as the sixth argument and the audit FAILed)."""
    r = run_cli("audit", "--round", f"shapes:{fn}", *FAST, "--temperature", "1", path=[usermods])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("PASS: no deviation of TV >= ")


def test_settings_reach_a_parameter_annotated_sampling_settings(usermods):
    r = run_cli("audit", "--round", "picky:step_annotated", "--logits", "--top-k", "5", *FAST, path=[usermods])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("PASS: no deviation of TV >= ")


def test_logits_step_without_a_settings_parameter_is_a_usage_error_naming_the_rule(usermods):
    r = run_cli("audit", "--round", "shapes:debug", "--logits", *FAST, path=[usermods])
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "the step has no `settings` parameter" in line
    assert "only through a parameter named `settings` (or one annotated SamplingSettings)" in line


# --- output validation ------------------------------------------------------------------------

MALFORMED = {
    "float": (lambda ids: [float(t) for t in ids], "a float "),
    "string": (lambda ids: [str(t) for t in ids], "a str '"),
    "bool": (lambda ids: [bool(t % 2) for t in ids], "a bool "),
    "nested": (lambda ids: [list(ids)], "a nested list"),
    "float array": (lambda ids: np.asarray(ids, dtype=np.float32), "dtype float32"),
    "bare int": (lambda ids: int(ids[0]), "a int "),
}


def _shifted(ids):
    return [t + 1 if t < 15 else t for t in ids]  # ids >= 1 so that bool(t % 2) differs from t


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_malformed_step_and_generator_outputs_fail_naming_what_came_back(kind):
    sys.path.insert(0, str(Path(__file__).parent))
    from user_impls.generators import generate_correct
    from user_impls.round_numpy import step_correct

    wrap, words = MALFORMED[kind]
    step = lambda *a: wrap(_shifted(step_correct(*a)))  # noqa: E731
    gen = lambda *a: wrap(_shifted(generate_correct(*a)))  # noqa: E731
    for adapter in (RoundAdapter(step, name="step"), GeneratorAdapter(gen, name="gen")):
        v = audit(adapter, vocab=16, gamma=2, rounds=2, settings=(SamplingSettings(),), diagnose=False)
        assert v.status == FAIL, (kind, v.headline())
        assert words in v.headline(), v.headline()


@pytest.mark.parametrize("kind", ["float", "string", "bool", "nested", "float array"])
def test_malformed_kernel_outputs_fail(kind):
    def kernel(draft_tokens, draft_probs, target_probs, generator):
        out = np.full((len(draft_tokens), draft_tokens.shape[1] + 1), -1)
        out[:, 0] = np.where(draft_tokens[:, 0] == 0, 1, draft_tokens[:, 0])  # a replacement at position 0
        if kind == "float array":
            return out.astype(np.float64)
        return [
            [{"float": float, "string": str, "bool": bool}.get(kind, lambda t: [t])(int(t)) for t in row] for row in out
        ]

    v = audit(KernelAdapter(kernel), vocab=16, gamma=2, rounds=50, settings=(SamplingSettings(),), diagnose=False)
    assert v.status == FAIL
    assert re.search(
        r"returned (an array of dtype float64|a (float|str|bool) .* at \[0\]\[0\]|a row with a nested)", v.headline()
    ), v.headline()


def test_float_ids_through_the_cli_fail_with_the_value(usermods):
    r = run_cli("audit", "--round", "shapes:floats", *FAST, "--no-diagnosis", path=[usermods])
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"floats returned a float \d+\.0 at \[0\]", r.stdout.strip().splitlines()[-1])


# --- entry points -----------------------------------------------------------------------------


def test_endpoint_url_as_serve_prints_it_is_the_base_url():
    from specverify.audit.front.cli import _check_url

    for url in (
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/completions",
        "http://127.0.0.1:8000/v1/completions/",
    ):
        assert _check_url("--endpoint", url) == "http://127.0.0.1:8000"


def test_endpoint_url_with_its_path_names_the_server_not_a_fail():
    r = run_cli("audit", "--endpoint", "http://127.0.0.1:9/v1/completions", "--no-progress")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("specverify: error: nothing answers at http://127.0.0.1:9 ")


def test_resume_from_an_empty_checkpoint_is_a_usage_error(usermods):
    r = run_cli("audit", "reference", "--checkpoint", usermods / "empty.ckpt", "--resume", "--no-progress")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        f"specverify: error: --resume: the checkpoint '{usermods / 'empty.ckpt'}' is empty; delete it and run "
        "without --resume"
    )


def test_resume_from_a_missing_checkpoint_is_a_usage_error(tmp_path):
    r = run_cli("audit", "reference", "--checkpoint", tmp_path / "none.npz", "--resume", "--no-progress")
    assert r.returncode == 2 and r.stdout == ""
    assert "--resume: no checkpoint at" in r.stderr and "drop --resume to start afresh" in r.stderr
    with pytest.raises(Exception, match="resume=True: no checkpoint at"):
        from specverify.audit import SamplerAdapter
        from specverify.catalogue import ChainSampler

        audit(SamplerAdapter(ChainSampler()), checkpoint=str(tmp_path / "none.npz"), resume=True)


def test_cmd_that_dies_at_hello_is_a_usage_error_with_its_exit_code_and_stderr(usermods):
    r = run_cli("audit", "--cmd", f"{sys.executable} {usermods / 'dies_at_hello.py'}", "--no-progress")
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "exited early (exit code 7)" in line and "ImportError: no module mykernel" in line


def test_cmd_that_dies_after_hello_fails_with_its_exit_code_and_stderr(usermods):
    r = run_cli("audit", "--cmd", f"{sys.executable} {usermods / 'dies_after_hello.py'}", *FAST, "--no-diagnosis")
    assert r.returncode == 1, r.stdout + r.stderr
    headline = r.stdout.strip().splitlines()[-1]
    assert "exited early (exit code 3)" in headline and "Traceback: index out of range in verify" in headline
    assert "BrokenPipe" not in r.stdout


# --- the terminal at 80 and 160 columns ---------------------------------------------------------


@pytest.fixture(scope="module")
def failed_verdict():
    from specverify.audit import SamplerAdapter
    from specverify.catalogue import BUGS

    bug = next(b for b in BUGS if b.name == "replacement_from_p")
    return audit(SamplerAdapter(bug()), eps=0.1, diagnose=False)


@pytest.mark.parametrize("width", [80, 160])
def test_terminal_output_reads_at_80_and_160_columns(failed_verdict, width):
    from rich.console import Console

    from specverify.audit.front.cli import print_verdict

    con = Console(width=width, record=True, color_system=None)
    print_verdict(failed_verdict, con)
    lines = con.export_text().splitlines()
    body = lines[:-1]  # the headline is one line that the terminal wraps
    assert max(map(len, body)) <= width
    assert lines[-1] == failed_verdict.headline()
    for c in failed_verdict.checks:  # every check's status and the start of its name are on one line
        assert any(str(c.status) in ln and c.name.split()[0] in ln for ln in body), (c.name, width)
    # at most a few lines per check: the summary column is never a dozen characters wide
    assert len(body) <= 2 + sum(2 + len(textwrap.wrap(c.summary, 60)) for c in failed_verdict.checks)
    if width == 80:
        assert not any(re.search(r"detects TV >= ", ln) for ln in body if ln.startswith("FAIL "))


# --- pytest -----------------------------------------------------------------------------------

INNER_TESTS = """
from specverify.catalogue import BUGS, ChainSampler
from specverify.pytest_plugin import assert_lossless


def test_buggy_sampler():
    assert_lossless(next(b for b in BUGS if b.name == "replacement_from_p")(), eps=0.1)


def test_too_few_rounds():
    assert_lossless(ChainSampler(), rounds=50, exact_checks=False)
"""


def test_pytest_failure_leads_with_the_diagnosis_and_hides_the_helper(tmp_path):
    import subprocess

    (tmp_path / "test_user.py").write_text(INNER_TESTS)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_user.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    out = r.stdout
    assert r.returncode == 1 and "2 failed" in out, out
    assert "def assert_lossless" not in out and "__tracebackhide__" not in out  # the helper's source is hidden
    buggy = out[out.index("test_buggy_sampler ____") : out.index("test_too_few_rounds ____")]
    first = next(ln for ln in buggy.splitlines() if ln.startswith("E "))
    assert re.match(r"E\s+AssertionError: Diagnosis: most likely replacement_from_p", first), buggy  # root cause first
    assert buggy.index("Diagnosis: ") < buggy.index("FAIL in ")
    short = out[out.index("test_too_few_rounds ____") :]
    assert "INCONCLUSIVE: " in short and "rounds=" in short and "budget_s" in short
    assert "--rounds" not in short and "--budget" not in short


def test_an_lm_audit_advises_in_its_own_keywords_from_python():
    import torch
    from golden_cases import _models

    from specverify.audit.sources.lm_audit import audit_lm
    from specverify.runners import speculative_generate

    t, d = _models()

    def generate(prompt, n, seed, settings):
        return list(
            speculative_generate(t, d, prompt, n, settings, torch.Generator().manual_seed(seed), gamma=3).tokens
        )

    v = audit_lm(generate, t, prompts=[[1, 2, 3]], settings=(SamplingSettings(),), max_sequences=8, greedy_check=False)
    assert v.status == "INCONCLUSIVE"
    assert "raise budget_s or max_sequences" in v.headline(terms="python") and "--" not in v.headline(terms="python")
    assert "raise --budget or --rounds" in v.headline()


def test_a_settings_step_that_samples_at_temperature_0_is_told_how_to_decline():
    # met as a newcomer: a step takes `settings` only to refuse min-p and samples at temperature 0
    def step(prefix, draft, target, gamma, rng, settings):
        if settings.min_p:
            raise NotImplementedError("no min-p")
        xs, qs = [], []
        for _ in range(gamma):
            q = np.asarray(draft(list(prefix) + xs))
            xs.append(int(rng.choice(len(q), p=q)))
            qs.append(q)
        P = np.asarray(target(list(prefix), xs))
        for j, x in enumerate(xs):
            if rng.random() >= min(1.0, P[j][x] / qs[j][x]):
                r = np.maximum(P[j] - qs[j], 0)
                return xs[:j] + [int(rng.choice(len(r), p=r / r.sum() if r.sum() > 0 else P[j]))]
        return xs + [int(rng.choice(P.shape[1], p=P[gamma]))]

    v = audit(RoundAdapter(step, name="sampler"), settings=(SamplingSettings(),), rounds=200, diagnose=False)
    (greedy,) = [c for c in v.checks if c.name.startswith("greedy equivalence (raw rows")]
    assert greedy.status == FAIL
    assert "asked for temperature 0" in greedy.summary and "raise NotImplementedError" in greedy.summary
