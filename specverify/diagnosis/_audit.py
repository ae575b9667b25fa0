"""The diagnosis step of an audit: evidence from what the audit collected, then the ranking.

Round evidence comes from every statistical unit whose rounds show their drafts (kernels, round
steps, the catalogue's kernel samplers). The catalogue's order-1 sequence samplers emit no
drafts, so their rounds are re-collected here with the sampler's own round function (seeded,
``SEQUENCE_ROUNDS`` rounds per unit). An audit that failed only an exact check is diagnosed from
that check: the boundary check is the signature of an inclusive comparison, a seeded
reproducibility failure the signature of state kept across sequences, a seed-independence failure
that of a seed not honoured; so is a statistical FAIL whose tokens no scorer's class fits. A failed greedy check on
raw rows is diagnosed token by token under the greedy classes (:mod:`._greedy`), and units whose
laws depend on the history (penalties) token by token under the penalty classes (:mod:`._penalty`),
black-box generators token by token under the stream classes (:mod:`._stream`), and round steps
that verify trees from the first token of each round under the tree classes (:mod:`._tree`). A
round step's stop unit, whose rounds a stop cuts, is scored under the stop classes (:mod:`._stop`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..harness import Generation, call_in_fork, greedy_raw_run
from ..stats import FAIL, SERIAL_STRATUM
from ._diagnose import NOT_KNOWN, Candidate, Diagnosis, diagnose_rounds
from ._evidence import round_evidence
from ._facts import knob_fact
from ._greedy import diagnose_greedy
from ._penalty import diagnose_penalty, penalty_units
from ._stop import diagnose_stop, stop_units
from ._stream import diagnose_stream, stream_units
from ._tree import diagnose_tree, is_tree, tree_units

if TYPE_CHECKING:  # the audit's types, for annotations only: the diagnosis sits below the audit
    from ..audit.pipeline.collect import UnitSample
    from ..audit.pipeline.config import AuditConfig
    from ..audit.pipeline.plan import AuditPlan
    from ..audit.sources.adapters import Adapter
    from ..dists import SamplingSettings
    from ..harness import ChainSampler
    from ..stats import CheckOutcome
    from ._evidence import RoundUnit

__all__ = ["AuditRecord", "diagnose_audit", "SEQUENCE_ROUNDS"]

SEQUENCE_ROUNDS = 8_000

_EXACT_SIGNATURES = {  # by check id (CheckOutcome.check_id)
    "exact/boundary": ("inclusive_compare", "with every acceptance uniform at 0 a draft with p(x) = 0 was kept"),
    "exact/reproducibility": (
        "state_not_reset",
        "the same seed gave different outputs: state survives between calls",
    ),
    "exact/seeds": (
        "seed_not_honoured",
        "requests with different seeds gave the same tokens: one random stream serves them all",
    ),
}
#: the class the consecutive-pairs test's stratum (SERIAL_STRATUM) signs
_SERIAL_SIGNATURE = (
    "randomness_shared_across_positions",
    "consecutive tokens of a round are dependent beyond their laws (the consecutive-pairs test), which fresh "
    "randomness at every position rules out",
)


def _sequence_rounds(
    sampler: ChainSampler,
    pair: Any,
    gamma: int,
    settings: SamplingSettings | None,
    rng: np.random.Generator,
    n: int,
) -> tuple[Generation, np.ndarray]:
    """``n`` consecutive rounds of an order-1 sequence sampler, with drafts and the rows of the
    drafted prefixes (its context, then its drafts), chained in sequences of 8 rounds; and per
    round whether its context was not the last emitted token (a structural mismatch)."""
    b = max(1, n // 8)
    ctx = np.full(b, pair.start_context, dtype=np.int64)
    toks: list[npt.NDArray[np.int64]] = []
    pos: list[npt.NDArray[np.int64]] = []
    rid: list[npt.NDArray[np.int64]] = []
    rows: list[npt.NDArray[np.int64]] = []
    acc: list[npt.NDArray[np.int64]] = []
    drafts: list[npt.NDArray[np.int64]] = []
    mism: list[np.ndarray] = []
    drows: list[npt.NDArray[np.int64]] = []
    last = ctx.copy()
    for r in range(8):
        out = sampler.round(pair, ctx, gamma, rng, settings)
        ids = r * b + np.arange(b)
        t = out.tokens
        valid = t >= 0
        prev = np.concatenate([last[:, None], np.where(valid, t, -1)[:, :-1]], axis=1)
        i, j = np.nonzero(valid)
        toks.append(t[i, j])
        pos.append(j)
        rid.append(ids[i])
        rows.append(prev[i, j])
        acc.append(out.num_accepted)
        drafts.append(out.drafts)
        # the rows the round verified: its context, then its own drafts (order-1 rows)
        drows.append(np.concatenate([ctx[:, None], out.drafts[:, :-1]], axis=1))
        mism.append(ctx != last)
        n_emit = valid.sum(1)
        last = t[np.arange(b), n_emit - 1]
        ctx = out.next_context
    seq = np.concatenate([np.arange(b)] * 8)
    round_of = np.concatenate(rid)
    gen = Generation(
        tokens=np.concatenate(toks),
        row=np.concatenate(rows),
        position=np.concatenate(pos),
        sequence=seq[round_of],
        num_accepted=np.concatenate(acc),
        rounds=8 * b,
        drafts=np.concatenate(drafts),
        drafts_from_implementation=True,
        round_id=round_of,
        draft_rows=np.concatenate(drows),
    )
    return gen, np.concatenate(mism)


def _units(record: AuditRecord) -> list[RoundUnit]:
    out: list[RoundUnit] = []
    adapter, cfg = record.adapter, record.cfg
    sampler: ChainSampler | None = getattr(adapter, "sampler", None)
    for u in record.plan.units:
        s = record.samples.get(u.index)
        pair = record.pairs[u.index]
        if s is None or not len(s.gen.tokens) or not hasattr(pair, "target_table"):
            continue
        gen = s.gen
        if is_tree(gen):  # its recorded 'drafts' are one path of a tree: the tree scorer reads it (_tree)
            continue
        if u.is_stop_unit:  # a round cut at a stop is no round of the rule: the stop scorer reads it (_stop)
            continue
        mismatch: np.ndarray | None = None
        if gen.drafts is None and sampler is not None and adapter.harness == "sequence":
            rng = np.random.default_rng([cfg.seed, u.index, 77])
            gen, mismatch = _sequence_rounds(sampler, pair, cfg.gamma, u.settings, rng, SEQUENCE_ROUNDS)
        ev = round_evidence(gen, pair, cfg.gamma, label=u.label, settings=u.settings, pair_kind=u.pair_kind)
        if ev is not None:
            if mismatch is not None:
                ev.mismatch = ev.mismatch | mismatch
            out.append((ev, pair, u.settings))
    return out


def _only_stop_units_failed(plan: AuditPlan, checks: Sequence[CheckOutcome]) -> bool:
    """Every failing statistical check is a stop unit's (its label in the check's name)."""
    stops = [u.label for u in plan.units if u.is_stop_unit]
    failed = [c for c in checks if c.status == FAIL and c.kind == "statistical"]
    return all(any(label in c.name for label in stops) for c in failed)


def _from_exact(checks: Sequence[CheckOutcome]) -> Diagnosis | None:
    failed = [c for c in checks if c.status == FAIL and c.kind == "exact"]
    for c in failed:
        if c.check_id in _EXACT_SIGNATURES:
            name, fact = _EXACT_SIGNATURES[c.check_id]
            cand = Candidate(name, float("inf"), 1.0, {}, [], {}, "")
            return Diagnosis(name, [cand], [fact], f"signature of the exact check '{c.name}'", 0.0, 1.0, 0)
    return None


def _from_serial(checks: Sequence[CheckOutcome], *, only: bool, facts: Sequence[str] = ()) -> Diagnosis | None:
    """The consecutive-pairs test's signature: every statistical FAIL leads with it (``only``: each
    token's margin failed less, so only the pairs show the bug), or at least one does and no scorer
    named a class (``facts``: what the scorers found, kept)."""
    failed = [c for c in checks if c.status == FAIL and c.kind == "statistical"]
    led = [c for c in failed if c.stratum == SERIAL_STRATUM]
    if not led or (only and len(led) < len(failed)):
        return None
    name, fact = _SERIAL_SIGNATURE
    cand = Candidate(name, float("inf"), 1.0, {}, [], {}, "")
    method = (
        f"signature of the consecutive-pairs test, the first failing stratum of {len(led)} of {len(failed)} "
        "failing unit(s)"
    )
    return Diagnosis(name, [cand], [fact, *facts], method, 0.0, 1.0, 0)


def _from_greedy(adapter: Adapter, cfg: AuditConfig, checks: Sequence[CheckOutcome]) -> Diagnosis | None:
    """A failed greedy check on raw rows: its run repeated with its seed, each token scored under
    the greedy classes (:mod:`._greedy`)."""
    # the greedy check runs on raw rows for round steps and generators (the context harness)
    failed = adapter.harness == "context" and any(c.status == FAIL and c.check_id == "exact/greedy" for c in checks)
    if not failed or getattr(adapter, "harness", "") != "context":
        return None
    run = functools.partial(greedy_raw_run, adapter.generate, cfg.vocab, cfg.gamma, cfg.seed)
    # where the check ran in a fresh fork, so does its repeat: from the same state, the same run
    pair, gen = call_in_fork(run, what="repeating the greedy check") if cfg.isolated else run()
    if gen.drafts is None or not len(gen.tokens):
        return None
    return diagnose_greedy(gen, pair, cfg.gamma)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """What an audit hands its diagnosis, in one typed record: the implementation, the options, the
    plan, the pairs and samples of every unit, and the checks."""

    adapter: Adapter
    cfg: AuditConfig
    plan: AuditPlan
    pairs: dict[int, Any]
    samples: dict[int, UnitSample]
    checks: list[CheckOutcome]


def diagnose_audit(record: AuditRecord) -> Diagnosis | None:
    """The diagnosis of a FAILed audit (None when nothing failed). One that names no class says,
    where the audit judged several settings, which knobs the failing ones share (:func:`knob_fact`)."""
    d = _diagnose_audit(record)
    if d is None or d.known:
        return d
    where = knob_fact(record.plan, record.checks)
    return dataclasses.replace(d, facts=[*d.facts, where]) if where else d


def _diagnose_audit(record: AuditRecord) -> Diagnosis | None:
    adapter, cfg, plan, pairs, samples, checks = (
        record.adapter,
        record.cfg,
        record.plan,
        record.pairs,
        record.samples,
        record.checks,
    )
    if not any(c.status == FAIL for c in checks):
        return None
    # the pairs alone failed: the class they sign, unless an exact check proves a cause (one random
    # stream for every request repeats whole requests, which the pairs see first of all)
    serial = _from_serial(checks, only=True)
    if serial is not None and _from_exact(checks) is None:
        return serial
    units = _units(record)
    stat_failed = any(c.status == FAIL and c.kind == "statistical" for c in checks)
    d = diagnose_rounds(units) if units and stat_failed else None
    if d is not None and d.known:
        return d
    # the stop unit's rounds, cut at their stop, which the round scorer leaves out (_stop). A stop
    # class changes laws only where the stop ids are stops: named only when no other unit failed (a
    # bug at the last id, the stop unit's stop id, fails every unit and is no stop handling)
    stop = diagnose_stop(stop_units(plan, pairs, samples)) if stat_failed else None
    if stop is not None and stop.known and _only_stop_units_failed(plan, checks):
        return stop
    # a token scorer's unknown gives way to an exact check's signature: the finding is proven, and
    # the tokens fit no class (e.g. one random stream for every request: each token follows its law)
    pen = diagnose_penalty(penalty_units(adapter, plan, pairs, samples)) if stat_failed else None
    if pen is not None and (pen.known or d is None):
        return pen if pen.known else _from_exact(checks) or pen
    tree = diagnose_tree(tree_units(adapter, plan, pairs, samples)) if stat_failed else None
    if tree is not None and (tree.known or d is None):
        return tree if tree.known else _from_exact(checks) or tree
    stream = diagnose_stream(stream_units(adapter, plan, pairs, samples)) if stat_failed else None
    if stream is not None and (stream.known or d is None):
        return stream if stream.known else _from_exact(checks) or stream
    greedy = _from_greedy(adapter, cfg, checks)
    if greedy is not None and (greedy.known or d is None):
        return greedy if greedy.known else _from_exact(checks) or greedy
    exact = _from_exact(checks)
    if exact is not None:
        return exact
    serial = _from_serial(checks, only=False, facts=d.facts if d is not None else ())
    if serial is not None:
        return serial
    if d is not None:
        return d
    return Diagnosis(
        NOT_KNOWN,
        [],
        ["no round evidence: the failing checks show no rounds to score"],
        "no evidence to score",
        10.0,
        0.9,
        0,
    )
