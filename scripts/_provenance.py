"""What a result file records about the code it measured (results of one file can span sittings)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit(root: Path = ROOT) -> str:
    """The checkout's commit, with ' + changes' where its tracked files differ from it."""
    git = ["git", "-C", str(root)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"]).returncode != 0
    return (head or "unknown") + (" + changes" if dirty else "")
