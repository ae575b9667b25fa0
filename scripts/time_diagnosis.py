"""Time the diagnosis alone on kept study records (``generalisation_study.py --records DIR``).

    PYTHONPATH=<tree>:<tree>/tests python scripts/time_diagnosis.py DIR/<spec>.pkl [...]

Each record is the typed ``AuditRecord`` an audit handed its diagnosis; this re-runs
``diagnose_audit`` on it and prints the seconds and the verdict, one record after another (run it
with nothing else on the machine, and against another tree through PYTHONPATH to compare).
"""

import pickle
import sys
import time

from specverify.diagnosis import diagnose_audit

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        record = pickle.load(f)
    t = time.perf_counter()
    d = diagnose_audit(record)
    print(f"{path}: {time.perf_counter() - t:.1f} s, {d.verdict}")
