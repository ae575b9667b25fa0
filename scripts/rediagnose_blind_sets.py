"""Re-diagnose the stored audit records of blind generalisation sets and compare each lead with the
blind one and its judgement (scripts/results/generalisation_study<N>_blind.json).

    .venv/bin/python scripts/rediagnose_blind_sets.py --sets 10 11 --records /tmp/rec   # reads /tmp/rec10, /tmp/rec11

The records are what ``scripts/generalisation_study.py --records DIR`` kept (pickles of the
diagnosis input, about 20 MB each, not committed). Not a blind measurement once the diagnosis has
changed after its authors read the set: it says which leads a change moved, and to what.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the records' implementations import from tests/


def _diagnose(path: str) -> tuple[str, str, str]:
    from specverify.diagnosis import diagnose_audit

    with open(path, "rb") as f:
        d = diagnose_audit(pickle.load(f))
    return path, (d.verdict if d else "none"), (d.lead() if d else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", type=int, required=True)
    ap.add_argument("--records", default="/tmp/rec", help="prefix of the record folders (<prefix><set>)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    for n in a.sets:
        blind = ROOT / f"scripts/results/generalisation_study{n}_blind.json"
        rows = {r["spec"].replace(":", "__"): r for r in json.loads(blind.read_text())}
        files = sorted(glob.glob(f"{a.records}{n}/*.pkl"))
        with concurrent.futures.ProcessPoolExecutor(a.jobs) as ex:
            for path, verdict, lead in ex.map(_diagnose, files):
                r = rows.get(Path(path).stem, {})
                old = r.get("diagnosis", "?")
                mark = "SAME" if old == verdict else "CHANGED"
                spec = Path(path).stem.replace("__", ":", 1)
                judged = r.get("judged", "?")
                print(f"{mark:8s} set{n} {spec[:70]:70s} blind={old} [{judged}] now={verdict}", flush=True)
                if mark == "CHANGED":
                    print("         ", lead[:300], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
