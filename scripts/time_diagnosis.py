"""Time the diagnosis alone on kept study records (``generalisation_study.py --records DIR``).

    PYTHONPATH=<tree>:<tree>/tests python scripts/time_diagnosis.py [--json OUT] DIR/<spec>.pkl [...]

Each record is the typed ``AuditRecord`` an audit handed its diagnosis; this re-runs
``diagnose_audit`` on it and prints the seconds and the verdict, one record after another (run it
with nothing else on the machine, and against another tree through PYTHONPATH to compare).
``--json OUT`` also writes each diagnosis (``to_dict``, keys sorted) to ``OUT/<record>.json``, so
that two trees' diagnoses can be compared byte for byte (``cmp``).
"""

import argparse
import json
import pickle
import time
from pathlib import Path

from specverify.diagnosis import diagnose_audit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--json", default="", help="a folder to write each diagnosis to, as JSON")
    a = ap.parse_args()
    for path in a.records:
        with open(path, "rb") as f:
            record = pickle.load(f)
        t = time.perf_counter()
        d = diagnose_audit(record)
        print(f"{path}: {time.perf_counter() - t:.1f} s, {d.verdict if d else None}", flush=True)
        if a.json:
            out = Path(a.json) / (Path(path).name + ".json")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(d.to_dict() if d else None, indent=1, sort_keys=True, default=repr))


if __name__ == "__main__":
    main()
