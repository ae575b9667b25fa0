"""Issue 25's generalisation study: the diagnosis on bugs written for the study, blind to it.

    python scripts/generalisation_study.py [--only SUBSTR[,SUBSTR]] [--eps 0.1] [--out FILE]

``tests/study_bugs`` holds round steps written by someone who had not read the diagnosis code
(each modelled on a real report, its family and mechanism stated beside it). Each buggy one is
audited through the installed CLI (module form, ``--eps 0.1 --workers 1``, diagnosis on, JSON) and
the diagnosis recorded: its verdict (a class, a fitted mechanism with its parts, or "not a known
class"), its lead and the top three candidates. Whether the verdict names the stated mechanism is
a judgement of the lead against the study's mechanism sentence, made by hand and kept in
``JUDGED`` (top1 / top3 / unknown / wrong), so that the table and its counts regenerate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from study_bugs import STUDY  # noqa: E402

#: spec -> judgement of the diagnosis against the stated mechanism (filled after reading each lead)
JUDGED: dict[str, str] = {}


def run(case: dict, eps: float) -> dict:
    exe = str(Path(sys.executable).with_name("specverify"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"), OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "v.json"
        cmd = [exe, "audit", "--round", case["spec"], *case["flags"], "--eps", str(eps), "--workers", "1"]
        t = time.perf_counter()
        r = subprocess.run([*cmd, "--no-progress", "--json", str(out)], capture_output=True, text=True, env=env)
        secs = time.perf_counter() - t
        v = json.loads(out.read_text()) if out.exists() else {}
    d = v.get("diagnosis") or {}
    cands = d.get("candidates") or []
    return {
        "spec": case["spec"],
        "family": case["family"],
        "truth": case["mechanism"],
        "verdict": v.get("status", f"exit {r.returncode}"),
        "seconds": round(secs, 1),
        "diagnosis": d.get("verdict", ""),
        "parts": (cands[0].get("parts") if cands else None) or {},
        "top3": [c["class"] for c in cands[:3]],
        "lead": d.get("lead", ""),
        "judged": JUDGED.get(case["spec"], "not judged"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--out", default=str(ROOT / "scripts" / "results" / "generalisation_study.json"))
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    rows = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else []
    done = {r["spec"] for r in rows}
    for case in STUDY:
        if not case["buggy"] or case["spec"] in done or (only and not any(s in case["spec"] for s in only)):
            continue
        row = run(case, args.eps)
        rows.append(row)
        Path(args.out).write_text(json.dumps(rows, indent=1))
        print(f"{row['spec']:55s} {row['verdict']:5s} {row['seconds']:6.0f} s  {row['diagnosis'][:70]}", flush=True)
    known = [r for r in rows if r["diagnosis"] not in ("", "not a known class")]
    print(f"{len(rows)} buggy study steps: {len(known)} named (a class or a mechanism), {len(rows) - len(known)} not")


if __name__ == "__main__":
    main()
