"""A process speaking the JSON-lines protocol in logits mode (--cmd ... --logits): it receives raw
logits and the settings and applies them itself; the audit compares with target-only sampling
under the same settings (the parity grid by default)."""

import subprocess
import sys
from pathlib import Path

from specverify import SamplingSettings
from specverify.audit import audit
from specverify.audit.sources.adapters import SubprocessAdapter

ROOT = Path(__file__).resolve().parents[1]
CLIENT = f"{sys.executable} {ROOT / 'tests/clients/logits_kernel.py'}"
OPTS = dict(eps=0.15, settings=(SamplingSettings(), SamplingSettings(temperature=0.6)), batch=2000, exact_checks=False)


def test_a_correct_logits_process_passes_and_a_draft_only_temperature_fails():
    good, bad = SubprocessAdapter(CLIENT, logits=True), SubprocessAdapter(CLIENT + " --bug", logits=True)
    try:
        assert audit(good, **OPTS).status == "PASS"
        v = audit(bad, **OPTS, fail_fast=True)
        assert v.status == "FAIL" and "temperature=0.6" in v.evidence[0], v.headline()
    finally:
        good.close(), bad.close()


def test_cli_cmd_with_logits():
    exe = Path(sys.executable).with_name("specverify")
    r = subprocess.run(
        [
            str(exe),
            "audit",
            "--cmd",
            CLIENT + " --bug",
            "--logits",
            "--temperature",
            "0.6",
            "--eps",
            "0.1",
            "--no-progress",
            "--fail-fast",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "FAIL in " in r.stdout
