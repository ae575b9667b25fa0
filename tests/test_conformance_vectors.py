"""conformance/ vectors: regenerate and compare; cross-check with the sampling implementations."""

import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from specverify.algorithms import chain_numpy as vec
from specverify.algorithms.conformance import FILE_NAME, generate_cases, write_vectors

ROOT = Path(__file__).resolve().parents[1]


def test_committed_vectors_are_reproducible(tmp_path):
    path = write_vectors(tmp_path)
    assert path.read_text() == (ROOT / "conformance" / FILE_NAME).read_text()
    assert (tmp_path / "tree-v1.json").read_text() == (ROOT / "conformance" / "tree-v1.json").read_text()


def test_tree_vectors_state_exactness_correctly():
    doc = json.loads((ROOT / "conformance" / "tree-v1.json").read_text())
    assert len(doc["cases"]) >= 30
    for c in doc["cases"]:
        assert sum(Fraction(e["prob"]) for e in c["law"]) == 1
        if c["exact"]:
            assert Fraction(c["first_token_tv_from_p"]) == 0, c["id"]


def test_coverage_of_the_required_cases():
    cases = generate_cases()
    assert len(cases) >= 60
    assert {c["vocab_size"] for c in cases} >= {2, 64}
    assert {c["gamma"] for c in cases} == set(range(1, 9))
    tags = Counter(t for c in cases for t in c["tags"])
    for t in ("equal", "disjoint", "q_positive_p_zero", "p:one_hot", "q:one_hot", "p:near_tie"):
        assert tags[t] > 0, t
    assert {c["rule"] for c in cases} == {"full", "one_hot", "sample_and_match", "greedy"}
    for c in cases:
        assert sum(Fraction(e["prob"]) for e in c["law"]) == 1
        for row in c["p"]:
            assert sum(Fraction(v) for v in row) == 1


def _run(case, n, rng):
    p = np.array([[float(Fraction(v)) for v in r] for r in case["p"]])[None]
    qrows = case["q_reported_for_reference"]
    q = np.array([[float(Fraction(v)) for v in r] for r in qrows])[None]
    x = np.tile(np.array(case["draft_tokens"]), (n, 1))
    g = case["gamma"]
    rule = case["rule"]
    if rule == "full":
        res = vec.verify_chain_batch(x, q, p, rng.random((n, g)), rng.random(n))
    elif rule == "one_hot":
        res = vec.verify_one_hot_batch(x, p, rng.random((n, g)), rng.random(n))
    elif rule == "sample_and_match":
        res = vec.verify_sample_and_match_batch(x, p, rng.random((n, g + 1)))
    else:
        res = vec.verify_greedy_batch(x, p)
    final = res.tokens[np.arange(n), res.num_accepted]
    return Counter(zip(res.num_accepted.tolist(), final.tolist()))


@pytest.mark.parametrize("case", generate_cases()[::3], ids=lambda c: c["id"])
def test_numpy_kernel_samples_follow_the_vectors(case):
    # Fixed seed, so the outcome is deterministic; the threshold (p < 1e-9) would also make a
    # false failure under a random seed a one-in-a-billion event.
    n = 20_000
    counts = _run(case, n, np.random.default_rng(7))
    law = {(e["accepted"], e["token"]): e["prob_float"] for e in case["law"]}
    assert set(counts) <= set(law), "an output outside the law's support"
    keys = sorted(law)
    exp = np.array([law[k] for k in keys]) * n
    obs = np.array([counts.get(k, 0) for k in keys])
    if len(keys) > 1:
        big = exp >= 5
        obs_p = np.append(obs[big], obs[~big].sum())
        exp_p = np.append(exp[big], exp[~big].sum())
        keep = exp_p > 0
        if keep.sum() > 1:
            assert stats.chisquare(obs_p[keep], exp_p[keep]).pvalue > 1e-9
