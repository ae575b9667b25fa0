"""Request-level audits of llama.cpp (llama-cpp-python 0.3.36) under speculation (issue 23, item 3).

Three ways in (``--api``), on the engine models of ``scripts/engines/matrix.py`` written as GGUF,
``audit_lm`` against the float64 target:

    generate     ``Llama.generate`` (no stops; ids in, ids out), prompt lookup k = 3 and the
                 high-overlap draft model k = 3
    completion   ``Llama.create_completion``, what users call: llama.cpp's text stops and its stop at
                 the end-of-sequence token, its returned (raw) logprobs, its seeds
    server       ``python -m llama_cpp.server`` (its OpenAI /v1/completions, text prompts through a
                 unigram GGUF vocabulary of the same words; prompt lookup k = 3, its one method)

Cases:

    penalties   presence 0.5, frequency 0.5 and repetition 1.3 together, in llama.cpp's conventions
                (temperature after the filters, penalties over the last --penalty-window generated
                tokens only: SamplingSettings(penalty_window=...), 64 by default as in the engine),
                with top-k 40 and top-p 0.9 at temperature 0.8, over 32-token requests and the
                600-token long unit (the models have 1,024 positions), the greedy check over 600
                tokens and the seed check
    requests    (completion, server) the default setting with a stop unit (the end-of-sequence id 2,
                which llama.cpp always stops at, and the two 3-digit ids of most mass), the 600-token
                unit, the returned logprobs (top 5) checked against the raw law, the seed check
                (with unseeded requests interleaved with seeded ones)
    unseeded    the default setting, every request without a seed

    .engines/llama/venv/bin/python scripts/engines/llama_requests.py --api completion
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from matrix import LLAMA_LOGIT_TOL, LONG_LENGTH, EngineConfig, _engine, audit_prompts  # noqa: E402
from request_level import stop_ids, table_lines  # noqa: E402

METHODS = (("prompt-lookup", 3, None), ("draft", 3, "high"), ("none", 0, None))
#: the draft model speculates at about 12 tokens per second here: the penalties case only
CASES_OF = {
    "generate": {"prompt-lookup": ("penalties", "unseeded"), "draft": ("penalties",), "none": ("penalties",)},
    "completion": {"prompt-lookup": ("requests", "penalties", "unseeded"), "draft": ("requests",)},
    "server": {"prompt-lookup": ("requests", "penalties", "unseeded")},
}
EOS = 2  # the GGUF's end-of-sequence id: llama.cpp's completion always stops there


def cases(api: str, stops: tuple[int, ...], window: int = 64):
    """case -> (settings, seeded, audit options); the penalties count the engine's last ``window``
    generated tokens (llama-cpp-python's ``last_n_tokens_size``), as the law does."""
    from specverify import SamplingSettings

    conv = dict(temperature_last=True, penalize_prompt=False, penalty_window=window)
    end = {} if api == "generate" else dict(stop_token_ids=(EOS,))  # llama.cpp's EOS stop, on every request
    pen = SamplingSettings(temperature=0.8, top_k=40, top_p=0.9, presence_penalty=0.5, frequency_penalty=0.5,
                           repetition_penalty=1.3, **conv, **end)  # fmt: skip
    plain = SamplingSettings(**conv, **end)
    long = dict(long_length=LONG_LENGTH, greedy_check=True)
    out = {
        "penalties": ((pen,), True, {**long, "stop_token_ids": ()}),
        "unseeded": ((plain,), False, {"long_length": 0, "greedy_check": False, "stop_token_ids": ()}),
    }
    if api != "generate":
        out["requests"] = ((plain,), True, {**long, "stop_token_ids": (EOS, *stops)})
    return out


def _generator(api, method, k, overlap, models, work, window, logprobs, seeded, stack):
    """(generate, label) for one way in; servers are entered on ``stack``."""
    cfg = EngineConfig(engine="llama.cpp", method=method, k=k, overlap=overlap or "", logit_tol=LLAMA_LOGIT_TOL)
    if api == "server":
        from specverify.engines._models import write_gguf
        from specverify.engines.llama_cpp import llama_server_generator, serve_llama

        gguf = work / "target-t5.gguf"
        if not gguf.exists():
            write_gguf(models.target, gguf, tokenizer="t5")
        url = stack.enter_context(serve_llama(gguf, draft="prompt-lookup", k=k, penalty_window=window,
                                              log=work / f"llama-server-{cfg.key}.log"))  # fmt: skip
        gen = llama_server_generator(url, vocab=512, eos=EOS, seeded=seeded, logprobs=logprobs, penalty_window=window)
        return gen, f"server {cfg.key}"
    engine = _engine(cfg, models, work, api=api)
    engine.llm.last_n_tokens_size = window  # llama-cpp-python's penalty window (64 by default)
    if api == "completion":
        return engine.generator(seeded=seeded, logprobs=logprobs), f"completion {cfg.key}"
    return engine.generator(seeded=seeded), cfg.key


def run(out: Path, work: Path, eps: float, budget: float, window: int, methods: list[str], api: str,
        only: tuple[str, ...] = (), label: str = "") -> list[dict]:  # fmt: skip
    from specverify.audit.sources.lm_audit import audit_lm
    from specverify.engines import build_engine_models
    from specverify.engines._models import load_float64

    models = build_engine_models(work / "models")
    target = load_float64(models.target)
    stops = tuple(stop_ids(target, min_id=100))
    rows = []
    for method, k, overlap in METHODS:
        if method not in methods or method not in CASES_OF[api]:
            continue
        for case, (settings, seeded, opts) in cases(api, stops, window).items():
            if case not in CASES_OF[api][method] or (only and case not in only):
                continue
            with contextlib.ExitStack() as stack:
                lp = 5 if case == "requests" else None
                gen, way = _generator(api, method, k, overlap, models, work, window, lp, seeded, stack)
                t0 = time.monotonic()
                v = audit_lm(gen, target, prompts=audit_prompts(), settings=settings, gamma=max(k, 1), eps=eps,
                             budget_s=budget, name=way, tie_tol=2 * LLAMA_LOGIT_TOL, call_timeout=120.0,
                             logit_tol=LLAMA_LOGIT_TOL, logprob_tol=2 * LLAMA_LOGIT_TOL, **opts)  # fmt: skip
            secs = round(time.monotonic() - t0)
            tag = ("" if window == 64 else f"-window{window}") + (f"-{label}" if label else "")
            name = f"{api}-{method}-{case}{tag}" if api != "generate" else f"{way}-{case}{tag}"
            (out / f"{name}.json").write_text(v.to_json(indent=1))
            print(f"{way} {case}: {v.status} in {secs} s", flush=True)
            rows += [dict(way=way, case=case + tag, check=c.name, status=c.status, summary=c.summary[:200],
                          seconds=secs) for c in v.checks]  # fmt: skip
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/engines/llama.cpp-requests"))
    ap.add_argument("--work", type=Path, default=Path(".engines/work"))
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--budget", type=float, default=700.0)
    ap.add_argument("--penalty-window", type=int, default=64, help="llama-cpp-python's last_n_tokens_size")
    ap.add_argument("--api", choices=tuple(CASES_OF), default="generate")
    ap.add_argument("--methods", nargs="+", default=[m for m, _, _ in METHODS if m != "none"])
    ap.add_argument("--cases", nargs="+", default=[], help="only these cases (default: every case of the way in)")
    ap.add_argument("--label", default="", help="appended to the files' names (e.g. which fixes are applied)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rows = run(a.out, a.work, a.eps, a.budget, a.penalty_window, a.methods, a.api, tuple(a.cases), a.label)
    lines = [
        "# llama.cpp (llama-cpp-python 0.3.36) at the request level",
        "",
        f"Written by scripts/engines/llama_requests.py --api {a.api}: audit_lm against the float64 target at eps "
        f"{a.eps}, budget {a.budget:.0f} s per case, logit tolerance {LLAMA_LOGIT_TOL} (f16 KV cache), "
        f"penalty window {a.penalty_window}.",
        "",
        *table_lines(rows, ("way", "case", "check", "status", "summary", "seconds")),
    ]
    tag = f"-{a.label}" if a.label else ""
    readme = a.out / f"README-{a.api}-window{a.penalty_window}-{'-'.join(a.methods)}{tag}.md"
    readme.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
