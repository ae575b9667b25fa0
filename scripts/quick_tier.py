"""Write tests/heavy_tests.txt, the tests `./run test --quick` leaves out, from a measured run:

    .venv/bin/python -m pytest -n 2 --dist worksteal tests properties --durations=0 -q > durations.txt
    .venv/bin/python scripts/quick_tier.py durations.txt [--budget 120]

The quick tier keeps the fastest tests until their summed time reaches the budget (seconds of
test time; two workers halve the wall time), and always keeps the fastest test of every module,
so every module is touched. A test missing from the log (new since) is kept.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "heavy_tests.txt"
#: a --durations line; the node id runs to the end of the line (parametrised ids may hold spaces)
LINE = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(.+?)\s*$")


def durations(log: str) -> dict[str, float]:
    times: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if m := LINE.match(line):
            times[m[3]] += float(m[1])
    return dict(times)


def heavy(times: dict[str, float], budget: float) -> list[str]:
    by_module: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for node, t in times.items():
        by_module[node.split("::")[0]].append((t, node))
    keep = {min(tests)[1] for tests in by_module.values()}  # the fastest of every module
    spent = sum(times[n] for n in keep)
    for t, node in sorted((t, n) for n, t in times.items() if n not in keep):
        if spent + t > budget:
            break
        keep.add(node)
        spent += t
    return sorted(set(times) - keep)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--budget", type=float, default=120.0)
    a = ap.parse_args()
    times = durations(Path(a.log).read_text())
    out = heavy(times, a.budget)
    kept = sum(t for n, t in times.items() if n not in set(out))
    OUT.write_text(
        "# tests `./run test --quick` leaves out; written by scripts/quick_tier.py from a measured run\n"
        + "".join(f"{n}\n" for n in out)
    )
    print(f"{len(times) - len(out)} tests kept ({kept:.0f} s of test time), {len(out)} left out -> {OUT}")


if __name__ == "__main__":
    main()
