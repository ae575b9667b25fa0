"""Checkpoints: everything collected so far, keyed on what makes it valid to resume.

The fingerprint covers the implementation's identity (its adapter, spec, defining file and a hash
of that file), every option that changes the law or the plan, and the specverify version, so a
checkpoint of one implementation (or of other options) is refused for another. Writes are atomic
(a temporary file, then ``os.replace``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import SpecVerifyError
from ...harness import Generation
from ...stats import MultinomialEProcess
from .collect import UnitSample

if TYPE_CHECKING:
    from ..sources.adapters import Adapter
    from .config import AuditConfig

__all__ = [
    "fingerprint",
    "digest",
    "save_checkpoint",
    "load_checkpoint",
    "save_json_checkpoint",
    "load_json_checkpoint",
]

_ARRAYS = ("tokens", "row", "position", "sequence", "num_accepted")
_OPTIONAL = ("drafts", "law", "draft_rows", "round_id", "prompts", "paths", "bonus_rows")
_PLAN_INDEPENDENT = (
    "checkpoint",
    "resume",
    "progress",
    "budget_s",
    "workers",
    "isolate_batches",
    "diagnose",
    "fail_fast",
)


def fingerprint(adapter: Adapter, cfg: AuditConfig) -> str:
    from ... import __version__

    opts = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _PLAN_INDEPENDENT}
    opts["settings"] = [s.short() for s in cfg.settings] if cfg.settings else None
    blob = json.dumps(
        {"implementation": adapter.identity(), "options": opts, "specverify": __version__}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def save_checkpoint(path: str, fp: str, samples: dict[int, UnitSample]) -> None:
    arrays: dict[str, Any] = {}
    meta: dict[str, Any] = {"fingerprint": fp, "units": {}}
    for i, s in samples.items():
        g = s.gen
        for k in _ARRAYS:
            arrays[f"u{i}_{k}"] = getattr(g, k)
        for k in _OPTIONAL:
            if getattr(g, k) is not None:
                arrays[f"u{i}_{k}"] = getattr(g, k)
        meta["units"][str(i)] = {
            "rounds": g.rounds,
            "drafts_from_implementation": g.drafts_from_implementation,
            "next_batch": s.next_batch,
            "eprocess": s.eprocess.state(),
            "stopped_early": s.stopped_early,
            "complete": s.complete,
            "error": s.error,
            "unsupported": s.unsupported,
            "seconds": s.seconds,
        }
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:  # a file object: numpy adds no suffix
        np.savez(f, meta=json.dumps(meta), **arrays)  # uncompressed: written after every batch
    os.replace(tmp, path)


def load_checkpoint(path: str, fp: str) -> dict[int, UnitSample]:
    """The samples of a checkpoint written for the same fingerprint; a clear error otherwise."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in z.files if k != "meta"}
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        raise _unreadable(path, exc) from exc
    _check_fingerprint(path, meta, fp)
    out = {}
    for key, m in meta["units"].items():
        i = int(key)
        g = Generation(
            **{k: arrays[f"u{i}_{k}"] for k in _ARRAYS},
            rounds=m["rounds"],
            drafts=arrays.get(f"u{i}_drafts"),
            drafts_from_implementation=m["drafts_from_implementation"],
            law=arrays.get(f"u{i}_law"),
            draft_rows=arrays.get(f"u{i}_draft_rows"),
            bonus_rows=arrays.get(f"u{i}_bonus_rows"),
            round_id=arrays.get(f"u{i}_round_id"),
            prompts=arrays.get(f"u{i}_prompts"),
            paths=arrays.get(f"u{i}_paths"),
        )
        out[i] = UnitSample(
            g,
            m["next_batch"],
            MultinomialEProcess.from_state(m["eprocess"]),
            m["stopped_early"],
            m["complete"],
            m["error"],
            m["unsupported"],
            m["seconds"],
        )
    return out


def _unreadable(path: str, exc: Exception) -> SpecVerifyError:
    return SpecVerifyError(
        f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc}); delete it or pass another --checkpoint file"
    )


def _check_fingerprint(path: str, meta: dict[str, Any], fp: str) -> None:
    if meta.get("fingerprint") != fp:
        raise SpecVerifyError(
            f"checkpoint {path} belongs to another audit (a different implementation or source, other "
            "options, or another specverify version); delete it, or resume with the same implementation "
            "and options"
        )


def digest(payload: object) -> str:
    """The fingerprint of any JSON-able description of an audit (the specverify version included)."""
    from ... import __version__

    blob = json.dumps({"audit": payload, "specverify": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def save_json_checkpoint(path: str, fp: str, units: dict[str, Any]) -> None:
    """Audits whose samples are token ids only (LM audits: laws are recomputed on resume), atomically."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump({"fingerprint": fp, "units": units}, f)
    os.replace(tmp, path)


def load_json_checkpoint(path: str, fp: str) -> dict[str, Any]:
    """The units of a JSON checkpoint written for the same fingerprint; a clear error otherwise."""
    try:
        with open(path) as f:
            meta = json.load(f)
        units = meta["units"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _unreadable(path, exc) from exc
    _check_fingerprint(path, meta, fp)
    return dict(units)
