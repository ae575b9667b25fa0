"""Fail when a function is longer than 60 lines without a stated reason (issue 13).

    python scripts/check_function_length.py [--max N] PATH...

A function's length runs from its ``def`` line to its last line. A longer function passes when a
comment ``# long: <reason>`` stands on the line above it (or above its decorators), on its ``def``
line, or on the first line of its body; the reason must not be empty.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

MARK = re.compile(r"#\s*long:\s*\S")
SKIP_PARTS = {".venv", ".engines", "__pycache__", "build", "dist"}


def too_long(path: Path, limit: int) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for fn in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
        if length <= limit:
            continue
        first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        window = lines[max(0, first - 2) : fn.body[0].lineno]  # the line above through the body's first line
        if not any(MARK.search(line) for line in window):
            out.append(
                f"{path}:{fn.lineno}: {fn.name} is {length} lines (over {limit}); split it or say why: # long: ..."
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--max", type=int, default=60, help="longest function allowed without a reason (lines)")
    args = ap.parse_args(argv)
    files: list[Path] = []
    for p in args.paths:
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    problems = [x for f in files if not SKIP_PARTS & set(f.parts) for x in too_long(f, args.max)]
    ok = f"function length: {len(files)} files, none over {args.max} lines unexplained"
    print("\n".join(problems) if problems else ok)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
