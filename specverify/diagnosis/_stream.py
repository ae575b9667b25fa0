"""Diagnosis of black-box generators: token by token, from each token's true prefix.

A generator shows only its output, so there are no rounds to score; but the audit keeps every
sequence's prompt, so each token's prefix (prompt + the tokens before it) can be rebuilt and the
law of the token under each stream class computed from the pair's tables (T: target, D: draft,
both under the audited settings; ``j`` is the token's index in its sequence of length L):

    target                        T[row(prefix)]
    unverified_draft_tail         T before index k, D from k on (tokens appended unverified); k fitted
    last_round_unverified         at the last ``TAIL`` indices a mixture w_j D + (1 - w_j) T (a final,
                                  short round filled with draft samples); the w_j fitted
    context_misses_last_token     a mixture over d = 0..``GAP`` of T[row(prefix with the token d back
                                  deleted)] (d = 0: the true prefix; the cache or context of a new
                                  round lacks the last emitted token); the weights fitted

Fitted parameters are paid for: log(grid size) nats for k, (parameters / 2) log(n) nats (BIC) for
mixture weights, so a correct generator gains nothing from the freedom. Cells for the explained
share are (index band: first 8, middle, last 8) x target-mass band, as in :mod:`._score`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._diagnose import NOT_KNOWN, Diagnosis
from ._models import EPS
from ._score import _bands
from ._tokens import TokenScores

if TYPE_CHECKING:  # the audit's types, for annotations only: the diagnosis sits below the audit
    from ..audit.pipeline.collect import UnitSample
    from ..audit.pipeline.plan import AuditPlan
    from ..audit.sources.adapters import Adapter
    from ..dists import SamplingSettings
    from ..harness import Generation
    from ._tokens import TokenUnit

__all__ = ["diagnose_stream", "stream_units", "draft_laws", "cells_by_index", "STREAM_TOKENS", "STREAM_FACTS"]

#: tokens scored per unit at most (the first ones): a stated sample size that keeps it to seconds
STREAM_TOKENS = 20_000
TAIL = 8  # indices at the end of a sequence that last_round_unverified may touch
GAP = 6  # how far back the token missing from the context may be (a round's length, gamma + 1 <= 6)
_EM_STEPS = 200


def stream_units(
    adapter: Adapter, plan: AuditPlan, pairs: dict[int, Any], samples: dict[int, UnitSample]
) -> list[TokenUnit]:
    """(Generation, pair, settings, label) of every unit of a black-box generator on a table pair."""
    if getattr(adapter, "harness", "") != "context":
        return []
    out: list[TokenUnit] = []
    for u in plan.units:
        s, pair = samples.get(u.index), pairs.get(u.index)
        gen: Generation | None = getattr(s, "gen", None)
        if gen is None or gen.drafts is not None or gen.prompts is None or not len(gen.tokens):
            continue
        if u.settings is None or u.settings.uses_history or not getattr(pair, "tabled", True):
            continue
        if not hasattr(pair, "row_of"):
            continue
        if u.settings.is_greedy or getattr(adapter, "greedy", False):
            continue
        out.append((gen, pair, u.settings, u.label))
    return out


def _index_in_sequence(seq: np.ndarray) -> np.ndarray:
    start = np.r_[0, np.nonzero(np.diff(seq))[0] + 1]
    first = np.repeat(start, np.diff(np.r_[start, len(seq)]))
    out: np.ndarray = np.arange(len(seq)) - first
    return out


def _mixture(lik: np.ndarray) -> tuple[np.ndarray, float]:
    """EM weights of a mixture with fixed components: lik [n, C] -> (weights [C], log-likelihood)."""
    w = np.full(lik.shape[1], 1.0 / lik.shape[1])
    for _ in range(_EM_STEPS):
        post = lik * w
        post /= post.sum(1, keepdims=True)
        w = post.mean(0)
    return w, float(np.log(lik @ w).sum())


def _gap_rows(gen: Generation, pair: Any, n: int, idx: np.ndarray) -> np.ndarray:
    """[n, GAP + 1] pair rows of each token's prefix with the emitted token d back deleted
    (column 0: the true prefix; a d that reaches into the prompt keeps the true prefix)."""
    rows = np.empty((n, GAP + 1), dtype=np.int64)
    for i in range(n):
        assert gen.prompts is not None, "stream units keep their prompts"
        p = gen.prompts[gen.sequence[i]]
        prefix = [int(t) for t in p[p >= 0]] + [int(t) for t in gen.tokens[i - idx[i] : i]]
        rows[i, 0] = gen.row[i]
        for d in range(1, GAP + 1):
            rows[i, d] = pair.row_of(prefix[:-d] + prefix[len(prefix) - d + 1 :]) if d <= idx[i] else gen.row[i]
    return rows


def _unit_laws(
    gen: Generation, pair: Any, settings: SamplingSettings, n: int, idx: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, str], dict[str, float]]:
    """({class: law [n, V]}, {class: fitted parameter}, {class: its price in nats}) of the first n tokens."""
    T, D = pair.target_table(settings), pair.draft_table(settings)
    y, r = gen.tokens[:n], gen.row[:n]
    laws, params, pay = draft_laws(T[r], D[r], y, idx)
    # context_misses_last_token: a mixture over which token is missing
    rows = _gap_rows(gen, pair, n, idx)
    comp = T[rows]  # [n, GAP + 1, V]
    wg, _ = _mixture(np.maximum(comp[np.arange(n), :, y], EPS))
    laws["context_misses_last_token"] = np.einsum("c,ncv->nv", wg, comp)
    top = int(np.argmax(wg[1:])) + 1
    params["context_misses_last_token"] = (
        f"{1 - wg[0]:.0%} of the mixture on prefixes missing an emitted token, mostly the one {top} back"
    )
    pay["context_misses_last_token"] = 0.5 * GAP * np.log(n)
    return laws, params, pay


def draft_laws(
    t: np.ndarray, d: np.ndarray, y: np.ndarray, idx: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, str], dict[str, float]]:
    """The target and the draft-tail classes of tokens ``y`` [n] whose target and draft laws given
    their true prefixes are ``t``, ``d`` [n, V] and whose index in their sequence is ``idx`` [n]:
    ({class: law}, {class: fitted parameter}, {class: its price in nats})."""
    n, L = len(y), int(idx.max()) + 1
    pt, pd = np.maximum(t[np.arange(n), y], EPS), np.maximum(d[np.arange(n), y], EPS)
    laws: dict[str, np.ndarray] = {"target": t}
    params: dict[str, str] = {}
    pay: dict[str, float] = {}
    # unverified_draft_tail: the change point k with the best likelihood
    gain = np.bincount(idx, weights=np.log(pd) - np.log(pt), minlength=L)
    tail_gain = np.cumsum(gain[::-1])[::-1]  # [L]: gain of switching to D from index k on
    k = int(np.argmax(tail_gain[1:])) + 1 if L > 1 else 0
    laws["unverified_draft_tail"] = np.where((idx >= k)[:, None], d, t)
    params["unverified_draft_tail"], pay["unverified_draft_tail"] = f"from token {k}", float(np.log(max(L - 1, 1)))
    # last_round_unverified: per-index mixture weights on the last TAIL indices
    w = np.zeros(L)
    for j in range(max(L - TAIL, 0), L):
        m = idx == j
        if m.any():
            w[j] = _mixture(np.stack([pt[m], pd[m]], 1))[0][1]
    laws["last_round_unverified"] = t + w[idx][:, None] * (d - t)
    shown = ", ".join(f"{x:.2f}" for x in w[max(L - TAIL, 0) :])
    params["last_round_unverified"] = f"weight of q at the last {min(TAIL, L)} tokens: {shown}"
    pay["last_round_unverified"] = float(0.5 * min(TAIL, L) * np.log(n))
    return laws, params, pay


def cells_by_index(idx: np.ndarray, t: np.ndarray) -> np.ndarray:
    """[n, V] cell of every (token, candidate id): index band (first 8, middle, last 8) x target band."""
    L = int(idx.max()) + 1
    band = np.where(idx < 8, 0, np.where(idx >= L - 8, 2, 1))
    out: np.ndarray = band[:, None] * 4 + _bands(t)
    return out


def diagnose_stream(
    units: Sequence[TokenUnit], *, min_llr: float = 10.0, min_explained: float = 0.9
) -> Diagnosis | None:
    """Rank the stream classes on the units of :func:`stream_units` (module docstring)."""
    if not units:
        return None
    acc = TokenScores(12, "token")
    for gen, pair, settings, label in units:
        n = min(len(gen.tokens), STREAM_TOKENS)
        idx = _index_in_sequence(gen.sequence[:n])
        laws, par, pay = _unit_laws(gen, pair, settings, n, idx)
        acc.add_unit(label, laws, gen.tokens[:n], cells_by_index(idx, laws["target"]), pay=pay, params=par)
    ranked, tokens, params = acc.ranked(), acc.tokens, acc.params
    top = ranked[0]
    known = top.qualifies(min_llr, min_explained)
    facts = [
        "a black-box generator shows no rounds: each token scored against its law given its true prefix "
        "(prompt + the tokens before it), and against what each stream class makes of that prefix"
    ]
    if known:
        unit = max(top.llr_by_unit, key=lambda k: top.llr_by_unit[k])
        facts.append(f"{STREAM_FACTS[top.name]} (strongest in {unit}: {params[top.name][unit]})")
    method = (
        f"law of each of {tokens:,} generated tokens under each stream class, from its rebuilt prefix (at most "
        f"{STREAM_TOKENS:,} per unit); fitted parameters paid for in nats; events floored at probability 1e-9"
    )
    return Diagnosis(top.name if known else NOT_KNOWN, ranked, facts, method, min_llr, min_explained, tokens)


STREAM_FACTS = {
    "unverified_draft_tail": "from a fixed token on, tokens follow the draft's law q, not the target's",
    "last_round_unverified": "only the last tokens of each sequence deviate, and there they follow the draft's law q",
    "context_misses_last_token": "tokens follow the target's law given a prefix with one emitted token missing",
}
