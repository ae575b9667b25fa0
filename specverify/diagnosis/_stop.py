"""Diagnosis of a round step's stop unit: the rounds of requests that end at a stop, cut there.

The round scorer skips a stop unit (:mod:`._audit`): a round cut after its first stop shows only a
prefix of the rule's round, and dropping the cut rounds would condition the rest on "no stop". This
scorer gives every round of the unit the probability of the prefix it showed. With drafts
x_0 .. x_{d-1} (d <= gamma: a step may stop drafting at a drafted stop), emitted tokens b_0 .. b_m
and A_j, R_j, B the keep probability, replacement law and bonus law of a class:

    P(b | x) = prod_{j<m} A_j * { [b_m = x_m] A_m [b_m is a stop] + (1 - A_m) R_m(b_m)   if m < d
                                { B(b_m)                                                  if m = d

(a kept draft ends the round only when it is a stop: the request ends there). A round cut by the
request's length is left out. A round that asked the target nothing (no drafts seen) is a
structural event (probability 1e-9) under the rule; under ``request_ended_early`` it is the class's
own round when it ends at a stop (its drafts taken as they came). Each position reached also gives
the probability that it emits a stop, [x_j stop] A_j + (1 - A_j) R_j(S) (B(S) at the bonus): the
emitted stops minus their sum is a martingale under the class's law, so its z-score measures how
much of the stop-count deviation a class leaves ("explained" is the share of the target's z^2 it removes).

Classes: ``request_ended_early`` (a drafted stop kept without the test: A_j = 1 for a stop) and
``stop_never_a_replacement`` (the stop ids masked out of the replacement law, and, as a fitted
parameter paid log 2 nats, out of the bonus law too). Shapes: R rounds, g = gamma, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from ._diagnose import NOT_KNOWN, Candidate, Diagnosis
from ._models import EPS
from ._tree import is_tree

if TYPE_CHECKING:
    from ..audit.pipeline.collect import UnitSample
    from ..audit.pipeline.plan import AuditPlan
    from ..dists import SamplingSettings
    from ..harness import Generation

    #: (Generation, pair (duck-typed, with target_table / draft_table), settings, label)
    StopUnit = tuple[Generation, Any, SamplingSettings, str]

__all__ = ["STOP_FACTS", "diagnose_stop", "stop_units"]

#: the classes this scorer can name, with the fact its lead states
STOP_FACTS = {
    "request_ended_early": "a drafted stop is kept without the acceptance test: the request ends where the target "
    "may have rejected it",
    "stop_never_a_replacement": "the stop ids never come from the replacement law: a request ends only on a kept "
    "draft or a bonus",
}
#: the reference stop-count deviation must reach this before a class is named (a stop bug shows there)
MIN_STOP_Z = 4.0
_CHUNK = 4096


def stop_units(plan: AuditPlan, pairs: dict[int, Any], samples: dict[int, UnitSample]) -> list[StopUnit]:
    """The stop units of a chain round-step audit (settings with stop ids, sized for the stop count)."""
    out: list[StopUnit] = []
    for u in plan.units:
        s, pair = samples.get(u.index), pairs.get(u.index)
        gen: Generation | None = getattr(s, "gen", None)
        if gen is None or gen.drafts is None or gen.law is not None or not len(gen.tokens) or is_tree(gen):
            continue  # a tree's recorded drafts are one path of it: no chain round to score
        if not u.is_stop_unit:
            continue
        if not hasattr(pair, "target_table") or gen.draft_rows is None:
            continue
        out.append((gen, pair, u.settings, u.label))
    return out


def _norm(w: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    tot = w.sum(-1, keepdims=True)
    return np.where(tot > 0, w / np.where(tot > 0, tot, 1.0), fallback)


def _masked(law: np.ndarray, stops: list[int]) -> np.ndarray:
    w = law.copy()
    w[..., stops] = 0.0
    return _norm(w, law)


def _blocks(gen: Generation, n_rounds: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """([R, g + 1] emitted ids, [R, g + 1] their rows (of the true prefix)), -1 where none."""
    ids = np.full((n_rounds, g + 1), -1, dtype=np.int64)
    rows = ids.copy()
    rid, pos = gen.rounds_of_tokens, gen.position
    ok = pos <= g
    ids[rid[ok], pos[ok]] = gen.tokens[ok]
    rows[rid[ok], pos[ok]] = gen.row[ok]
    return ids, rows


def _position_events(
    P: np.ndarray, Q: np.ndarray, x: np.ndarray, rows: np.ndarray, stops: list[int], cls: str, mask_bonus: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep probability [n], final-token law [n, V] as replacement and as bonus, at one position."""
    p, q = P[rows], Q[rows]
    has = x >= 0
    xs = np.where(has, x, 0)
    px, qx = p[np.arange(len(x)), xs], q[np.arange(len(x)), xs]
    keep = np.where(qx > 0, np.minimum(1.0, px / np.where(qx > 0, qx, 1.0)), (px > 0).astype(float))
    if cls == "request_ended_early":
        keep = np.where(np.isin(xs, stops), 1.0, keep)
    repl = _norm(np.maximum(p - q, 0.0), p)
    bonus = p
    if cls == "stop_never_a_replacement":
        repl = _masked(repl, stops)
        bonus = _masked(p, stops) if mask_bonus else p
    return np.where(has, keep, 0.0), repl, bonus


def _score_chunk(
    P: np.ndarray, Q: np.ndarray, drafts: np.ndarray, ids: np.ndarray, rows: np.ndarray, stops: list[int], cls: str,
    mask_bonus: bool,
) -> tuple[float, float, float, float]:  # fmt: skip
    """(log-likelihood, stops observed, stops expected, variance) of a chunk of rounds under a class."""
    n, g1 = ids.shape
    d = (drafts >= 0).sum(1)
    m = (ids >= 0).sum(1) - 1
    ll, obs, exp, var = np.zeros(n), 0.0, 0.0, 0.0
    for j in range(g1):
        at: np.ndarray = m >= j
        if not at.any():
            break
        x = drafts[:, j] if j < drafts.shape[1] else np.full(n, -1)
        keep, repl, bonus = _position_events(P, Q, x, np.where(at, rows[:, j], 0), stops, cls, mask_bonus)
        t = np.where(at, ids[:, j], 0)
        is_draft, last, is_stop = j < d, m == j, np.isin(t, stops)
        final = np.where(is_draft, (1 - keep) * repl[np.arange(n), t], bonus[np.arange(n), t])
        kept_here = (t == x) & is_draft
        f = np.where(last, final + np.where(kept_here & is_stop, keep, 0.0), np.where(kept_here, keep, 0.0))
        ll += np.where(at, np.log(np.maximum(f, EPS)), 0.0)
        # P(this position emits a stop | reached): a kept stop draft, or a stop as the final token
        s_draft = np.isin(np.where(x >= 0, x, -1), stops) * keep + (1 - keep) * repl[:, stops].sum(1)
        s = np.clip(np.where(is_draft, s_draft, bonus[:, stops].sum(1)), 0.0, 1.0)
        obs += float((at & is_stop).sum())
        exp += float(s[at].sum())
        var += float((s * (1 - s))[at].sum())
    return float(ll.sum()), obs, exp, var


def _unit_scores(unit: StopUnit, cls: str, mask_bonus: bool) -> tuple[float, float, float, float, int]:
    gen, pair, settings, _ = unit
    stops = [int(s) for s in settings.stop_token_ids]
    P, Q = pair.target_table(settings), pair.draft_table(settings)
    assert gen.drafts is not None  # stop_units keeps units with drafts only
    drafts = np.asarray(gen.drafts, dtype=np.int64)
    ids, rows = _blocks(gen, len(gen.num_accepted), drafts.shape[1])
    emitted = (ids >= 0).sum(1)
    # a round cut by the request's length (fewer tokens recorded than it returned) shows no end of its own
    whole = (emitted > 0) & (emitted == np.asarray(gen.num_accepted) + 1)
    seen = (drafts >= 0).any(1)
    idx = np.nonzero(whole & seen)[0]
    tot = np.zeros(4)
    for s in range(0, len(idx), _CHUNK):
        k = idx[s : s + _CHUNK]
        tot += _score_chunk(P, Q, drafts[k], ids[k], rows[k], stops, cls, mask_bonus)
    tot += _unverified(P, ids[whole & ~seen], rows[whole & ~seen], stops, cls)
    ll, obs, exp, var = (float(v) for v in tot)
    return ll, obs, exp, var, int(whole.sum())


def _unverified(P: np.ndarray, ids: np.ndarray, rows: np.ndarray, stops: list[int], cls: str) -> np.ndarray:
    """(log-likelihood, stops observed, expected, variance) of the rounds that asked the target
    nothing. The rule always verifies: such a round is a structural event (probability EPS), except
    under ``request_ended_early`` when it ends at a stop (its drafts taken as they came, the stop the
    end). Stops per position: the target's p(S) under the rule, certain at the drafted stop under the class."""
    reached = ids >= 0
    last = np.take_along_axis(ids, np.maximum(reached.sum(1) - 1, 0)[:, None], axis=1)[:, 0]
    ends = np.isin(last, stops)
    is_stop = np.isin(ids, stops) & reached
    if cls == "request_ended_early":
        s = is_stop.astype(float)
        ll = np.where(ends, 0.0, np.log(EPS)).sum()
    else:
        s = np.where(reached, P[np.maximum(rows, 0)][..., stops].sum(-1), 0.0)
        ll = np.log(EPS) * len(ids)
    return np.array([ll, is_stop.sum(), s.sum(), (s * (1 - s)).sum()], dtype=float)


def diagnose_stop(units: Sequence[StopUnit], *, min_llr: float = 10.0, min_explained: float = 0.9) -> Diagnosis | None:
    """Rank the stop classes on the stop units of :func:`stop_units` (module docstring); None when
    the units' stop count is within :data:`MIN_STOP_Z` of the target's law (no stop finding to explain)."""
    if not units:
        return None
    variants = {"target": ("target", False), "request_ended_early": ("request_ended_early", False)}
    variants |= {"stop_never_a_replacement": ("stop_never_a_replacement", False)}
    variants |= {"stop_never_a_replacement+bonus": ("stop_never_a_replacement", True)}
    totals = {k: np.sum([_unit_scores(u, c, b) for u in units], axis=0) for k, (c, b) in variants.items()}
    ll0, o0, e0, v0, rounds = totals["target"]
    z0 = (o0 - e0) / np.sqrt(max(v0, 1e-12))
    if abs(z0) < MIN_STOP_Z:
        return None
    masked = max(("stop_never_a_replacement", "stop_never_a_replacement+bonus"), key=lambda k: totals[k][0])
    cands = []
    for key, pay, param in (("request_ended_early", 0.0, ""), (masked, np.log(2), _mask_param(masked))):
        ll, o, e, v, _ = totals[key]
        z = (o - e) / np.sqrt(max(v, 1e-12))
        llr = float(ll - ll0 - pay)
        label = units[0][3]
        fit = float(2 * stats.norm.sf(abs(z)))
        cands.append(Candidate(variants[key][0], llr, float(1 - z * z / (z0 * z0)), {"round": llr}, [], {label: llr},
                               param, fit))  # fmt: skip
    ranked = sorted(cands, key=lambda c: -c.llr_vs_target)
    top = ranked[0]
    known = top.qualifies(min_llr, min_explained)
    facts = [
        f"the stop unit's rounds ended at a stop {int(o0):,} times; the target's law expects {e0:,.1f} (z = {z0:.1f})"
    ]
    if known:
        facts.append(STOP_FACTS[top.name])
    method = (
        f"probability of the cut prefix each of {int(rounds):,} rounds of the stop unit showed, under each stop "
        "class; stops per position reached against each class's stop probability; events floored at 1e-9"
    )
    return Diagnosis(top.name if known else NOT_KNOWN, ranked, facts, method, min_llr, min_explained, int(rounds))


def _mask_param(key: str) -> str:
    return "masked in the replacement and the bonus" if key.endswith("+bonus") else "masked in the replacement only"
