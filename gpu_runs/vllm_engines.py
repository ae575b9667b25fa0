"""The engine audits of results/engines/ on a GPU: CUDA vLLM end to end, and its Triton rejection
kernels alone in specverify's kernel shape.

    python gpu_runs/vllm_engines.py --out gpu_runs/results/vllm        # on a machine with CUDA vLLM
    python gpu_runs/vllm_engines.py --plan                             # what it would run (any machine)

Needs a CUDA build of vLLM in the running interpreter (the device machine has no network: carry
a venv that has it). The configurations are those of ``scripts/engines/matrix.py`` for vLLM
(methods none / ngram / draft model / EAGLE at k = 1, 3, 5, low- and high-overlap drafts, batch 1
and 64, with and without per-request seeds) with the same seeded models, plus
``specverify audit --kernel specverify.engines.vllm_kernels:triton_rejection_kernel`` with and
without draft probabilities, and the request-level audits of its server in batch-invariant mode
(``scripts/engines/request_level.py --batch-invariant``). On CPU (``--plan``) it prints the plan and checks that every
configuration and kernel entry point resolves, which is how it was tested before any GPU run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

KERNEL_AUDITS = (("triton_rejection_kernel", "--full-rule"), ("triton_rejection_kernel", "--one-hot"))


MATRIX = Path(__file__).resolve().parents[1] / "scripts" / "engines" / "matrix.py"
#: the request-level audits of vLLM's server in its batch-invariant mode (VLLM_BATCH_INVARIANT=1,
#: which vLLM implements for CUDA and ROCm only: the one place batch invariance is promised)
REQUESTS = MATRIX.with_name("request_level.py")


def plan() -> list[list[str]]:
    """Every command the GPU run executes, in order."""
    sys.path.insert(0, str(MATRIX.parent))
    from matrix import MATRICES

    cmds = [[sys.executable, str(MATRIX), "--engine", "vllm", "--only", c.key] for c in MATRICES["vllm"]()]
    for fn, flag in KERNEL_AUDITS:
        cmds.append(
            [sys.executable, "-m", "specverify.cli", "audit", "--kernel", f"specverify.engines.vllm_kernels:{fn}", flag]
        )
    cmds.append([sys.executable, str(REQUESTS), "--batch-invariant"])
    return cmds


def check_plan(cmds: list[list[str]]) -> None:
    """Resolve each entry point without running it (CPU-safe)."""
    from specverify.engines import vllm_kernels

    for fn, _ in KERNEL_AUDITS:
        assert callable(getattr(vllm_kernels, fn)), fn
    assert cmds, "empty plan"
    assert REQUESTS.exists(), REQUESTS


def run(out: Path) -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: use --plan on a machine without a GPU", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    rc = 0
    for cmd in plan():
        if str(MATRIX) in cmd:
            cmd = cmd + ["--out", str(out), "--work", str(out / "work"), "--record", str(out / "recorded")]
        elif str(REQUESTS) in cmd:
            cmd = cmd + ["--out", str(out / "requests-batch-invariant"), "--work", str(out / "work")]
        else:
            cmd = cmd + ["--json", str(out / f"kernel-{cmd[-1].lstrip('-')}.json")]
        print("$", " ".join(cmd), flush=True)
        rc |= subprocess.run(cmd).returncode not in (0, 1, 3, 5)  # verdict exit codes are results, not errors
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_runs/results/vllm"))
    ap.add_argument("--plan", action="store_true", help="print and check the plan; run nothing")
    a = ap.parse_args()
    if a.plan:
        cmds = plan()
        check_plan(cmds)
        print("\n".join(" ".join(c) for c in cmds))
        return 0
    return run(a.out)


if __name__ == "__main__":
    sys.exit(main())
