"""Tests for fix.diff (llama-cpp-python, ``Llama._create_completion``'s seed for unseeded requests).

    python -m pytest test_unseeded_seed.py     # needs llama-cpp-python and gguf; builds a tiny model

On 0.3.36: 2 failed (the unseeded request after a seeded one, the first unseeded request after a
load with the default seed), 2 passed. With fix.diff: 4 passed.
"""

import pytest
from llama_cpp import Llama

from tiny_gguf import write


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write(str(tmp_path_factory.mktemp("m") / "tiny.gguf"))


def _complete(llm, seed):
    # 24 tokens at temperature 1: two independent draws coincide with probability below 1e-20
    r = llm.create_completion([12, 34, 56], max_tokens=24, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
    return r["choices"][0]["text"]


def test_a_seed_reproduces_its_request(model):
    llm = Llama(model_path=model, n_ctx=256, verbose=False)
    assert _complete(llm, 1234) == _complete(llm, 1234)


def test_an_unseeded_request_does_not_follow_the_previous_requests_seed(model):
    llm = Llama(model_path=model, n_ctx=256, verbose=False)
    outs = [_complete(llm, s) for s in (1234, None, 1234, None)]
    assert outs[1] != outs[3]


def test_unseeded_requests_follow_the_seed_the_model_was_loaded_with(model):
    # what the chain was for: Llama(seed=7) makes a run of unseeded requests reproducible
    first = Llama(model_path=model, n_ctx=256, verbose=False, seed=7)
    second = Llama(model_path=model, n_ctx=256, verbose=False, seed=7)
    assert [_complete(first, None) for _ in range(3)] == [_complete(second, None) for _ in range(3)]


def test_the_default_seed_draws_a_fresh_stream_per_load(model):
    # abetlen/llama-cpp-python#1809: with the default seed the first unseeded reply was the same on every load
    a = Llama(model_path=model, n_ctx=256, verbose=False)
    b = Llama(model_path=model, n_ctx=256, verbose=False)
    assert _complete(a, None) != _complete(b, None)
