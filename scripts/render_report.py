"""Render PASS, FAIL and INCONCLUSIVE HTML reports in headless Chromium and check that they load cleanly.

    python scripts/render_report.py [--out scripts/results/screenshots] [--budget 60]

Runs the installed CLI on four cases: ``specverify audit reference`` (must PASS), a catalogued bug
``residual_not_normalised`` (must FAIL in a distribution test, with cells), a user-style round
step ``tests/user_impls/round_numpy.py:step_residual_from_p`` with ``--rounds 1500`` (FAIL with
its diagnosis) and ``reference --rounds 300`` (INCONCLUSIVE). Each report is screenshot with
``chromium --headless --screenshot`` at 1280 x 2400; the script fails when Chromium logs a console
error or an uncaught exception, when a screenshot is missing, when the report's headline is not
word for word the terminal's and the JSON's, or when the plain-words statement is missing.
Screenshots go to ``--out`` (the reports too with ``--reports DIR``); look at the PNGs.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "specverify"
CASES = [
    ("pass", ["reference"], 0),
    ("fail", ["residual_not_normalised", "--no-diagnosis"], 1),
    ("diagnosed_fail", ["--round", "user_impls.round_numpy:step_residual_from_p", "--rounds", "1500"], 1),
    ("inconclusive", ["reference", "--rounds", "300"], 3),
]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def audit(case, args, want_code, out: Path, budget: float) -> tuple[Path, str]:
    html_path, json_path = out / f"{case}.html", out / f"{case}.json"
    r = subprocess.run(
        [
            str(CLI),
            "audit",
            *args,
            "--html",
            str(html_path),
            "--json",
            str(json_path),
            "--budget",
            str(budget),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT / "tests")},  # tests/user_impls
        timeout=600,
    )
    if r.returncode != want_code:
        raise SystemExit(f"{case}: exit code {r.returncode}, expected {want_code}\n{r.stdout}\n{r.stderr}")
    terminal = [ln for ln in r.stdout.splitlines() if ln.startswith(("PASS", "FAIL", "INCONCLUSIVE"))][-1]
    in_json = json.loads(json_path.read_text())["headline"]
    m = re.search(r'<h2 class="headline [A-Z]+">(.*?)</h2>', html_path.read_text(), re.S)
    in_html = html.unescape(m.group(1)) if m else None
    if not (terminal == in_json == in_html):
        raise SystemExit(f"{case}: headlines differ\n terminal: {terminal}\n json:     {in_json}\n html:     {in_html}")
    if '<p class="plain">' not in html_path.read_text():
        raise SystemExit(f"{case}: the report has no plain-words statement")
    return html_path, terminal


def screenshot(browser: str, page: Path, png: Path) -> list[str]:
    """Screenshot the page; return the console errors Chromium logged."""
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1280,2400",
                f"--screenshot={png}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    log = r.stdout + r.stderr
    errors = [
        ln for ln in log.splitlines() if "Uncaught" in ln or "ERROR:CONSOLE" in ln or ("CONSOLE" in ln and "rror" in ln)
    ]
    if r.returncode != 0:
        errors.append(f"chromium exited {r.returncode}: {log[-500:]}")
    if not png.exists() or png.stat().st_size < 10_000:
        errors.append(f"no screenshot at {png} (or an empty one)")
    return errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "scripts" / "results" / "screenshots")
    ap.add_argument(
        "--reports", type=Path, help="keep the HTML and JSON reports in this folder (default: a temporary one)"
    )
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per audit (a cap)")
    a = ap.parse_args(argv)
    browser = chromium()
    if browser is None:
        print("render_report: no chromium on PATH; install it (apt-get install -y chromium)", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.TemporaryDirectory()
    reports = a.reports or Path(tmp.name)
    reports.mkdir(parents=True, exist_ok=True)
    bad = False
    for case, args, code in CASES:
        page, head = audit(case, args, code, reports, a.budget)
        png = a.out / f"{case}.png"
        errors = screenshot(browser, page, png)
        print(f"{case}: {png} ({png.stat().st_size if png.exists() else 0:,} bytes); headline: {head[:120]}")
        for e in errors:
            print(f"  console: {e}")
        bad |= bool(errors)
    print("render_report:", "console errors (see above)" if bad else "every report loads without console errors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
