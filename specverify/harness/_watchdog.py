"""Calls into an implementation under audit, guarded: an exception, or a call that does not
return within the per-call timeout, becomes an ImplementationError / ImplementationTimeout.

A driver that makes many calls runs them all in one daemon thread and ticks before each call
(:func:`run_guarded`): one thread per batch instead of one per call, which matters for pure-Python
implementations whose calls take tens of microseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ImplementationError, ImplementationTimeout, UnsupportedSettingError

__all__ = ["call_with_timeout", "run_guarded", "Ticker"]

_T = TypeVar("_T")


def call_with_timeout(fn: Callable[..., _T], *args: Any, timeout: float | None, what: str, **kw: Any) -> _T:
    """Run fn in a daemon thread; raise ImplementationTimeout / ImplementationError on trouble."""

    def body(tick: Ticker) -> _T:
        tick()
        return fn(*args, **kw)

    return run_guarded(body, timeout=timeout, what=what)


class Ticker:
    """Counts calls; ``last`` is when the current one started."""

    def __init__(self) -> None:
        self.calls, self.last = 0, time.monotonic()

    def __call__(self) -> None:
        self.calls += 1
        self.last = time.monotonic()


def run_guarded(body: Callable[[Ticker], _T], *, timeout: float | None, what: str) -> _T:
    """Run ``body(tick)``; ``tick()`` marks the start of each call into the implementation. A call
    running longer than ``timeout`` seconds raises ImplementationTimeout (the thread is abandoned)."""
    tick = Ticker()
    if timeout is None:
        try:
            return body(tick)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - anything the implementation raises is a finding
            raise _finding(exc, what) from exc
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = body(tick)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    while True:
        t.join(min(timeout, 0.5))
        if not t.is_alive():
            break
        if time.monotonic() - tick.last > timeout:
            raise ImplementationTimeout(
                f"{what} did not return within {timeout:g} s (per-call timeout, call {tick.calls}); "
                "raise --call-timeout if it is merely slow"
            )
    if "error" in box:
        raise _finding(box["error"], what) from box["error"]
    value: _T = box["value"]
    return value


def _finding(exc: BaseException, what: str) -> ImplementationError:
    """What an exception inside the implementation becomes in the verdict."""
    if isinstance(exc, ImplementationError):  # the driver's own findings (malformed output, ...)
        return exc
    if isinstance(exc, NotImplementedError):
        return UnsupportedSettingError(
            f"{what} does not support this setting (it raised NotImplementedError: {_text(exc)})"
        )
    return ImplementationError(f"{what} raised {type(exc).__name__}: {_text(exc)}")


def _text(exc: BaseException) -> str:
    """The exception's message; its type alone when its __str__ raises (it is the implementation's object)."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return f"(an unprintable {type(exc).__name__})"
