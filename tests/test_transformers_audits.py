"""Auditing transformers' own speculative generation (assisted, prompt lookup, early exit) and an
OpenAI-compatible HTTP endpoint, on tiny local models. Full parity matrix: scripts/transformers_parity.py."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from specverify import SamplingSettings
from specverify.audit.sources.http_adapter import http_generator, two_sample_endpoints
from specverify.audit.sources.lm_audit import audit_lm
from specverify.audit.sources.transformers_adapters import hf_generator
from specverify.lm.transformers_lm import early_exit_copy, layered_target
from specverify.runners.serve import make_server

torch.set_num_threads(1)
PROMPTS = [[1, 2, 3, 4, 1, 2], [5, 6, 7], [9, 8, 9, 8, 9]]


@pytest.fixture(scope="module")
def models():
    t = layered_target("llama", vocab=96, hidden=48, layers=4, heads=4, seed=2, lm_head_scale=6.0, keep=1, damp=0.2)
    return t, early_exit_copy(t, layers=1)


@pytest.mark.parametrize(
    "mode, gamma",
    [("assisted", 3), ("assisted", None), ("prompt_lookup", 3), ("early_exit", 3)],
    ids=["assisted", "assisted-default-schedule", "prompt_lookup", "early_exit"],
)
def test_transformers_speculative_modes_are_lossless(models, mode, gamma):
    t, d = models
    gen = hf_generator(t, mode=mode, assistant=d, gamma=gamma, exit_layer=1)
    s = (SamplingSettings(temperature=0.7, top_k=20, top_p=0.9),)
    v = audit_lm(gen, t, prompts=PROMPTS, settings=s, eps=0.25, length=4, name=mode)
    assert v.status == "PASS", v.headline()
    assert {c.name: c.status for c in v.checks}["greedy equivalence (tie-aware)"] == "PASS"


def test_a_settings_mismatch_is_caught(models):
    # Negative control: the request's temperature is not forwarded (transformers#28166-like).
    t, d = models
    inner = hf_generator(t, mode="assisted", assistant=d, gamma=3)

    def gen(p, n, seed, s):
        return inner(p, n, seed, SamplingSettings(top_k=s.top_k))

    v = audit_lm(
        gen,
        t,
        prompts=PROMPTS,
        settings=(SamplingSettings(temperature=0.5, top_k=20),),
        eps=0.25,
        length=4,
        greedy_check=False,
    )
    assert v.status == "FAIL"


@pytest.fixture(scope="module")
def servers(models):
    t, d = models
    spec, plain = make_server(t, d, gamma=3), make_server(t, None)
    for s in (spec, plain):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in (spec, plain)]
    for s in (spec, plain):
        s.shutdown()


def test_http_endpoint_audit_and_two_sample(models, servers):
    t, _ = models
    spec_url, plain_url = servers
    s = SamplingSettings(temperature=0.8)
    v = audit_lm(http_generator(spec_url), t, prompts=PROMPTS, settings=(s,), eps=0.25, length=4, name="http")
    assert v.status == "PASS", v.headline()
    v2 = two_sample_endpoints(
        http_generator(spec_url),
        http_generator(plain_url),
        prompts=PROMPTS,
        settings=s,
        vocab_size=96,
        n_sequences=300,
        length=3,
        eps=0.7,
    )
    # 300 sequences per endpoint detect only coarse deviations: the verdict states it (eps <= 0.7)
    assert v2.status == "PASS" and v2.eps <= 0.7, v2.headline()


class _Bad(BaseHTTPRequestHandler):
    mode = "garbage"

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.mode == "slow":
            time.sleep(3)
        body = b"not json" if self.mode == "garbage" else json.dumps({"choices": []}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:  # the client gave up (the timeout case)
            pass


@pytest.mark.parametrize(
    "mode, words", [("garbage", "without choices"), ("empty", "returned 0 choices for n=1"), ("slow", "did not answer")]
)
def test_bad_endpoints_become_findings(models, mode, words):
    t, _ = models
    handler = type("H", (_Bad,), {"mode": mode})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        gen = http_generator(f"http://127.0.0.1:{srv.server_address[1]}", timeout=0.5, retries=1, backoff=0.01)
        v = audit_lm(gen, t, prompts=PROMPTS, eps=0.3, length=2, name=mode, greedy_check=False)
    finally:
        srv.shutdown()
    assert v.status == "FAIL" and any(words in e for e in v.evidence), v.evidence


def test_local_path_loading(tmp_path, models):
    from specverify.lm.transformers_lm import CausalLM, load_local

    t, _ = models
    t.save_pretrained(tmp_path / "m")
    m = load_local(str(tmp_path / "m"))
    assert float((CausalLM(m).logits([1, 2, 3]) - CausalLM(t).logits([1, 2, 3])).abs().max()) < 1e-6


def test_serve_command_as_a_real_process(models):
    """`specverify serve` in its own process on loopback, audited over HTTP (two-sample against a
    target-only server process started the same way)."""
    import socket
    import subprocess
    import sys
    import urllib.request

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "specverify.cli", "serve", "--port", str(ports[0]), "--speculative", "--vocab", "64"]
        ),
        subprocess.Popen([sys.executable, "-m", "specverify.cli", "serve", "--port", str(ports[1]), "--vocab", "64"]),
    ]
    try:
        for port in ports:
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.1)
        spec, plain = (http_generator(f"http://127.0.0.1:{p}") for p in ports)
        v = two_sample_endpoints(
            spec,
            plain,
            prompts=PROMPTS,
            settings=SamplingSettings(temperature=0.9),
            vocab_size=64,
            n_sequences=200,
            length=3,
            eps=0.8,
        )
        assert v.status == "PASS" and v.eps <= 0.8, v.headline()
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
