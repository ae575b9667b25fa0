"""Request-level audits of llama.cpp (llama-cpp-python 0.3.36) under speculation (issue 23, item 3).

For prompt lookup (k = 3) and the high-overlap draft model (k = 3), on the engine models of
``scripts/engines/matrix.py`` written as GGUF, ``audit_lm`` against the float64 target, once per case:

    penalties   presence 0.5, frequency 0.5 and repetition 1.3 together, in llama.cpp's conventions
                (temperature after the filters, a repetition penalty over generated tokens only),
                with top-k 40 and top-p 0.9 at temperature 0.8, over 32-token requests and the
                480-token long unit (the models have 512 positions)
    unseeded    the default setting, every request without a seed (llama.cpp's own random seed)

plus the greedy check over 480 tokens and the seed check. Stop ids are not mapped by the adapter
(``Llama.generate`` has no stop; llama-cpp-python's completion stops on text), and llama-cpp-python
takes one request at a time (no batch to be invariant to): both are said in the table.

    .engines/llama/venv/bin/python scripts/engines/llama_requests.py --out results/engines/llama.cpp-requests
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from matrix import LLAMA_LOGIT_TOL, LONG_LENGTH, EngineConfig, _engine, audit_prompts  # noqa: E402
from request_level import table_lines  # noqa: E402

METHODS = (("prompt-lookup", 3, None), ("draft", 3, "high"), ("none", 0, None))
#: the draft model speculates at about 12 tokens per second here: the penalties case only
CASES_OF = {"prompt-lookup": ("penalties", "unseeded"), "draft": ("penalties",), "none": ("penalties",)}


def cases():
    from specverify import SamplingSettings

    conv = dict(temperature_last=True, penalize_prompt=False)
    pen = SamplingSettings(temperature=0.8, top_k=40, top_p=0.9, presence_penalty=0.5, frequency_penalty=0.5,
                           repetition_penalty=1.3, **conv)  # fmt: skip
    return {"penalties": ((pen,), True), "unseeded": ((SamplingSettings(**conv),), False)}


def run(out: Path, work: Path, eps: float, budget: float, window: int, methods: list[str]) -> list[dict]:
    from specverify.audit.sources.lm_audit import audit_lm
    from specverify.engines import build_engine_models
    from specverify.engines._models import load_float64

    models = build_engine_models(work / "models")
    target = load_float64(models.target)
    rows = []
    for method, k, overlap in METHODS:
        if method not in methods:
            continue
        cfg = EngineConfig(engine="llama.cpp", method=method, k=k, overlap=overlap or "", logit_tol=LLAMA_LOGIT_TOL)
        engine = _engine(cfg, models, work)
        engine.llm.last_n_tokens_size = window  # llama-cpp-python's penalty window (64 by default)
        for case, (settings, seeded) in cases().items():
            if case not in CASES_OF[method]:
                continue
            gen = engine.generator(seeded=seeded, name=f"llama.cpp[{cfg.key}]{'' if seeded else ' unseeded'}")
            t0 = time.monotonic()
            v = audit_lm(gen, target, prompts=audit_prompts(), settings=settings, gamma=max(k, 1), eps=eps,
                         budget_s=budget, name=gen.__name__, greedy_check=case == "penalties",
                         tie_tol=2 * LLAMA_LOGIT_TOL, call_timeout=120.0,
                         long_length=LONG_LENGTH if case == "penalties" else 0, logit_tol=LLAMA_LOGIT_TOL,
                         stop_token_ids=())  # fmt: skip
            secs = round(time.monotonic() - t0)
            tag = "" if window == 64 else f"-window{window}"
            (out / f"{cfg.key}-{case}{tag}.json").write_text(v.to_json(indent=1))
            print(f"{cfg.key} {case}: {v.status} in {secs} s", flush=True)
            rows += [dict(method=cfg.key, case=case + tag, check=c.name, status=c.status, summary=c.summary[:160],
                          seconds=secs) for c in v.checks]  # fmt: skip
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/engines/llama.cpp-requests"))
    ap.add_argument("--work", type=Path, default=Path(".engines/work"))
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--budget", type=float, default=700.0)
    ap.add_argument("--penalty-window", type=int, default=64, help="llama-cpp-python's last_n_tokens_size")
    ap.add_argument("--methods", nargs="+", default=[m for m, _, _ in METHODS if m != "none"])
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rows = run(a.out, a.work, a.eps, a.budget, a.penalty_window, a.methods)
    lines = [
        "# llama.cpp (llama-cpp-python 0.3.36) at the request level",
        "",
        "Written by scripts/engines/llama_requests.py: audit_lm against the float64 target at eps "
        f"{a.eps}, budget {a.budget:.0f} s per case, logit tolerance {LLAMA_LOGIT_TOL} (f16 KV cache).",
        "Not covered, and why: stop ids (Llama.generate has no stop; the completion API stops on text),",
        "concurrent requests (llama-cpp-python serves one request at a time), returned logprobs.",
        "",
        *table_lines(rows, ("method", "case", "check", "status", "summary", "seconds")),
    ]
    (a.out / f"README-window{a.penalty_window}-{'-'.join(a.methods)}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
