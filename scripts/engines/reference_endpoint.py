"""A speculative vLLM server audited against a non-speculative vLLM server's reported law (issue 23).

Starts two vLLM OpenAI servers on the engine models of ``scripts/engines/matrix.py``: the reference
(no speculation, ``--max-logprobs -1`` so that ``prompt_logprobs`` may cover every token) and the
speculative one (the high-overlap draft model, k = 3, or n-gram k = 3), and runs the installed
``specverify audit --endpoint SPEC`` three ways on the same configuration (seed, settings, eps):

    local      --model TARGET_DIR: the float64 law computed by the auditor (the usual audit)
    reported   --reference-endpoint REF: the law the reference reports for every token
    top20      --reference-endpoint REF --reference-logprobs 20: its top 20, the rest bounded

    .engines/vllm/venv/bin/python scripts/engines/reference_endpoint.py --out results/engines/vllm-reference

Writes each verdict JSON, its text, and README.md (a row per check, the installed vLLM's patches).
The question it answers: does an audit that never loads the model reach the verdict of the one
that does?
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from request_level import _row, patched, run_cli_audit, stop_ids, table_lines  # noqa: E402  (sibling helpers)

WAYS = {
    "local": lambda models, ref: ["--model", str(models.target)],
    "reported": lambda models, ref: ["--reference-endpoint", ref],
    "top20": lambda models, ref: ["--reference-endpoint", ref, "--reference-logprobs", "20"],
}


def run(out: Path, work: Path, method: str, eps: float, budget: float, long_length: int, ways: list[str]) -> list[dict]:
    from specverify.engines import build_engine_models
    from specverify.engines._models import load_float64
    from specverify.engines.vllm import serve, speculative_config

    models = build_engine_models(work / "models")
    stops = ",".join(map(str, stop_ids(load_float64(models.target))))
    spec = speculative_config(method, 3, models, overlap="high")
    rows = []
    with (
        serve(models.target, log=work / "server-reference.log", extra_args=("--max-logprobs", "-1")) as ref,
        serve(models.target, speculative=spec, log=work / f"server-{method}-k3.log") as url,
    ):
        for way in ways:
            opts = WAYS[way]
            dest = out / f"{method}-k3-{way}.json"
            cmd = [sys.executable, "-m", "specverify.cli", "audit", "--endpoint", url, "--json", str(dest),
                   "--stop-token-ids", stops, "--eps", str(eps), "--budget", str(budget),
                   "--long-length", str(long_length), "--no-progress", *opts(models, ref)]  # fmt: skip
            code, secs = run_cli_audit(cmd, out / f"{method}-k3-{way}.txt")
            print(f"{method}-k3 {way}: exit {code} in {secs:.0f} s", flush=True)
            if dest.exists():
                v = json.loads(dest.read_text())
                rows.append(dict(way=way, check="verdict", status=v["status"], summary=v.get("headline", "")[:200],
                                 seconds=round(secs)))  # fmt: skip
                rows += [dict(way=way, seconds=round(secs), **_row(c)) for c in v["checks"]]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/engines/vllm-reference"))
    ap.add_argument("--work", type=Path, default=Path(".engines/work"))
    ap.add_argument("--method", choices=["draft", "ngram"], default="draft")
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--long-length", type=int, default=0)
    ap.add_argument("--ways", nargs="+", choices=list(WAYS), default=list(WAYS))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    fixes = patched()
    rows = run(a.out, a.work, a.method, a.eps, a.budget, a.long_length, a.ways)
    lines = [
        "# A speculative vLLM server against a non-speculative one's reported law",
        "",
        "Written by scripts/engines/reference_endpoint.py.",
        "",
        "Installed vLLM: " + ", ".join(f"{k}: {'applied' if v else 'not applied'}" for k, v in fixes.items()) + ".",
        f"Method {a.method} k = 3; eps {a.eps}, budget {a.budget:.0f} s per audit; long unit {a.long_length or 'off'}.",
        "local: against the float64 target computed here; reported: the reference's prompt_logprobs for every",
        "token; top20: its top 20 per position, the rest bounded.",
        "",
        *table_lines(rows, ("way", "check", "status", "summary", "seconds")),
    ]
    name = f"{a.method}-{'patched' if all(fixes.values()) else 'unpatched'}-{'-'.join(a.ways)}.md"
    (a.out / name).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
