"""Issue 13: argument checks that say name=value and the fix, the result objects' constructors and
statuses, and the public helpers that nothing else calls (tested here so they stay true)."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.errors import InvalidArgument

from specverify import strategies as svst
from specverify.pytest_plugin import assert_lossless
from specverify.stats import (
    EXACT_FAILURE,
    FAIL,
    INCONCLUSIVE,
    PASS,
    CheckOutcome,
    GofResult,
    Status,
    Verdict,
    min_detectable_ks,
    min_samples_for_ks,
)

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- strategies: argument checks
@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: svst.probability_vectors(min_size=5, max_size=2),
            "min_size=5 > max_size=2; pass min_size <= max_size",
        ),
        (lambda: svst.probability_vectors(min_size=0), "min_size=0 is below 1; pass min_size >= 1"),
        (lambda: svst.probability_vectors(max_size=2.5), "max_size=2.5 must be an int"),
        (lambda: svst.probability_vectors(kinds=("general", "spiky")), "holds ['spiky'], not kinds of vector"),
        (lambda: svst.probability_vectors(kinds="general"), "kinds='general' must be a non-empty sequence"),
        (lambda: svst.pq_pairs(overlap=(0.9, 0.2)), "overlap=(0.9, 0.2) is not an interval of [0, 1]"),
        (lambda: svst.pq_pairs(overlap=(0.5, 1.5)), "pass 0 <= lo <= hi <= 1"),
        (lambda: svst.pq_pairs(overlap=0.5), "overlap=0.5 must be a pair (lo, hi)"),
        (lambda: svst.pq_pairs(overlap=(0.51, 0.52)), "holds no multiple of 1/16"),
        (lambda: svst.logits(size=0), "size=0 is below 1; pass size >= 1"),
        (lambda: svst.uniforms(-1), "n=-1 is below 0; pass n >= 0"),
        (lambda: svst.markov_pairs(min_vocab=4, max_vocab=3), "min_vocab=4 > max_vocab=3"),
        (lambda: svst.markov_pairs(max_order=-1), "max_order=-1 is below 0"),
    ],
)
def test_strategy_arguments_are_checked_when_built(build, message):
    with pytest.raises(InvalidArgument) as err:
        build()
    assert message in str(err.value)


def test_strategy_overlap_message_suggests_an_interval_that_works():
    with pytest.raises(InvalidArgument, match=r"e\.g\. overlap=\(0\.5, 0\.5625\)"):
        svst.pq_pairs(overlap=(0.51, 0.52))


@settings(max_examples=20, deadline=None)
@given(
    svst.pq_pairs(min_size=3, max_size=3, exact=True, overlap=(0.5, 1.0)),
    svst.probability_vectors(size=4, kinds=["one_hot"], exact=True),
    svst.markov_pairs(min_vocab=2, max_vocab=2, max_order=1),
)
def test_valid_strategy_arguments_still_draw(pq, v, pair):
    p, q = pq
    assert len(p) == len(q) == 3 and sum(min(a, b) for a, b in zip(p, q, strict=True)) >= Fraction(1, 2)
    assert sorted(v) == [0, 0, 0, 1]
    assert isinstance(pair, svst.CallableMarkovPair) and len(pair.target((0,))) == 2


def test_numpy_integers_are_integers():
    assert svst.probability_vectors(size=np.int64(3)) is not None


# ---------------------------------------------------------------- pytest plugin: argument checks
def test_plugin_unknown_kind_names_the_kinds():
    with pytest.raises(ValueError, match=r"kind='kernal' is not a shape .* pass kind='kernel', 'round' or 'generator'"):
        assert_lossless(lambda *a: None, kind="kernal")


def test_plugin_non_callable_impl_says_what_to_pass():
    with pytest.raises(TypeError, match=r"impl=42 is not callable; pass the kernel function itself"):
        assert_lossless(42)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"alpha": 1.5}, "alpha=1.5 is out of range; pass a number strictly between 0 and 1"),
        ({"eps": 0.0}, "eps=0.0 is out of range"),
        ({"budget_s": -1}, "budget_s=-1 is out of range; pass a number of seconds > 0"),
    ],
)
def test_plugin_rates_are_checked(kw, message):
    with pytest.raises(ValueError) as err:
        assert_lossless(lambda *a: None, **kw)
    assert message in str(err.value)


# ---------------------------------------------------------------- result objects and statuses
def test_statuses_are_strings_in_comparisons_formatting_and_json():
    assert Status.PASS == "PASS" and PASS == "PASS" and {"FAIL": 1}[FAIL] == 1
    assert f"{INCONCLUSIVE}" == "INCONCLUSIVE" and str(FAIL) == "FAIL"
    c = CheckOutcome(name="x", status="FAIL", kind="exact", summary="x: failed")
    assert c.status is Status.FAIL  # a bare string is coerced to the enum
    v = Verdict(status=FAIL, alpha=1e-6, beta=1e-6, eps=None, eps_requested=0.05, seed=3, checks=[c])
    d = json.loads(v.to_json())
    assert d["status"] == "FAIL" and d["checks"][0]["status"] == "FAIL"
    with pytest.raises(ValueError):
        CheckOutcome(name="x", status="MAYBE", kind="exact", summary="")


def test_result_objects_are_keyword_only():
    with pytest.raises(TypeError):
        CheckOutcome("x", "PASS", "exact", "ok")  # type: ignore[misc]
    with pytest.raises(TypeError):
        GofResult("t", 0.0, 1.0, 0, 0, 0, 0.0, (0.0, 1.0), [])  # type: ignore[misc]


def test_gof_named_constructors():
    e = GofResult.exact_failure("t", n=10, why="a token of probability 0", tv_estimate=0.1, tv_interval=(0.1, 1.0))
    assert e.pvalue == 0.0 and e.statistic == float("inf") and e.is_exact_failure
    assert e.note == EXACT_FAILURE + "a token of probability 0" and e.note.startswith("exact failure: ")
    z = GofResult.empty("t", n=3, cells=1, why="fewer than two cells")
    assert z.pvalue == 1.0 and z.statistic == 0.0 and not z.is_exact_failure and z.note == "fewer than two cells"


# ---------------------------------------------------------------- public helpers no caller uses
def test_min_detectable_ks_inverts_min_samples_for_ks():
    for n in (100, 10_000, 1_000_000):
        d = min_detectable_ks(n, alpha=1e-6, beta=1e-6)  # equal rates: exact inverses (up to rounding up)
        assert n <= min_samples_for_ks(d, alpha=1e-6, beta=1e-6) <= n + 1
        # unequal rates: the sample size spends the larger of the two on both halves, so it is conservative
        assert min_samples_for_ks(min_detectable_ks(n, alpha=1e-6, beta=1e-3), alpha=1e-6, beta=1e-3) >= n
    assert min_detectable_ks(10_000, alpha=1e-6, beta=1e-3) < min_detectable_ks(100, alpha=1e-6, beta=1e-3)


def test_gumbel_max_sample_is_argmax_and_samples_softmax():
    from specverify.dists import gumbel_max_sample

    logits = np.array([0.0, 1.0, -np.inf, 2.0])
    assert gumbel_max_sample(logits, np.zeros(4)) == 3
    rng = np.random.default_rng(0)
    draws = gumbel_max_sample(np.broadcast_to(logits, (200_000, 4)), rng.gumbel(size=(200_000, 4)))
    freq = np.bincount(draws, minlength=4) / len(draws)
    soft = np.exp(np.where(np.isinf(logits), -np.inf, logits))
    np.testing.assert_allclose(freq, soft / soft.sum(), atol=5e-3)
    assert freq[2] == 0


def test_probs_from_logits_torch_matches_numpy():
    import torch

    from specverify.dists import SamplingSettings, probs_from_logits
    from specverify.dists.torch_ops import probs_from_logits_torch

    logits = np.random.default_rng(1).normal(size=(3, 50))
    for s in (None, SamplingSettings(temperature=0.7, top_k=10, top_p=0.9, min_p=0.02)):
        got = probs_from_logits_torch(torch.from_numpy(logits), s).numpy()
        np.testing.assert_allclose(got, probs_from_logits(logits, s), atol=1e-12)


def test_to_fractions_is_exact_and_normalised():
    from specverify.algorithms.exact_law import to_fractions

    fr = to_fractions([0.1, 0.2, 0.7])
    assert sum(fr) == 1 and all(isinstance(f, Fraction) for f in fr)
    assert to_fractions(["1/3", "1/3", "1/3"]) == [Fraction(1, 3)] * 3
    assert all(f.denominator <= 1000 for f in to_fractions([0.123456, 0.876544], limit=100))


def test_load_vectors_reads_the_committed_vectors():
    from specverify.algorithms.conformance import FILE_NAME, load_vectors

    doc = load_vectors(ROOT / "conformance" / FILE_NAME)
    assert doc == json.loads((ROOT / "conformance" / FILE_NAME).read_text()) and doc["cases"]


# ---------------------------------------------------------------- the tools ./run test runs
def test_function_length_checker_flags_long_functions_without_a_reason(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n")
    (tmp_path / "ok.py").write_text(f"# long: a table of seventy assignments\ndef g():\n{body}\n")
    script = ROOT / "scripts" / "check_function_length.py"
    bad = subprocess.run([sys.executable, script, tmp_path / "long.py"], capture_output=True, text=True)
    assert bad.returncode == 1 and "f is 71 lines" in bad.stdout
    good = subprocess.run([sys.executable, script, tmp_path / "ok.py"], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout


def test_a_kernel_audit_and_its_diagnosis_never_import_torch(tmp_path):
    """A FAIL of a numpy kernel is diagnosed without torch: importing it cost every FAIL seconds (the
    diagnosis scores every class, the bf16 one rounded with torch, and the LM diagnosis imported it
    for an annotation)."""
    code = (
        "import sys\n"
        "from specverify.cli import main\n"
        "try:\n"
        "    main(['audit', 'replacement_from_p', '--temperature', '1',\n"
        "          '--no-progress', '--eps', '0.2', '--json', sys.argv[1]])\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code)\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
    )
    out = tmp_path / "v.json"
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=600)
    assert "torch imported: False" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(out.read_text())["diagnosis"]["verdict"] == "replacement_from_p", r.stdout[-2000:]
