"""Requests together (issue 21, item 5, in part): requests of one prompt with different seeds must
give independent samples. NVIDIA/TensorRT-LLM#19487: requests sharing one RNG stream returned
identical samples. A generator seeded by its prompt instead of the request's seed passes every
per-token test (each request is an honest sample) and fails only this check; the bound on a
coincidence under the target law makes the check's false-fail rate at most alpha / 1000."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from specverify.audit import GeneratorAdapter, audit


def _sample(prompt, n, model, rng):
    out = []
    for _ in range(n):
        p = model.target_probs(list(prompt) + out)
        out.append(int(rng.choice(len(p), p=p)))
    return out


def correct(prompt, n, seed, model):
    return _sample(prompt, n, model, np.random.default_rng(seed))


def seeded_by_prompt(prompt, n, seed, model):
    """Bug: the sampler is seeded from the prompt, not the request (identical requests repeat)."""
    return _sample(prompt, n, model, np.random.default_rng(zlib.crc32(bytes(str(prompt), "ascii"))))


def one_stream_restarted(prompt, n, seed, model):
    """Bug (TensorRT-LLM#19487-like): every request restarts one stream; the seed is ignored."""
    return _sample(prompt, n, model, np.random.default_rng(1234))


def seed_row(v):
    (row,) = [c for c in v.checks if c.name == "seed independence"]
    return row


def test_a_correct_generator_passes_seed_independence():
    v = audit(GeneratorAdapter(correct, name="gen"), eps=0.1)
    assert v.status == "PASS", v.headline()
    assert seed_row(v).status == "PASS" and "6 seeds, 6 different samples of" in seed_row(v).summary


def test_a_generator_seeded_by_its_prompt_fails_only_the_seed_check_and_is_named():
    v = audit(GeneratorAdapter(seeded_by_prompt, name="gen"), eps=0.1)
    assert v.status == "FAIL"
    assert [c.name for c in v.checks if c.status == "FAIL"] == ["seed independence"], v.headline()
    assert "gave the same" in seed_row(v).summary and "does not follow the request's seed" in seed_row(v).summary
    assert v.diagnosis["verdict"] == "seed_not_honoured", v.diagnosis
    assert v.headline().startswith("FAIL in exact check 'seed independence'")


@pytest.mark.parametrize("gen", [one_stream_restarted])
def test_one_stream_for_every_request_fails(gen):
    v = audit(GeneratorAdapter(gen, name="gen"), eps=0.1, diagnose=False)
    assert v.status == "FAIL" and seed_row(v).status == "FAIL"
