"""An engine's HTTP server as a subprocess for the duration of a block (vLLM's, llama-cpp-python's)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ImplementationError

__all__ = ["free_port", "server_process"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def server_process(
    cmd: Sequence[str], *, url: str, health: str, who: str, timeout: float, log: str | os.PathLike[str] | None = None
) -> Iterator[str]:
    """Start ``cmd`` in its own session, wait until ``url + health`` answers 200, yield ``url``;
    the process group is stopped on the way out. ``log`` takes the server's output."""
    out: Any = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(url + health, proc, timeout, who)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        if log:
            out.close()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float, who: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise ImplementationError(f"the {who} server exited with code {proc.returncode} before it was healthy")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                return
        time.sleep(1.0)
    raise ImplementationError(f"the {who} server at {url} was not healthy after {timeout:g} s")
