"""The walk of the CLI's options through specverify (issue 20): every call whose frame holds the
argparse Namespace, and every call whose frame holds the AuditConfig, during one ``specverify
audit --round MODULE:STEP --rounds 200`` run; prints the files visited, the stops (changes of
file) and how many of them return to a file already left.

    PYTHONPATH=tests/user_impls python scripts/args_walk.py round_numpy:step_correct
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from types import FrameType
from typing import Any

from specverify.audit.pipeline.config import AuditConfig
from specverify.cli import main

STOPS: dict[str, list[str]] = {"args": [], "cfg": []}


def _tracer(frame: FrameType, event: str, arg: Any) -> None:
    path = frame.f_code.co_filename
    if event != "call" or "/specverify/" not in path:
        return
    rel = path.split("/specverify/", 1)[1]
    values = list(frame.f_locals.values())
    if any(isinstance(v, argparse.Namespace) for v in values):
        STOPS["args"].append(rel)
    if any(isinstance(v, AuditConfig) for v in values):
        STOPS["cfg"].append(rel)


def _report(kind: str, files: list[str]) -> None:
    stops = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
    back = sum(1 for i, f in enumerate(stops) if f in stops[:i])
    print(f"{kind}: {len(set(files))} files, {len(stops)} stops, {back} back to a file left, {len(files)} calls")
    print("   " + " -> ".join(stops))


if __name__ == "__main__":
    sys.settrace(_tracer)  # type: ignore[arg-type]  # a tracer that returns None traces no lines
    with contextlib.suppress(SystemExit):
        main(["audit", "--round", sys.argv[1], "--rounds", "200", "--no-progress", "--no-diagnosis"])
    sys.settrace(None)
    for kind, files in STOPS.items():
        _report(kind, files)
