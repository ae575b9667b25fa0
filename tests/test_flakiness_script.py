"""scripts/flakiness.py: an interrupted study resumed with --resume equals the uninterrupted one
(same seeds per run, every run's outcome kept), and a file it cannot continue is a clear error."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "flakiness.py"


def _study(tmp_path: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_tiny.py"
    test.write_text("def test_even(specverify_seed):\n    assert specverify_seed >= 0\n")
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args, str(test)], capture_output=True, text=True
    )


def test_a_resumed_study_draws_the_seeds_of_an_uninterrupted_one(tmp_path):
    whole, parts = tmp_path / "whole.json", tmp_path / "parts.json"
    assert _study(tmp_path, whole, "--runs", "3").returncode == 0
    assert _study(tmp_path, parts, "--runs", "1").returncode == 0
    r = _study(tmp_path, parts, "--runs", "3", "--resume")
    assert r.returncode == 0, r.stderr
    a, b = json.loads(whole.read_text()), json.loads(parts.read_text())
    seeds = [[(x["specverify_seed"], x["hypothesis_seed"]) for x in d["runs"]] for d in (a, b)]
    assert seeds[0] == seeds[1] and len(seeds[0]) == 3
    assert a["seen"] == b["seen"] and list(a["seen"].values()) == [[0, 1, 2]]
    assert "run 2/3" in r.stdout and "run 1/3" not in r.stdout  # the first run was not repeated
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert {x["commit"].split()[0] for x in b["runs"]} == {head.stdout.strip()}  # what each run tested
    # where each run's time went: the one test, with its seconds
    assert all(x["slowest"][0][0].endswith("test_even") and x["slowest"][0][1] >= 0 for x in b["runs"]), b["runs"]


def test_resume_of_a_study_written_with_another_seed_is_refused(tmp_path):
    out = tmp_path / "s.json"
    assert _study(tmp_path, out, "--runs", "1").returncode == 0
    r = _study(tmp_path, out, "--runs", "2", "--seed", "5", "--resume")
    assert r.returncode != 0 and "another --seed (0)" in r.stderr and "start a new study" in r.stderr
