"""The auditor audits itself (issue 19, item 5): hypothesis generates misbehaving implementations of
every shape and asserts the auditor's invariants.

A generated implementation is a correct one (a round step, a kernel or a generator; on probabilities,
with a ``settings`` parameter, or on logits) wrapped in one misbehaviour, from a chosen call on, at
chosen settings (``tests/self_audit_impls.py``). The behaviour families:

 1 return_type  floats (a list, an array, one float among ints, a torch float32 tensor), strings (a list, one
                string), booleans (a list, an array), nested lists, None, a dict, a bare int, an object array;
                a torch bfloat16 tensor and an object whose repr raises (known defects)
 2 shape        too many / no tokens, a 2-D round; kernels with a row or a column missing or extra, flat or
                3-D, ragged rows, a round with no token, -1 inside the emitted prefix, an "accepted" non-draft
 3 range        ids equal to the vocabulary size, above it, 2**40, negative; 2**64 and, for kernels, ids
                below -1 (known defects)
 4 raises       ValueError, RuntimeError, KeyError, TypeError, ZeroDivisionError, AssertionError, IndexError,
                the implementation's own Exception, SystemExit, one whose __str__ raises (a known defect);
                from call k on, at every or some settings
 5 unsupported  NotImplementedError at chosen settings (greedy, temperature, top-k, top-p, min-p, penalties,
                everything), or from call k on
 6 signature    *args, *args with **kwargs, **kwargs, an optional extra parameter, a keyword-only extra,
                positional-only, renamed, other annotations, a callable object with __call__(self, *args), a
                bound method, functools.partial; steps that take the settings by name (plain, default,
                keyword-only, positional-only, annotated otherwise) or by annotation (SamplingSettings,
                Optional[...], a string), beside *args or **kwargs, or as a callable object
 7 timing       slow calls (milliseconds, far under the call timeout); one hang past a 0.5 s call timeout
 8 printing     to stdout, to stderr, both, raw writes to file descriptors 1 and 2
 9 state        a correct cache (keyed on the whole prefix); a stale one (keyed on the prefix's length)
10 seeds        randomness from the global numpy RNG, from one Generator shared by every call, from a
                Generator seeded with a constant at every call
11 inputs       writing into the rows handed over (read-only); mutating the prefix list after the round;
                a kernel overwriting draft_tokens (a known defect)
12 legit        tuple, list, int32 / uint16 arrays, torch long / int32 tensors, numpy scalars, read-only and
                strided arrays, a generator's extra tokens (cut); a kernel's list of torch rows (a known defect)

The invariants, one hypothesis test each (the families each covers):

 I1 never PASS on malformed output: FAIL, a FAIL row names what came back, and rows at settings where
    the output was well formed do not FAIL (1, 2, 3)
 I2 a raise, a hang, a write into a read-only row is a FAIL that names it (the exception and its
    message, the timeout, "read-only"), at the settings where it happened (4, 7 hang, 11 write)
 I3 never FAIL because of an unsupported setting: the declined settings' rows (greedy included) are
    UNSUPPORTED in the implementation's words, the other rows are the correct implementation's; an
    audit whose every setting is declined is UNSUPPORTED (5)
 I4 neutral wrappers are invisible: the verdict is the correct implementation's, row for row
    (status, samples, p-value) (6, 7 slow, 8, 9 correct cache, 11 prefix, 12)
 I5 randomness or state from outside the arguments FAILs seeded reproducibility (9 stale, 10 shared)
 I6 never an internal error: audit() returns a verdict or raises a usage error (every family)
 I7 through specverify.cli.main never exit 4, nor 2 for a valid implementation; output that is
    malformed, raises or hangs exits 1 (every family; and a correct implementation under valid
    but extreme options)
 I8 the same verdict (status, and each check's status and samples) with workers=1 and workers=2,
    and with the budget halved, at fixed rounds (every family whose output is a function of the call's
    arguments: not from call k on, not the hang, the stale cache or shared randomness)
 I9 every usage error is one line on stderr starting "specverify: error:", exit code 2, nothing
    on stdout (non-numbers, out-of-range values, unknown flags, options outside their mode, bad MOD:FN)

Each invariant is checked by a function that returns the violations it finds; the ``test_evidence_*``
tests show each one finding them on a deliberately broken auditor (monkeypatched) or verdict.

Statistics: everything is seeded (derandomize=True, no example database, audit seed 0), so every
run tests the same examples with the same samples. The one statistical claim made of correct
implementations is that they do not FAIL, and the audit's own family-wise alpha (1e-6) bounds the
probability of a false FAIL at 1e-6 per audit: one here would mean the auditor's rate is wrong.
Sizes, for 3 minutes on 2 cores: 2-8 sequences of 8 tokens (round steps, generators) or 16-64 rounds
(kernels) per unit, vocabulary 16-32, gamma 2-4, one or two settings, exact checks where needed.

Known defects of the auditor (``KNOWN_DEFECTS``): the strategies leave them out and a strict xfail pins
each with its minimal example; once fixed it XPASSes, which fails: then move its entry to
``FIXED_DEFECTS``, whose minimal examples stay as regression tests (and are generated again). The
first run of this suite found 16 such cases (10 defects); all are fixed.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import string
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import self_audit_impls as si  # noqa: E402

from specverify import cli  # noqa: E402
from specverify.audit import RoundAdapter, audit  # noqa: E402
from specverify.dists import GREEDY, SamplingSettings  # noqa: E402
from specverify.errors import ImplementationError, SpecVerifyError  # noqa: E402
from specverify.stats import FAIL, INCONCLUSIVE, PASS, SKIPPED, UNSUPPORTED  # noqa: E402

BASE = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
BUDGET_S = 300.0  # generous: no audit here comes near it, so halving it changes nothing
STATUSES = {PASS, FAIL, INCONCLUSIVE, UNSUPPORTED, SKIPPED}
SPEC = "self_audit_impls:CURRENT"

#: misbehaviours the auditor gets wrong today (shape, family, kind), shape '*' for every shape: the
#: strategies leave them out; test_known_defect pins each (minimal example and what is expected)
KNOWN_DEFECTS: dict[tuple[str, str, str], str] = {}

#: defects this suite found and that were fixed: what happened then; their minimal examples are regression tests
FIXED_DEFECTS = {
    ("kernel", "range", "huge"): "a kernel returning the id 2**64 + 1 crashes audit() with OverflowError "
    "(exit 4); expected a malformed-output FAIL naming the id",
    ("round", "range", "huge"): "a round step returning the id 2**64 + 1 FAILs as 'step raised OverflowError: "
    "Python int too large to convert to C long': the id is not named and the step did not raise",
    ("generator", "range", "huge"): "as for round steps: 'generate raised OverflowError', the id not named",
    ("kernel", "range", "negative"): "a kernel id below -1 is read as padding: -2 as the last token of a round "
    "of two or more is not reported at all (the round is read one token shorter; no FAIL); as a round's only "
    "token it is 'emitted no token in round r', the id not named. Expected: ids in [0, V), -1 as padding",
    ("kernel", "inputs", "write_draft_tokens"): "a correct kernel that overwrites draft_tokens after computing "
    "its output FAILs: 'round 1 emitted [...] but the drafts were [0, 0, 0]' (the kernel's overwrite, not the "
    "drafts); expected draft_tokens read-only like the rows (a 'read-only' finding) or a copy (no effect)",
    ("*", "raises", "BrokenStr"): "an exception whose __str__ raises escapes audit() as that RuntimeError "
    "(exit 4); expected a FAIL naming the exception type",
    ("kernel", "return_type", "bfloat16_tensor"): "a kernel returning a torch.bfloat16 tensor crashes audit() "
    "with TypeError 'Got unsupported ScalarType BFloat16' (exit 4); expected a FAIL naming the dtype",
    ("round", "return_type", "bfloat16_tensor"): "a bfloat16 tensor from a round step FAILs as 'step raised "
    "TypeError: Got unsupported ScalarType BFloat16': the step did not raise, the dtype is not named as such",
    ("generator", "return_type", "bfloat16_tensor"): "as for round steps ('generate raised TypeError')",
    ("kernel", "return_type", "unprintable"): "a kernel returning an object whose repr raises crashes audit() "
    "with that RuntimeError (exit 4); expected a FAIL naming the type",
    ("round", "return_type", "unprintable"): "an object whose repr raises FAILs as 'step raised RuntimeError': "
    "the step returned, it did not raise, and the type is not named",
    ("generator", "return_type", "unprintable"): "as for round steps ('generate raised RuntimeError')",
    ("kernel", "legit", "torch_rows"): "a kernel returning a list of torch rows (docs: 'a numpy array, list or "
    "torch tensor') FAILs: 'returned a row that is a Tensor'; _from_sequence converts tensor rows but rejects "
    "them first",
}


def known_defect(shape: str, family: str, kind: str) -> bool:
    return (shape, family, kind) in KNOWN_DEFECTS or ("*", family, kind) in KNOWN_DEFECTS


# ----------------------------------------------------------------------------- what is generated

#: settings every shape samples (none is skipped by the plan), and the rest of the menu
SAMPLED = (
    SamplingSettings(),
    SamplingSettings(temperature=0.7),
    SamplingSettings(top_k=3),
    SamplingSettings(top_p=0.8),
    SamplingSettings(min_p=0.1),
)
MENU = (*SAMPLED, SamplingSettings(repetition_penalty=1.3), SamplingSettings(temperature=0.0))


BOOLS, STARTS = st.booleans(), st.integers(1, 3)


@dataclasses.dataclass(frozen=True)
class Config:
    """One audit's size and settings (round steps and generators: sequences; kernels: 8x as many rounds)."""

    vocab: int
    gamma: int
    rounds: int
    settings: tuple[SamplingSettings, ...]
    exact_checks: bool = False

    def kwargs(self, shape: str, **over) -> dict:
        kw = dict(
            rounds=self.rounds * (8 if shape == "kernel" else 1),
            vocab=self.vocab,
            gamma=self.gamma,
            settings=self.settings,
            exact_checks=self.exact_checks,
            diagnose=False,
            budget_s=BUDGET_S,
            seed=0,
        )
        return {**kw, **over}


@st.composite
def configs(draw, exact=BOOLS) -> Config:
    first = draw(st.sampled_from(SAMPLED))
    more = draw(st.lists(st.sampled_from([s for s in MENU if s != first]), max_size=1))
    return Config(
        vocab=draw(st.sampled_from([16, 24, 32])),
        gamma=draw(st.integers(2, 4)),
        rounds=draw(st.integers(2, 8)),
        settings=(first, *more),
        exact_checks=draw(exact),
    )


#: families that may misbehave at some settings only
WHEN_FAMILIES = ("return_type", "shape", "range", "raises", "unsupported")


def _when(draw, m_sees_settings: bool, cfg: Config) -> str:
    """A settings predicate that some audited setting (or the greedy check) meets; 'always' for
    implementations that see no settings."""
    if not m_sees_settings:
        return "always"
    met = [w for w, f in si.WHEN.items() if any(f(s) for s in (*cfg.settings, GREEDY))]
    return draw(st.sampled_from(met))


SHAPES = ("round", "kernel", "generator")


def rotated(family: str) -> tuple[str, ...]:
    """The shapes, starting at a different one per family: a family's simplest example differs in shape."""
    i = si.FAMILIES.index(family) % len(SHAPES)
    return SHAPES[i:] + SHAPES[:i]


@st.composite
def cases(draw, families, *, shapes=SHAPES, skip=(), exact=BOOLS, start=STARTS, deterministic=False):
    """(Misbehaviour, Config): a family of ``families``, a shape and mode it applies to, one of its kinds
    (not in ``skip``, not a known defect), from which call and at which settings it misbehaves.
    ``deterministic``: only misbehaviours whose output is a function of the call's arguments."""

    def kinds(f, shape, mode):
        out = [k for k in si.kinds(f, shape, mode) if k not in skip and not known_defect(shape, f, k)]
        return [k for k in out if k not in si.STATEFUL] if deterministic else out

    def modes(f, shape):
        return [mode for mode in si.MODES[shape] if kinds(f, shape, mode)]

    family = draw(st.sampled_from(families))
    shape = draw(st.sampled_from([sh for sh in shapes if modes(family, sh)]))
    mode = draw(st.sampled_from(modes(family, shape)))
    cfg = draw(configs(exact))
    m = si.Misbehaviour(shape, mode, family, draw(st.sampled_from(kinds(family, shape, mode))))
    when = _when(draw, m.sees_settings, cfg) if family in WHEN_FAMILIES else "always"
    first = 1 if deterministic else draw(start)
    m = dataclasses.replace(m, when=when, start=first, arg=draw(st.integers(1, 9)))
    note(f"{m} {cfg}")
    event(f"{shape} ({mode}) {family}/{m.kind}")
    return m, cfg


# ----------------------------------------------------------------------------- running audits


def run_audit(m: si.Misbehaviour, cfg: Config, fn=None, **over):
    """(verdict or None, the exception audit() raised or None, the callable audited)."""
    fn = m.build() if fn is None else fn
    try:
        return audit(m.adapter(fn), **cfg.kwargs(m.shape, **over)), None, fn
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - I6 reports whatever escapes
        return None, exc, fn


@functools.cache
def bare_verdict(shape: str, mode: str, cfg: Config):
    """The correct implementation's verdict under ``cfg`` (what neutral wrappers must reproduce)."""
    v, exc, _ = run_audit(si.Misbehaviour(shape, mode), cfg)
    assert exc is None, f"the correct {shape} ({mode}) raised {exc!r}"
    return v


def row_settings(c, cfg: Config) -> SamplingSettings | None:
    """The setting a check ran at: a unit's, the greedy check's; None when not known from its name."""
    m = re.match(r"settings\[(\d+)\]", c.name)
    if m:
        return cfg.settings[int(m[1])]
    return GREEDY if c.name.startswith("greedy equivalence") else None


def says(summary: str, word: str) -> bool:
    """Whether ``summary`` holds ``word`` (a number: as a whole number, not inside another)."""
    if re.fullmatch(r"-?\d+", word):
        return re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w.])", summary) is not None
    return word in summary


def cli_argv(m: si.Misbehaviour, cfg: Config, *extra: str) -> list[str]:
    temps = sorted({s.temperature for s in cfg.settings})
    argv = ["audit", *m.cli_args(SPEC), "--rounds", str(cfg.rounds), "--vocab", str(cfg.vocab)]
    argv += ["--gamma", str(cfg.gamma), "--seed", "0", "--no-diagnosis", "--no-progress", "--budget", "120"]
    for t in temps:
        argv += ["--temperature", repr(t)]
    return argv + list(extra)


def run_cli(argv: list[str], capfd) -> tuple[int, str, str]:
    """specverify.cli.main in this process: (exit code, stdout, stderr)."""
    capfd.readouterr()
    try:
        rc = cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capfd.readouterr()
    return rc, out, err


# ----------------------------------------------------------------------------- the invariants' checks


def named_fail_violations(m: si.Misbehaviour, cfg: Config, v, core) -> list[str]:
    """I1, I2: a misbehaviour that happened is a FAIL whose row names it; rows at settings where the
    implementation behaved do not FAIL."""
    if v is None:
        return ["audit() returned no verdict"]
    out = []
    fails = [c for c in v.checks if c.status == FAIL]
    if core.fired and v.status != FAIL:
        out.append(f"verdict {v.status} although the implementation misbehaved in {core.fired} call(s)")
    if core.fired and not any(all(says(c.summary, w) for w in core.words) for c in fails):
        out.append(f"no FAIL row names {core.words}: {[c.summary for c in fails]}")
    for c in fails:
        s = row_settings(c, cfg)
        if s is not None and m.sees_settings and not si.WHEN[m.when](s):
            out.append(f"{c.name!r} FAILs at {s.short()}, where the implementation behaved: {c.summary}")
    return out


def _unsupported_row(c, declined: bool, m: si.Misbehaviour, bare_row) -> str | None:
    """One row of I3: what it must be, given whether its setting was declined."""
    if not declined:
        if c.status == UNSUPPORTED:
            return f"{c.name!r} is UNSUPPORTED at a setting the implementation takes: {c.summary}"
        if m.start == 1 and bare_row is not None and rows_of([c]) != rows_of([bare_row]):
            return f"{c.name!r} differs from the correct implementation's row: {c.status}, {c.summary}"
        return None
    if m.start == 1 and (c.status != UNSUPPORTED or m.message not in c.summary):
        return f"{c.name!r}, at a declined setting, is {c.status}, not UNSUPPORTED in its words: {c.summary}"
    return None


def unsupported_violations(m: si.Misbehaviour, cfg: Config, v, bare, core) -> list[str]:
    """I3: declined settings are UNSUPPORTED rows in the implementation's words, never FAIL; the other
    rows are the correct implementation's; every setting declined: the verdict is UNSUPPORTED.
    (Declining from call k on: no FAIL, and what was declined is UNSUPPORTED.)"""
    if v is None:
        return ["audit() returned no verdict"]
    declined = si.WHEN[m.when] if m.sees_settings else (lambda s: True)
    tested = [c for c in v.checks if c.status != SKIPPED]
    out = [f"{c.name!r} FAILs: {c.summary}" for c in tested if c.status == FAIL]
    if core.fired and not any(c.status == UNSUPPORTED for c in tested):
        out.append(f"the implementation declined {core.fired} call(s) but no row is UNSUPPORTED")
    bare_rows = {c.name: c for c in bare.checks}
    at = [(c, row_settings(c, cfg)) for c in tested]
    out += [e for c, s in at if s is not None and (e := _unsupported_row(c, declined(s), m, bare_rows.get(c.name)))]
    if m.start == 1 and at and all(s is not None and declined(s) for _, s in at) and v.status != UNSUPPORTED:
        out.append(f"every setting audited was declined, but the verdict is {v.status}")
    return out


def rows_of(checks) -> list[str]:
    return [repr((c.name, str(c.status), c.n, c.pvalue)) for c in checks]


def transparency_violations(v, bare) -> list[str]:
    """I4: the verdict of a neutral wrapper is the correct implementation's, row for row."""
    if v is None:
        return ["audit() returned no verdict"]
    out = [] if v.status == bare.status else [f"verdict {v.status}, the correct implementation's {bare.status}"]
    mine, theirs = rows_of(v.checks), rows_of(bare.checks)
    if mine != theirs:
        diff = [(a, b) for a, b in zip(mine, theirs) if a != b] or [(mine, theirs)]
        out.append(f"rows differ from the correct implementation's (mine, theirs): {diff[0]}")
    if v.samples != bare.samples:
        out.append(f"{v.samples} samples, the correct implementation {bare.samples}")
    return out


def hidden_state_violations(v) -> list[str]:
    """I5: output that depends on state or randomness outside the call's arguments FAILs seeded
    reproducibility (the same seed twice gives different outputs)."""
    if v is None:
        return ["audit() returned no verdict"]
    rep = [c for c in v.checks if c.name == "seeded reproducibility"]
    out = [] if v.status == FAIL else [f"verdict {v.status}"]
    if not rep or rep[0].status != FAIL:
        out.append(f"seeded reproducibility: {[(c.status, c.summary) for c in rep] or 'no such row'}")
    return out


def internal_error_violations(v, exc) -> list[str]:
    """I6: audit() returns a verdict made of known statuses, or raises a usage error (a SpecVerifyError
    that is not a finding about the implementation)."""
    if exc is not None:
        if isinstance(exc, SpecVerifyError) and not isinstance(exc, ImplementationError):
            return []
        return [f"audit() raised {type(exc).__name__}: {exc}"]
    bad = [(c.name, c.status) for c in v.checks if c.status not in STATUSES]
    out = [f"rows with unknown statuses: {bad}"] if bad else []
    return out + ([] if v.status in STATUSES - {SKIPPED} else [f"verdict status {v.status!r}"])


#: families whose misbehaviour, once it happened, must make the CLI exit 1
FINDINGS = {"return_type", "shape", "range", "raises"}


def cli_violations(m: si.Misbehaviour, rc: int, out: str, err: str, core) -> list[str]:
    """I7: never exit 4 (an internal error), nor 2 (a usage error) for a valid implementation; a verdict
    is printed; malformed output and raises exit 1."""
    if rc == 4:
        return [f"exit 4 (internal error): {err[-2000:]}"]
    if rc == 2:
        return [f"exit 2 (usage error) for a valid implementation: {err.strip()}"]
    problems = [] if rc in (0, 1, 3, 5) else [f"exit code {rc}"]
    if "specverify audit:" not in out:
        problems.append(f"no verdict on stdout: {out[-500:]!r}")
    fired = core is not None and core.fired
    if fired and (m.family in FINDINGS or m.kind in ("hang", "write_rows")) and rc != 1:
        problems.append(f"exit {rc} although the implementation misbehaved ({m.family}/{m.kind})")
    return problems


def consistency_violations(a, b, what: str) -> list[str]:
    """I8: the same verdict: status, and each check's name, status and samples."""
    if a is None or b is None:
        return [f"{what}: audit() returned no verdict ({a!r}, {b!r})"]
    out = [] if a.status == b.status else [f"{what}: verdict {a.status} against {b.status}"]
    ra = [(c.name, str(c.status), c.n) for c in a.checks]
    rb = [(c.name, str(c.status), c.n) for c in b.checks]
    if ra != rb:
        out.append(f"{what}: checks differ: {[(x, y) for x, y in zip(ra, rb) if x != y] or (ra, rb)}")
    return out


def usage_violations(rc: int, out: str, err: str) -> list[str]:
    """I9: exit 2, one line on stderr starting 'specverify: error:', nothing on stdout."""
    problems = [] if rc == 2 else [f"exit code {rc}, not 2"]
    lines = err.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith("specverify: error: "):
        problems.append(f"stderr is not one 'specverify: error:' line: {err[-1000:]!r}")
    if out:
        problems.append(f"stdout is not empty: {out[-500:]!r}")
    return problems


# ----------------------------------------------------------------------------- I1 - I8: generated implementations


def draw_case(data, family: str, **kw):
    return data.draw(cases([family], shapes=rotated(family), **kw), label="case")


@pytest.mark.parametrize("family", ["return_type", "shape", "range"])
@settings(BASE, max_examples=14)
@given(data=st.data())
def test_malformed_output_is_a_named_fail(family, data):
    """I1 (families 1-3): never PASS on malformed output."""
    m, cfg = draw_case(data, family, exact=st.just(False))
    v, exc, fn = run_audit(m, cfg)
    problems = internal_error_violations(v, exc) or named_fail_violations(m, cfg, v, si.core_of(fn))
    assert not problems, problems


@pytest.mark.parametrize("family", ["raises", "timing", "inputs"])
@settings(BASE, max_examples=8)
@given(data=st.data())
def test_raising_hanging_or_writing_is_a_named_fail(family, data):
    """I2 (families 4, 7, 11): the finding names what the implementation did, where it did it."""
    m, cfg = draw_case(data, family, skip={"slow", "mutate_prefix", "write_draft_tokens"})
    v, exc, fn = run_audit(m, cfg)
    problems = internal_error_violations(v, exc) or named_fail_violations(m, cfg, v, si.core_of(fn))
    assert not problems, problems


@pytest.mark.parametrize("shape", SHAPES)
@settings(BASE, max_examples=8)
@given(data=st.data())
def test_unsupported_settings_never_fail(shape, data):
    """I3 (family 5): never FAIL because of an unsupported setting."""
    strategy = cases(["unsupported"], shapes=(shape,), exact=st.just(True), start=st.sampled_from([1, 1, 2, 3]))
    m, cfg = data.draw(strategy, label="case")
    v, exc, fn = run_audit(m, cfg)
    bare = bare_verdict(m.shape, m.mode, cfg)
    problems = internal_error_violations(v, exc) or unsupported_violations(m, cfg, v, bare, si.core_of(fn))
    assert not problems, problems


@pytest.mark.parametrize("family", ["signature", "timing", "printing", "state", "inputs", "legit"])
@settings(BASE, max_examples=7)
@given(data=st.data())
def test_neutral_wrappers_are_invisible(capfd, family, data):
    """I4 (families 6, 7, 8, 9, 11, 12): signatures, slowness, printing, a correct cache, a mutated prefix
    and other containers of the same ids change nothing."""
    m, cfg = draw_case(data, family, skip={"hang", "stale_rows", "write_rows", "write_draft_tokens"})
    capfd.readouterr()
    v, exc, fn = run_audit(m, cfg)
    out, err = capfd.readouterr()
    problems = internal_error_violations(v, exc) or transparency_violations(v, bare_verdict(m.shape, m.mode, cfg))
    if m.family == "printing" and si.core_of(fn).fired and "debug: call" not in out + err:
        problems.append("the printing wrapper printed nothing (the test is broken)")
    assert not problems, problems


@pytest.mark.parametrize("family", ["state", "seeds"])
@settings(BASE, max_examples=6)
@given(data=st.data())
def test_hidden_state_fails_reproducibility(family, data):
    """I5 (families 9, 10): a stale cache or randomness not drawn from the rng handed over FAILs."""
    m, cfg = draw_case(data, family, skip={"cache_correct", "fixed_per_call"}, exact=st.just(True))
    v, exc, _ = run_audit(m, cfg)
    problems = internal_error_violations(v, exc) or hidden_state_violations(v)
    assert not problems, problems


@pytest.mark.parametrize("family", si.FAMILIES)
@settings(BASE, max_examples=4)
@given(data=st.data())
def test_audit_never_raises(family, data):
    """I6 (every family): never an internal error."""
    m, cfg = draw_case(data, family)
    v, exc, _ = run_audit(m, cfg)
    problems = internal_error_violations(v, exc)
    assert not problems, problems


@pytest.mark.parametrize("family", si.FAMILIES)
@settings(BASE, max_examples=2)
@given(data=st.data())
def test_cli_never_exits_4(capfd, family, data):
    """I7 (every family): through specverify.cli.main, exit 0, 1, 3 or 5, and 1 for a finding."""
    m, cfg = draw_case(data, family, exact=st.just(True))
    fn = si.CURRENT = m.build()
    rc, out, err = run_cli(cli_argv(m, cfg), capfd)
    problems = cli_violations(m, rc, out, err, si.core_of(fn))
    assert not problems, problems


@st.composite
def extreme_options(draw) -> list[str]:
    """Valid option values at their edges (never a usage error)."""
    picks = {
        "--vocab": st.integers(2, 40).map(str),
        "--gamma": st.integers(1, 6).map(str),
        "--rounds": st.integers(1, 4).map(str),
        "--seed": st.sampled_from([0, 1, 2**31, 2**64, 2**70]).map(str),
        "--alpha": st.sampled_from(["1e-300", "1e-12", "1e-3"]),
        "--beta": st.sampled_from(["1e-9", "0.5", "0.999"]),
        "--eps": st.sampled_from(["1e-3", "0.5", "0.999"]),
        "--budget": st.sampled_from(["0.001", "0.5", "100"]),
        "--top-k": st.integers(0, 50).map(str),
        "--top-p": st.sampled_from(["1e-9", "0.5", "1"]),
        "--min-p": st.sampled_from(["0", "0.5", "1"]),
        "--call-timeout": st.sampled_from(["5", "1e9", "inf"]),
        "--greedy-ties": st.sampled_from(["lowest-id", "any"]),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(picks)), min_size=1, max_size=4, unique=True))
    argv = [x for opt in chosen for x in (f"{opt}={draw(picks[opt])}",)]
    temps = draw(st.lists(st.sampled_from(["0", "1e-9", "0.5", "1", "3", "1e6"]), max_size=2))
    return argv + [f"--temperature={t}" for t in temps]


@settings(BASE, max_examples=6)
@given(st.sampled_from([(s, mode) for s, modes in si.MODES.items() for mode in modes]), extreme_options())
def test_cli_never_exits_4_on_valid_options(capfd, shape_mode, options):
    """I7: a correct implementation under valid option values at their edges: a verdict, never exit 2 or 4."""
    m = si.Misbehaviour(*shape_mode)
    si.CURRENT = m.build()
    argv = ["audit", *m.cli_args(SPEC), "--rounds", "2", "--no-diagnosis", "--no-progress", *options]
    rc, out, err = run_cli(argv, capfd)
    problems = cli_violations(m, rc, out, err, None)
    assert not problems, (argv, problems)


@pytest.mark.parametrize("family", si.FAMILIES)
@settings(BASE, max_examples=2)
@given(data=st.data())
def test_workers_and_budget_do_not_change_the_verdict(family, data):
    """I8 (every family, where the output is a function of the call's arguments)."""
    m, cfg = draw_case(data, family, exact=st.just(False), deterministic=True)
    serial = run_audit(m, cfg)[0]
    parallel = run_audit(m, cfg, workers=2)[0]
    halved = run_audit(m, cfg, budget_s=BUDGET_S / 2)[0]
    problems = consistency_violations(serial, parallel, "workers=2") + consistency_violations(
        serial, halved, "budget halved"
    )
    assert not problems, problems


# ----------------------------------------------------------------------------- I9: usage errors


def _audit_options() -> set[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # the subcommands
    return set(sub.choices["audit"]._option_string_actions)


AUDIT_OPTIONS = _audit_options()
VALID = ["audit", "--round", "self_audit_impls:step_correct", "--rounds", "2", "--vocab", "16", "--gamma", "2"]
VALID += ["--no-diagnosis", "--no-progress"]
INT_OPTIONS = ("--rounds", "--workers", "--seed", "--gamma", "--vocab", "--top-k", "--length")
FLOAT_OPTIONS = ("--alpha", "--beta", "--eps", "--budget", "--top-p", "--min-p", "--call-timeout", "--temperature")


def _parses(text: str, kind) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


NOT_NUMBERS = st.sampled_from(["abc", "", " ", "\t", "1.5.2", "1,5", "5%", "0x1g", "1e", "one", "1 2", "1\n2", "--"])
NOT_NUMBERS |= st.text(string.ascii_letters, min_size=1, max_size=6).filter(lambda t: not _parses(t, float))
NOT_INTS = NOT_NUMBERS | st.sampled_from(["1.5", "1e3", "2.0", "nan", "inf"])
_below_0 = st.floats(max_value=-1e-9, allow_nan=False)
_nonpositive = st.floats(max_value=0, allow_nan=False) | st.just(float("nan"))
_rates = _nonpositive | st.floats(min_value=1) | st.just(float("nan"))
#: values outside each option's range (--length: any, as it applies to --endpoint only)
OUT_OF_RANGE = {
    "--alpha": _rates,
    "--beta": _rates,
    "--eps": _rates,
    "--gamma": st.integers(max_value=0),
    "--rounds": st.integers(max_value=0),
    "--workers": st.integers(max_value=0),
    "--vocab": st.integers(max_value=1),
    "--seed": st.integers(max_value=-1),
    "--top-k": st.integers(max_value=-1),
    "--length": st.integers(-5, 64),
    "--budget": _nonpositive | st.just(float("inf")),
    "--call-timeout": _nonpositive,
    "--top-p": _nonpositive | st.floats(min_value=1, exclude_min=True),
    "--min-p": _below_0 | st.floats(min_value=1, exclude_min=True) | st.just(float("nan")),
    "--temperature": _below_0 | st.sampled_from([float("inf"), float("nan")]),
    "--logit-tol": st.floats(min_value=1e-9) | _below_0 | st.just(float("nan")),
}
#: options used outside their mode (the base is a round step), and other combinations that are refused
OUTSIDE_MODE = [
    ["--length", "8"],
    ["--model", "builtin"],
    ["--baseline-endpoint", "http://127.0.0.1:9"],
    ["--logit-tol", "0.1"],
    ["--temperature-last"],
    ["--one-hot"],
    ["--greedy", "--logits"],
    ["--logits"],
    ["--resume"],
    ["--kernel", "self_audit_impls:kernel_correct"],
    ["reference"],
    ["--context", "bogus"],
    ["--greedy-ties", "some"],
]
BAD_SPECS = [
    *("", "   ", "nocolon", "self_audit_impls:", ":step_correct", "no_such_module_zz:f", "self_audit_impls:nope"),
    *("tests/no_such_file.py:f", "self_audit_impls:NOT_CALLABLE", "self_audit_impls:wrong_arity", "a\nb:c"),
]


def _unknown_flag(name: str) -> bool:
    return not any(o.startswith(name) for o in AUDIT_OPTIONS) and name not in ("-", "--")


@st.composite
def bad_argvs(draw) -> list[str]:
    """A valid command with one thing made wrong."""
    what = draw(st.sampled_from(["not_a_number", "out_of_range", "unknown_flag", "outside_mode", "bad_spec"]))
    if what == "not_a_number":
        opt = draw(st.sampled_from(INT_OPTIONS + FLOAT_OPTIONS))
        return [*VALID, opt, draw(NOT_INTS if opt in INT_OPTIONS else NOT_NUMBERS)]
    if what == "out_of_range":
        opt = draw(st.sampled_from(sorted(OUT_OF_RANGE)))
        return [*VALID, f"{opt}={draw(OUT_OF_RANGE[opt])!r}"]
    if what == "unknown_flag":
        name = draw(st.sampled_from(["--", "-"])) + draw(st.text(string.ascii_lowercase + "-_", min_size=1, max_size=9))
        assume(_unknown_flag(name))
        return [*VALID, name]
    if what == "outside_mode":
        return [*VALID, *draw(st.sampled_from(OUTSIDE_MODE))]
    shape = draw(st.sampled_from(["--round", "--kernel", "--generator"]))
    spec = draw(st.sampled_from(BAD_SPECS + [None]))
    return ["audit", shape] + ([] if spec is None else [spec]) + VALID[3:]


@settings(BASE, max_examples=80)
@given(bad_argvs())
def test_usage_errors_are_one_line(capfd, argv):
    """I9: every usage error is one line on stderr, exit 2, before anything is sampled."""
    rc, out, err = run_cli(argv, capfd)
    problems = usage_violations(rc, out, err)
    assert not problems, (argv, problems)


def test_declining_every_setting_exits_5(capfd):
    """I3 through the CLI: an implementation that declines everything is UNSUPPORTED, exit code 5."""
    m = si.Misbehaviour("round", "logits", "unsupported", "declines", when="everything")
    si.CURRENT = m.build()
    rc, out, err = run_cli(["audit", *m.cli_args(SPEC), "--rounds", "2", "--no-diagnosis", "--no-progress"], capfd)
    assert rc == 5, (rc, out[-2000:], err[-2000:])
    assert "UNSUPPORTED" in out and "NotImplementedError" in out


# ----------------------------------------------------------------------------- evidence: the checks can fail

SMALL = Config(vocab=16, gamma=3, rounds=3, settings=(SamplingSettings(), SamplingSettings(top_k=3)))


def _coerce_ids(out, what, *, ndim=1):
    """The auditor before issue 19: ids coerced with int() (floats, strings, booleans accepted)."""
    a = np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out, dtype=np.float64)
    return a.astype(np.int64).reshape((-1,) if ndim == 1 else (len(a), -1))


def test_evidence_malformed_output_check(monkeypatch):
    """I1's check catches an auditor that coerces float ids (and passes on today's)."""
    m = si.Misbehaviour("round", "probs", "return_type", "float_list")
    v, _, fn = run_audit(m, SMALL)
    assert not named_fail_violations(m, SMALL, v, si.core_of(fn))
    monkeypatch.setattr("specverify.harness._sequences.as_token_ids", _coerce_ids)
    v, _, fn = run_audit(m, SMALL)
    assert any("verdict INCONCLUSIVE" in p for p in named_fail_violations(m, SMALL, v, si.core_of(fn)))


def test_evidence_unsupported_check(monkeypatch):
    """I3's check catches an auditor that turns NotImplementedError into a FAIL."""
    from specverify.harness import _watchdog

    cfg = dataclasses.replace(SMALL, exact_checks=True)
    m = si.Misbehaviour("round", "logits", "unsupported", "declines", when="top_k")
    bare = bare_verdict("round", "logits", cfg)
    v, _, fn = run_audit(m, cfg)
    assert not unsupported_violations(m, cfg, v, bare, si.core_of(fn))
    finding = _watchdog._finding
    monkeypatch.setattr(_watchdog, "_finding", lambda exc, what: ImplementationError(str(finding(exc, what))))
    v, _, fn = run_audit(m, cfg)
    assert any("FAILs" in p for p in unsupported_violations(m, cfg, v, bare, si.core_of(fn)))


def test_evidence_signature_check(monkeypatch):
    """I4's check catches an auditor that hands the settings to any sixth parameter (before issue 19)."""
    import inspect

    from specverify.audit.sources import adapters

    m = si.Misbehaviour("round", "probs", "signature", "optional")
    bare = bare_verdict("round", "probs", SMALL)
    assert not transparency_violations(run_audit(m, SMALL)[0], bare)
    sixth = lambda fn: (list(inspect.signature(fn).parameters.values())[5:6] or [None])[0]  # noqa: E731
    monkeypatch.setattr(adapters, "settings_parameter", sixth)
    assert transparency_violations(run_audit(m, SMALL)[0], bare)


def test_evidence_internal_error_checks(monkeypatch, capfd):
    """I6's and I7's checks catch an auditor that crashes."""
    m = si.Misbehaviour("kernel", "probs")
    monkeypatch.setattr("specverify.audit.pipeline.run.conclude_unit", lambda *a, **k: 1 / 0)
    v, exc, _ = run_audit(m, SMALL)
    assert internal_error_violations(v, exc) == ["audit() raised ZeroDivisionError: division by zero"]
    si.CURRENT = m.build()
    rc, out, err = run_cli(cli_argv(m, SMALL), capfd)
    assert rc == 4 and cli_violations(m, rc, out, err, None)[0].startswith("exit 4")


def test_evidence_workers_check(monkeypatch):
    """I8's check catches an auditor whose batches depend on the process that samples them."""
    from specverify.audit.pipeline import collect

    m = si.Misbehaviour("round", "probs")
    assert not consistency_violations(run_audit(m, SMALL)[0], run_audit(m, SMALL, workers=2)[0], "workers=2")
    batch = collect._batch

    def by_process(unit_index, s, cfg, k, n):
        return batch(unit_index, s, dataclasses.replace(cfg, seed=cfg.seed + os.getpid()), k, n)

    monkeypatch.setattr(collect, "_batch", by_process)
    assert consistency_violations(run_audit(m, SMALL)[0], run_audit(m, SMALL, workers=2)[0], "workers=2")


def test_evidence_reproducibility_check(monkeypatch):
    """I5's check catches an auditor without the seeded-reproducibility check."""
    from specverify.audit.pipeline import exact_checks, run

    cfg = dataclasses.replace(SMALL, exact_checks=True)
    m = si.Misbehaviour("generator", "probs", "seeds", "global_numpy")
    assert not hidden_state_violations(run_audit(m, cfg)[0])
    kept = tuple(c for c in run.EXACT_CHECKS if c.fn is not exact_checks.reproducibility_check)
    monkeypatch.setattr(run, "EXACT_CHECKS", kept)
    assert hidden_state_violations(run_audit(m, cfg)[0])


def test_evidence_usage_check(monkeypatch, capfd):
    """I9's check catches an auditor that lets --gamma 0 through, and a message of two lines."""
    from specverify.audit.front import cli as audit_cli

    assert not usage_violations(*run_cli([*VALID, "--gamma=0"], capfd))
    monkeypatch.setattr(audit_cli, "_check_numbers", lambda args: None)
    assert usage_violations(*run_cli([*VALID, "--gamma=0"], capfd))
    assert usage_violations(2, "", "specverify: error: one\nand another line\n")


# ----------------------------------------------------------------------------- the auditor's known defects


def _defect_params() -> list:
    return [
        pytest.param(
            "round" if shape == "*" else shape,
            "probs",
            family,
            kind,
            id=f"{shape}-{family}-{kind}",
            marks=[pytest.mark.xfail(strict=True, reason=why)] if (shape, family, kind) in KNOWN_DEFECTS else [],
        )
        for (shape, family, kind), why in sorted({**FIXED_DEFECTS, **KNOWN_DEFECTS}.items())
    ]


def defect_problems(m: si.Misbehaviour, v, exc, fn) -> list[str]:
    """The invariant a known defect breaks: I6, then I4 for a legitimate container, I2 or I4 for a
    written input (refused by name, or harmless), I1 / I2 otherwise."""
    problems = internal_error_violations(v, exc)
    if problems:
        return problems
    bare = bare_verdict(m.shape, m.mode, SMALL)
    if m.family == "legit":
        return transparency_violations(v, bare)
    named = named_fail_violations(m, SMALL, v, si.core_of(fn))
    if m.family == "inputs":
        return named and transparency_violations(v, bare)
    return named


@pytest.mark.parametrize(("shape", "mode", "family", "kind"), _defect_params())
def test_known_defect(shape, mode, family, kind):
    """Each known or fixed defect on its minimal example (the dicts say what happened and what is expected)."""
    m = si.Misbehaviour(shape, mode, family, kind)
    v, exc, fn = run_audit(m, SMALL)
    problems = defect_problems(m, v, exc, fn)
    assert not problems, problems


def test_fixed_defect_system_exit_without_timeout():
    """Was: SystemExit raised by an implementation audited with call_timeout=None (the Python API; the CLI
    needs a timeout > 0) escaped audit() and ended the process."""
    m = si.Misbehaviour("round", "probs", "raises", "SystemExit")
    fn = m.build()
    try:
        v, exc = audit(RoundAdapter(fn, call_timeout=None, length=8), **SMALL.kwargs("round")), None
    except BaseException as e:  # noqa: BLE001 - what escapes is the defect
        v, exc = None, e
    problems = internal_error_violations(v, exc) or named_fail_violations(m, SMALL, v, si.core_of(fn))
    assert not problems, problems


def test_fixed_defect_greedy_skip_is_covered():
    """Was: a five-argument round step audited at temperature 0 only: the plan SKIPped the setting as 'covered
    by the exact greedy check', but a step without settings gets no greedy check, so nothing was tested. Now a
    usage error that says how to audit it; beside a sampled setting the SKIPPED row says no greedy check runs."""
    cfg = dataclasses.replace(SMALL, settings=(SamplingSettings(temperature=0.0),), exact_checks=True)
    v, exc, _ = run_audit(si.Misbehaviour("round", "probs"), cfg)
    assert v is None and isinstance(exc, SpecVerifyError), (v, exc)
    assert "cannot be told to decode greedily" in str(exc) and "--greedy" in str(exc)
    cfg = dataclasses.replace(cfg, settings=(SamplingSettings(temperature=0.0), SamplingSettings()))
    v, exc, _ = run_audit(si.Misbehaviour("round", "probs"), cfg)
    promised = [c for c in v.checks if c.status == SKIPPED and "covered by the exact greedy check" in c.summary]
    assert not promised or any(c.name.startswith("greedy equivalence") for c in v.checks), [c.name for c in v.checks]
    assert any(c.status == SKIPPED and "no greedy check" in c.summary for c in v.checks)


def test_fixed_defect_unknown_flag_with_newline(capfd):
    """Was: an unrecognised argument holding a newline was echoed raw: a two-line usage error."""
    problems = usage_violations(*run_cli([*VALID, "--a\nb"], capfd))
    assert not problems, problems
