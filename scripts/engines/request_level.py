"""Request-level audits of vLLM's OpenAI server under speculation (issue 23, item 3, in part).

For each method (n-gram k = 3, the high-overlap draft model k = 3) this starts vLLM's
OpenAI-compatible server on the engine models of ``scripts/engines/matrix.py`` and runs the
installed ``specverify audit --endpoint`` against the float64 target, once per case:

    requests    the default setting with a stop unit (two ids with real mass under the target), a
                600-token long unit (past 512; cache blocks crossed; the models have 1,024 positions), seeded and
                unseeded requests, and the returned logprobs checked against the target's raw law (vLLM's
                default logprobs_mode; processed ones would need --logprobs-mode processed_logprobs)
    penalties   presence 0.5, frequency 0.5 and repetition 1.2 together (generated tokens only for
                the first two, as OpenAI and vLLM define them)

    .engines/vllm/venv/bin/python scripts/engines/request_level.py --out results/engines/vllm-requests

Writes one verdict JSON per (method, case) and README.md, a row per check. Says in the table
which vLLM files were patched (the two diffs of docs/findings/, applied to the installed package or
not), read from the installed sources.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from matrix import LONG_LENGTH  # noqa: E402

METHODS = (("ngram", 3), ("draft", 3))
CASES = {
    "requests": ["--check-logprobs", "raw"],  # vLLM's default logprobs_mode is raw_logprobs
    "penalties": ["--presence-penalty", "0.5", "--frequency-penalty", "0.5", "--repetition-penalty", "1.2"],
}


def stop_ids(target, n: int = 2, *, min_id: int = 0) -> list[int]:
    """The ids >= ``min_id`` with the most mean mass after a few seeded prompts (a stop unit needs
    stops to happen; llama.cpp stops on text, where ids of 3 digits are no other id's prefix)."""
    import torch

    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(2, int(target.config.vocab_size), (16, 8), generator=g)
    with torch.no_grad():
        p = torch.softmax(target(prompts).logits[:, -1].double(), -1).mean(0)
    p[:min_id] = -1.0
    return [int(i) for i in torch.topk(p, n).indices]


def patched() -> dict[str, bool]:
    """Whether each fix of docs/findings/ is in the installed vLLM (read from its sources)."""
    import vllm.utils.cpu_triton_utils as tl
    import vllm.v1.sample.ops.topk_topp_sampler as tk

    return {
        "expand-kernel fix": "repeat_interleave" in Path(tl.__file__).read_text(),
        "top-k no-rows guard": "if k.numel() == 0" in Path(tk.__file__).read_text(),
    }


def run(out: Path, work: Path, eps: float, budget: float, batch_invariant: bool = False) -> list[dict]:
    from specverify.engines import build_engine_models
    from specverify.engines._models import load_float64
    from specverify.engines.vllm import serve, speculative_config

    models = build_engine_models(work / "models")
    stops = ",".join(map(str, stop_ids(load_float64(models.target))))
    rows = []
    for method, k in METHODS:
        key = method if method == "none" else f"{method}-k{k}"
        spec = speculative_config(method, k, models, overlap="high")
        with serve(models.target, speculative=spec, log=work / f"server-requests-{key}.log") as url:
            for case, opts in CASES.items():
                dest = out / f"{key}-{case}.json"
                cmd = [sys.executable, "-m", "specverify.cli", "audit", "--endpoint", url, "--json", str(dest),
                       "--model", str(models.target), "--stop-token-ids", stops, "--eps", str(eps),
                       "--budget", str(budget), "--long-length", str(LONG_LENGTH), "--no-progress", *opts,
                       *(["--batch-invariant"] if batch_invariant else [])]  # fmt: skip
                code, secs = run_cli_audit(cmd, out / f"{key}-{case}.txt")
                print(f"{key} {case}: exit {code} in {secs:.0f} s", flush=True)
                if dest.exists():
                    v = json.loads(dest.read_text())
                    rows += [dict(method=key, case=case, seconds=round(secs), **_row(c)) for c in v["checks"]]
    return rows


def table_lines(rows: list[dict], cols: tuple[str, ...]) -> list[str]:
    """A markdown table of ``rows`` (status in bold, '|' in a summary escaped), header first."""
    lines = ["| " + " | ".join("s" if c == "seconds" else c for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"**{r[c]}**" if c == "status" else str(r[c]).replace("|", "/") for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_cli_audit(cmd: list[str], text_out: Path) -> tuple[int, float]:
    """Run one ``specverify audit`` command; its output goes to ``text_out``; (exit code, seconds)."""
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    text_out.write_text(r.stdout + r.stderr)
    return r.returncode, time.monotonic() - t0


def _row(c: dict) -> dict:
    return {"check": c["name"], "status": c["status"], "summary": c.get("summary", "")[:160]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/engines/vllm-requests"))
    ap.add_argument("--work", type=Path, default=Path(".engines/work"))
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--budget", type=float, default=900.0)
    ap.add_argument(
        "--batch-invariant",
        action="store_true",
        help="start the servers with VLLM_BATCH_INVARIANT=1 (vLLM's batch-invariant mode, CUDA / ROCm only) and "
        "check that a seeded request's tokens do not depend on its batch",
    )
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.batch_invariant:
        os.environ["VLLM_BATCH_INVARIANT"] = "1"  # the servers inherit it
    fixes = patched()
    rows = run(a.out, a.work, a.eps, a.budget, a.batch_invariant)
    lines = [
        "# vLLM's OpenAI server at the request level (scripts/engines/request_level.py)",
        "",
        "Installed vLLM: " + ", ".join(f"{k}: {'applied' if v else 'not applied'}" for k, v in fixes.items()) + ".",
        f"Audits at eps {a.eps}, budget {a.budget:.0f} s each, against the float64 target.",
        "",
        *table_lines(rows, ("method", "case", "check", "status", "summary", "seconds")),
    ]
    (a.out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
