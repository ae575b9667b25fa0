"""Isolation: run a call into the implementation in a fresh fork of this process.

An implementation may keep a state across calls (a cache, a context) and may end its process
(``os._exit``, a native crash). Run in a fork, a call starts from the state of the process that
forked, whatever ran before in other forks, and a process that ends takes only the fork with it.
The fork's outcome comes back through a file: its value, or what it raised (raised again here).
Linux and other POSIX systems; a fork costs about 5 ms on the development machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from typing import TYPE_CHECKING, Any

from ..errors import ImplementationError

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

__all__ = ["call_in_fork", "fork_to_file", "forked_in_order", "load_outcome", "write_outcome", "ended_inside"]


@dataclasses.dataclass
class _Raised:
    """What the forked call raised, raised again by :func:`load_outcome`."""

    exc: BaseException


def ended_inside(what: str, how: str) -> ImplementationError:
    """The finding for a fork that ended before its call returned (``how``: its exit status or signal)."""
    return ImplementationError(
        f"the process {what} ended inside the implementation ({how}) before returning; an implementation "
        "must return or raise, never end its process"
    )


def fork_to_file(fn: Callable[[], object], path: str) -> str | None:
    """Run ``fn()`` in a fresh fork; its value, or what it raised, is pickled to ``path`` (an empty file
    that exists). Returns None, or how the fork ended ("exit status 3", "killed by SIGKILL") when it
    ended without writing its outcome. The fork dies with this process."""
    _, status = os.waitpid(_start_fork(fn, path), 0)
    return _how_it_ended(status, path)


def _start_fork(fn: Callable[[], object], path: str) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(fn, path, parent)  # never returns
    return pid


def _how_it_ended(status: int, path: str) -> str | None:
    if status == 0 and os.path.getsize(path):
        return None
    code = os.waitstatus_to_exitcode(status)
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def forked_in_order(
    jobs: Sequence[Callable[[], object]], *, workers: int, what: Callable[[int], str]
) -> Generator[Any, None, None]:
    """Run each job in a fresh fork, at most ``workers`` at once, and yield their values in the jobs'
    order, whatever order they finish in: so a consumer that stops early (closing the iterator kills
    the forks still running) sees what a serial loop would have. A fork that ended without returning
    yields :func:`ended_inside`'s ImplementationError (``what(i)``: what job ``i`` was doing); what a
    job raised is raised here."""
    paths: list[str] = []
    running: dict[int, int] = {}  # job -> pid of its fork
    ended: dict[int, str | None] = {}  # job -> how its fork ended (None: it wrote its outcome)
    try:
        for i in range(len(jobs)):
            while i not in ended:
                while len(paths) < len(jobs) and len(running) < workers:
                    fd, path = tempfile.mkstemp(prefix="specverify-", suffix=".outcome")
                    os.close(fd)
                    paths.append(path)
                    running[len(paths) - 1] = _start_fork(jobs[len(paths) - 1], path)
                _reap(running, ended, paths)
            how = ended.pop(i)
            yield ended_inside(what(i), how) if how is not None else load_outcome(paths[i])
    finally:
        for pid in running.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for leftover in (p + tail for p in paths for tail in ("", ".part")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _reap(running: dict[int, int], ended: dict[int, str | None], paths: list[str]) -> None:
    """Move the forks that have ended from ``running`` to ``ended``; wait a little if none has. Each
    fork is polled by its pid: another child of this process is never reaped here."""
    reaped = False
    for job, pid in list(running.items()):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ended[job], reaped = _how_it_ended(status, paths[job]), True
            del running[job]
    if not reaped:
        time.sleep(0.01)


def load_outcome(path: str) -> Any:
    """The value :func:`fork_to_file` wrote to ``path`` (the file is removed); what the call raised
    is raised."""
    with open(path, "rb") as f:
        out = pickle.load(f)
    os.unlink(path)
    if isinstance(out, _Raised):
        raise out.exc
    return out


def call_in_fork(fn: Callable[..., Any], *args: Any, what: str, **kw: Any) -> Any:
    """``fn(*args, **kw)`` in a fresh fork: its value, or what it raised; ImplementationError when the
    fork ended inside the call (``what`` says what it was doing: "running the exact check 'x'")."""
    fd, path = tempfile.mkstemp(prefix="specverify-", suffix=".outcome")
    os.close(fd)
    try:
        if (how := fork_to_file(lambda: fn(*args, **kw), path)) is not None:
            raise ended_inside(what, how)
        return load_outcome(path)
    finally:
        for leftover in (path, path + ".part"):  # .part: a fork killed while writing
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _child(fn: Callable[[], object], path: str, parent: int) -> None:
    """The fork's body: it leaves through ``os._exit``, what the implementation printed flushed."""
    code = 1
    try:
        _die_with(parent)
        out: object = fn()
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, raised there
        out = _Raised(exc)
    try:
        try:
            write_outcome(path, out)
        except Exception as exc:  # noqa: BLE001 - what does not pickle goes back as text
            detail = "".join(traceback.format_exception(out.exc)) if isinstance(out, _Raised) else repr(exc)
            write_outcome(path, _Raised(RuntimeError(f"an outcome could not be sent back from its fork: {detail}")))
        code = 0
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing to keep
                stream.flush()
        os._exit(code)


def _die_with(parent: int) -> None:
    """Linux: SIGKILL this process when ``parent`` ends (a worker ended mid-batch leaves nothing running)."""
    if sys.platform != "linux":
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent ended before the call above
        os._exit(1)


def write_outcome(path: str, obj: object) -> None:
    """Write ``obj`` to ``path`` whole or not at all (a rename is atomic)."""
    with open(path + ".part", "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".part", path)
