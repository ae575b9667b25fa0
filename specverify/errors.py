"""User-facing errors. Every message says what was wrong and how to fix it.

All classes derive from :class:`SpecVerifyError`; the input-validation ones also derive from
:class:`ValueError` so that ``except ValueError`` in user code keeps working.
"""

from __future__ import annotations

__all__ = [
    "SpecVerifyError",
    "InvalidDistributionError",
    "InvalidLogitsError",
    "VocabularyMismatchError",
    "ShapeError",
    "InvalidSettingsError",
    "InvalidDraftError",
    "ImplementationError",
    "UnsupportedSettingError",
    "ImplementationTimeout",
    "MalformedOutputError",
]


class SpecVerifyError(Exception):
    """Base class of every error specverify raises on purpose."""


class InvalidDistributionError(SpecVerifyError, ValueError):
    """A probability vector is NaN/infinite, negative, empty or does not sum to one."""


class InvalidLogitsError(SpecVerifyError, ValueError):
    """Logits contain NaN or +inf, or a row is entirely -inf."""


class VocabularyMismatchError(SpecVerifyError, ValueError):
    """Draft and target distributions have different vocabulary sizes."""


class ShapeError(SpecVerifyError, ValueError):
    """An array has the wrong number of dimensions or the wrong size along one of them."""


class InvalidSettingsError(SpecVerifyError, ValueError):
    """Sampling settings out of range (negative temperature, top_p outside (0, 1], ...); ``field``
    names the setting at fault (a SamplingSettings field) when one is."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidDraftError(SpecVerifyError, ValueError):
    """A draft token is out of range, or was proposed although its draft probability is 0."""


class ImplementationError(SpecVerifyError):
    """The implementation under audit raised. The original exception is chained."""


class ImplementationTimeout(ImplementationError):
    """The implementation under audit did not return within its per-call timeout."""


class MalformedOutputError(ImplementationError):
    """The implementation under audit returned output of the wrong shape, type or range."""


class UnsupportedSettingError(ImplementationError):
    """The implementation declined a setting (it raised NotImplementedError): reported as
    "unsupported", never as a FAIL."""
