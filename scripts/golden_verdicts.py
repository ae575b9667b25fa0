"""Rewrite tests/golden/verdicts.json: the golden verdicts that tests/test_golden_verdicts.py keeps equal.

    .venv/bin/python scripts/golden_verdicts.py            # all cases
    .venv/bin/python scripts/golden_verdicts.py NAME ...   # only these (the others are kept)

Run it only when a change of verdicts is meant, and say why in the commit message.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from golden_cases import GOLDEN, cases, normalised  # noqa: E402


def main(names: list[str]) -> None:
    table = cases()
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; the cases are: {', '.join(table)}")
    old = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    new = dict(old)
    for name in names or list(table):
        t = time.perf_counter()
        v = table[name]()
        new[name] = normalised(v.to_dict())
        print(f"{name:45s} {v.status:12s} {time.perf_counter() - t:6.1f} s", flush=True)
    new = {k: new[k] for k in table if k in new}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(new)} verdicts to {GOLDEN}")


if __name__ == "__main__":
    main(sys.argv[1:])
