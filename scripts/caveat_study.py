"""How often a named diagnosis carries the 'leaves a significant deviation on the cells' caveat, by
the hand judgement of the study's records (kept by ``generalisation_study.py --records DIR``):

    PYTHONPATH=.:tests python scripts/caveat_study.py DIR [JUDGED.json]

Re-runs ``diagnose_audit`` on every ``DIR/*.pkl`` and prints one JSON line per record: the verdict,
the top candidate's explained share and cells p, whether the lead carries the caveat, and the
judgement (from JUDGED.json's rows, e.g. scripts/results/generalisation_study7_families.json, else
from generalisation_study.JUDGED, the blind judgements).
"""

import glob
import json
import os
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generalisation_study import JUDGED  # noqa: E402

from specverify.diagnosis import diagnose_audit  # noqa: E402

CAVEAT = "significant deviation on the cells (p "


def main(records: str, judged_file: str | None) -> None:
    judged = JUDGED
    if judged_file:
        judged = {r["spec"]: r["judged"] for r in json.loads(Path(judged_file).read_text())}
    for path in sorted(glob.glob(os.path.join(records, "*.pkl"))):
        spec = os.path.basename(path)[:-4].replace("__", ":", 1)
        with open(path, "rb") as f:
            d = diagnose_audit(pickle.load(f))
        c = d.candidates[0] if d.candidates else None
        row = {
            "spec": spec,
            "verdict": d.verdict,
            "judged": judged.get(spec, "?"),
            "explained": None if c is None else round(c.explained, 3),
            "cells_fit_p": None if c is None else float(f"{c.cells_fit_p:.2g}"),
            "caveat": CAVEAT in d.lead(),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
