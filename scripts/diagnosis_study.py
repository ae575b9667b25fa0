"""How often the diagnosis of a FAIL names the right root cause.

    python scripts/diagnosis_study.py [--jobs 2] [--only SUBSTR[,SUBSTR]] [--resume] [--out FILE]

Every catalogued bug (``specverify audit NAME``, the catalogue's own pair and settings) and every
buggy implementation of tests/user_impls (the CLI command of scripts/user_suite.py, same rounds)
is audited through the installed CLI with ``--json``; the diagnosis in the verdict is compared
with the true class (the catalogue name, or the user-style suite's class through
``tests/user_impls/aliases.py``). Per bug: verdict, the true class, the top three candidates,
and whether the truth is first / in the top three.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from user_impls import CASES  # noqa: E402
from user_impls.aliases import class_of  # noqa: E402
from user_suite import ROUNDS, command  # noqa: E402

from specverify.catalogue import BUGS  # noqa: E402


def cases() -> list[dict]:
    exe = str(Path(sys.executable).with_name("specverify"))
    out = [{"id": b.name, "truth": b.name, "cmd": [exe, "audit", b.name, "--no-progress"]} for b in BUGS]
    for c in CASES:
        if c["buggy"]:
            truth = class_of(c["bug_class"])
            out.append({"id": c["spec"], "truth": truth, "cmd": command(c, ROUNDS)})
    return out


def run(case: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        js = Path(tmp) / "v.json"
        t = time.perf_counter()
        r = subprocess.run([*case["cmd"], "--json", str(js)], capture_output=True, text=True, env=env, cwd=ROOT)
        v = json.loads(js.read_text()) if js.exists() else {}
    d = v.get("diagnosis") or {}
    cands = d.get("candidates", [])
    top = [c["class"] for c in cands][:3]
    named = d.get("verdict", "none")
    llr = {c["class"]: c["log_likelihood_ratio_vs_target"] for c in cands}
    return {
        **case,
        "status": v.get("status", f"exit {r.returncode}"),
        "named": named,
        "top3": top,
        "top1_ok": named == case["truth"],
        "top3_ok": case["truth"] in top or named == case["truth"],
        "llr_top": cands[0]["log_likelihood_ratio_vs_target"] if cands else None,
        "explained_top": cands[0]["explained_share"] if cands else None,
        "llr_truth": llr.get(case["truth"]),
        "seconds": round(time.perf_counter() - t, 1),
        "stderr": r.stderr[-300:] if not v else "",
    }


def _num(x) -> str:
    try:
        return f"{float(x):.4g}"
    except (TypeError, ValueError):
        return "-" if x is None else str(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--only", default="", help="only the bugs whose id contains this (comma: any of several, run in that order)"
    )
    ap.add_argument("--out", default=str(ROOT / "scripts/results/diagnosis_study.txt"))
    ap.add_argument("--resume", action="store_true", help="keep the rows of OUT.partial and run only the others")
    a = ap.parse_args(argv)
    keys = a.only.split(",")
    todo = [c for c in cases() if any(k in c["id"] for k in keys)]
    todo.sort(key=lambda c: next(i for i, k in enumerate(keys) if k in c["id"]))  # in the order of --only
    rows, lines = [], []
    if a.resume and Path(a.out + ".partial").exists():  # rows of an interrupted run are kept, not rerun
        for ln in Path(a.out + ".partial").read_text().splitlines():
            lines.append(ln)
            rows.append({"top1_ok": ln.startswith("top1"), "top3_ok": not ln.startswith("MISS")})
        done = {ln.split(" truth ")[0].split()[-1] for ln in lines}
        todo = [c for c in todo if c["id"] not in done]
    with (
        concurrent.futures.ThreadPoolExecutor(a.jobs) as ex,
        open(a.out + ".partial", "a" if a.resume else "w") as part,
    ):
        for r in ex.map(run, todo):  # each row written as it completes: a long study can be read mid-way
            mark = "top1" if r["top1_ok"] else ("top3" if r["top3_ok"] else "MISS")
            lines.append(
                f"{mark:4s} {r['status']:5s} {r['seconds']:6.1f}s  {r['id']:52s} truth {r['truth']:36s} "
                f"named {r['named']:36s} top3 {', '.join(r['top3'])}  "
                f"LLR top {_num(r['llr_top'])} (explains {_num(r['explained_top'])}), truth {_num(r['llr_truth'])}"
                + (f"  [{r['stderr'].strip()[-120:]}]" if r["stderr"] else "")
            )
            rows.append(r)
            part.write(lines[-1] + "\n")
            part.flush()
    n = len(rows)
    t1, t3 = sum(r["top1_ok"] for r in rows), sum(r["top3_ok"] for r in rows)
    lines.append(f"{n} bugs: top-1 {t1}/{n} ({t1 / max(n, 1):.0%}), top-3 {t3}/{n} ({t3 / max(n, 1):.0%})")
    text = "\n".join(lines)
    print(text)
    Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
