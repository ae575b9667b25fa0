"""Per-token logprobs a generator returns beside its ids, checked against the target's law.

A generator (or endpoint) may return, instead of a list of ids, a mapping (or an object with the
same attributes)::

    {"ids": [t_1, ..., t_m], "logprobs": [l_1, ..., l_m], "top_logprobs": [{id: l, ...}, ...]}

``logprobs[j]`` is the log-probability of ``t_j`` and ``top_logprobs[j]`` (optional) that of each
listed id, all at the true prefix (prompt + t_1 .. t_{j-1}). Each is compared with the auditor's
float64 law: the processed law of the request's settings (``logprobs_mode = "processed"``, the
default; vLLM's ``processed_logprobs``) or the raw model law (``"raw"``: log-softmax of the logits
before penalties, temperature and filters; vLLM's ``raw_logprobs``), declared as an attribute of
the generator. A difference beyond ``logprob_tol`` nats is a finding (exact: no statistics), as
are logprobs that are not one finite number <= 0 per token (llama.cpp#27972 returned 0.0 for every
token under speculation; vllm#34497 returned wrong values once speculation served requests with
logprobs).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ...errors import MalformedOutputError
from ...harness import as_token_ids

__all__ = ["RequestOutput", "parse_output", "logprob_problem", "LogprobsMode", "logprobs_mode", "reference_laws"]

LogprobsMode = Literal["processed", "raw"]


@dataclasses.dataclass(frozen=True)
class RequestOutput:
    """One request's output: ids, and the logprobs when the generator returned them."""

    ids: list[int]
    logprobs: list[float] | None = None
    top_logprobs: list[dict[int, float]] | None = None


def logprobs_mode(generate: Any) -> LogprobsMode:
    mode = getattr(generate, "logprobs_mode", "processed")
    if mode not in ("processed", "raw"):
        raise MalformedOutputError(f"logprobs_mode={mode!r}: declare 'processed' (the default) or 'raw'")
    return "raw" if mode == "raw" else "processed"


def parse_output(out: Any, name: str) -> RequestOutput:
    """``out`` as ids (a list or 1-D integer array) or ids with logprobs (module docstring)."""
    fields = _fields(out)
    if fields is None:
        return RequestOutput(as_token_ids(out, name).tolist())
    ids = as_token_ids(fields["ids"], name).tolist()
    lps = _logprobs(fields.get("logprobs"), len(ids), name)
    top = _top(fields.get("top_logprobs"), len(ids), name)
    return RequestOutput(ids, lps, top)


def _fields(out: Any) -> dict[str, Any] | None:
    if isinstance(out, Mapping):
        src: Any = out
        get = src.get
    elif any(hasattr(out, k) for k in ("ids", "token_ids")) and not isinstance(out, (list, tuple, np.ndarray)):
        get = lambda k: getattr(out, k, None)  # noqa: E731 - one accessor for both shapes
    else:
        return None
    ids = get("ids") if get("ids") is not None else get("token_ids")
    if ids is None:
        raise MalformedOutputError(
            f"the output has no 'ids' (or 'token_ids'): {sorted(out) if isinstance(out, Mapping) else out!r}"
        )
    return {"ids": ids, "logprobs": get("logprobs"), "top_logprobs": get("top_logprobs")}


def _logprobs(x: Any, m: int, name: str) -> list[float] | None:
    if x is None:
        return None
    vals = [float(v) for v in np.asarray(x, dtype=np.float64).reshape(-1)]
    if len(vals) != m:
        raise MalformedOutputError(f"{name} returned {len(vals)} logprobs for {m} ids; return one per id")
    return vals


def _top(x: Any, m: int, name: str) -> list[dict[int, float]] | None:
    if x is None:
        return None
    rows = [dict(r) if isinstance(r, Mapping) else {int(i): float(v) for i, v in r} for r in x]
    if len(rows) != m:
        raise MalformedOutputError(f"{name} returned {len(rows)} top_logprobs entries for {m} ids; return one per id")
    return [{int(i): float(v) for i, v in r.items()} for r in rows]


def logprob_problem(out: RequestOutput, law: np.ndarray, *, tol: float, mode: LogprobsMode) -> str | None:
    """The first reported logprob of ``out`` farther than ``tol`` nats from log ``law`` [m, V] (the
    target's law at each true prefix), or None. Counts how many differ."""
    checks: list[tuple[int, int, float]] = []  # (position, id, reported)
    if out.logprobs is not None:
        checks += [(j, t, lp) for j, (t, lp) in enumerate(zip(out.ids, out.logprobs, strict=True))]
    for j, row in enumerate(out.top_logprobs or []):
        checks += [(j, t, lp) for t, lp in row.items() if 0 <= t < law.shape[1]]
    bad = []
    for j, t, lp in checks:
        ref = math.log(law[j, t]) if law[j, t] > 0 else -math.inf
        if not (math.isfinite(lp) and lp <= tol) or abs(lp - ref) > tol:
            bad.append((j, t, lp, ref))
    if not bad:
        return None
    j, t, lp, ref = bad[0]
    return (
        f"{len(bad)} of {len(checks)} logprobs differ from the target's {mode} law of the true prefix by more than "
        f"logprob_tol={tol:g} nats; first at token {j} (id {t}): reported {lp:.4f}, the target gives {ref:.4f}"
        + (
            " (a server that reports raw logprobs, as vLLM does by default, is checked with --check-logprobs raw)"
            if mode == "processed"
            else ""
        )
    )


def reference_laws(aud: Any, prompts: Sequence[list[int]], seqs: Sequence[list[int]], settings: Any,
                   mode: LogprobsMode) -> list[np.ndarray]:  # fmt: skip
    """The law [m, V] each sequence's logprobs are compared with (float64, one teacher-forced pass)."""
    laws: list[np.ndarray] = aud.batch_sequence_probs(list(prompts), list(seqs), None if mode == "raw" else settings)
    return laws
