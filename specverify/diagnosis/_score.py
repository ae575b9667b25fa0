"""Scores of one unit's rounds under every candidate model: log-likelihoods and cell counts.

For a model m the log-likelihood of the unit is the sum over its events (``_evidence``) of
log P_m(event | what came before), floored at log EPS. It is kept by event kind (draft,
acceptance, replacement, bonus, structure) and by position in the round, so that the diagnosis
can say *where* a model beats the target law.

The same events are also counted in cells that depend on the target only (acceptance by
position and ratio band; replacements by residual support and target-mass band; bonus and
drafts by mass band; the structural events), with each model's expected counts. The G
statistic G_m = 2 sum O log(O / E_m) over the cells measures what a model leaves unexplained;
the share of the target's excess deviance a model removes, (G_target - G_m) / (G_target - df),
is how much of the deviation it explains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dists import SamplingSettings
from ._mechanism import SelfFitted
from ._models import AFTER_FULL, AFTER_NOTHING, AFTER_REJECTION, EPS, NAN_KEEP, Chunk, RoundModel, Tables

if TYPE_CHECKING:  # annotations only
    from ._evidence import RoundEvidence

__all__ = ["UnitScore", "score_unit", "KINDS"]

KINDS = ("draft", "acceptance", "replacement", "bonus", "structure")
_BANDS = 4  # target-mass bands of a token cell
CHUNK = 4000  # rounds gathered at once ([CHUNK, g + 1, V] float64 rows)


@dataclasses.dataclass
class UnitScore:
    """One model on one unit: log-likelihood by kind x position, and expected cell counts."""

    ll: np.ndarray  # [len(KINDS), g + 1]
    expected: np.ndarray  # [cells]
    events: int

    @property
    def total(self) -> float:
        return float(self.ll.sum())


def _bands(P: np.ndarray) -> np.ndarray:
    """[M, V] target-mass band of every token: the mass of the tokens ranked above it, in bands."""
    order = np.argsort(-P, axis=-1, kind="stable")
    cum = np.cumsum(np.take_along_axis(P, order, -1), -1) - np.take_along_axis(P, order, -1)
    out = np.empty_like(order)
    np.put_along_axis(out, order, np.minimum((cum * _BANDS).astype(np.int64), _BANDS - 1), -1)
    return out


class _Cells:
    """Cell layout of a unit: acceptance (position x ratio band, kept / not), replacement
    (first / later x in residual support x band), bonus (band), draft (first / later x band),
    structure (mismatch, non-standard, and of a non-standard block: a one-token tail, at least g tokens)."""

    def __init__(self, g: int) -> None:
        self.acc0 = 0
        self.rep0 = self.acc0 + g * 4 * 2
        self.bon0 = self.rep0 + 2 * 2 * _BANDS
        self.dr0 = self.bon0 + _BANDS
        self.st0 = self.dr0 + 2 * _BANDS
        self.size = self.st0 + 8
        # the group of every cell (cells sharing one conditioning event), for the degrees of freedom
        sizes = [2] * (g * 4) + [2 * _BANDS] * 2 + [_BANDS] + [_BANDS] * 2 + [2] * 4
        self.group_of = np.repeat(np.arange(len(sizes)), sizes)
        self.groups = len(sizes)

    def df(self, obs: np.ndarray) -> int:
        """Degrees of freedom of a G statistic on these cells: in every group that saw events, its
        cells with events less one (a group with no events constrains nothing)."""
        seen = np.bincount(self.group_of[obs > 0], minlength=self.groups)
        return int(np.maximum(seen - 1, 0).sum())

    def span(self, kind: str) -> tuple[int, int]:
        """[lo, hi) of the cells of one event kind (a mechanism composes its cells kind by kind)."""
        starts = {"acceptance": self.acc0, "replacement": self.rep0, "bonus": self.bon0, "draft": self.dr0}
        starts["structure"] = self.st0
        ends = {"acceptance": self.rep0, "replacement": self.bon0, "bonus": self.dr0, "draft": self.st0}
        ends["structure"] = self.size
        return starts[kind], ends[kind]


def _gather(tab: Tables, ev: RoundEvidence, idx: np.ndarray) -> Chunk:
    g = ev.gamma
    pr = ev.prow[idx].copy()
    pr[:, g] = np.where(pr[:, g] >= 0, pr[:, g], pr[:, g - 1])  # unseen bonus rows: never read
    qr = ev.qrow[idx]
    qb = pr[:, g] if tab.Qs.shape[0] > pr.max() else pr[:, g - 1]
    extra = {k: (v[pr] if k.startswith("P") else v[qr]) for k, v in tab.extra.items()}
    before = pr[:, 0] if ev.prev_row is None else np.where(ev.prev_row[idx] >= 0, ev.prev_row[idx], pr[:, 0])
    after = None
    if ev.prev_round is not None:
        after = np.where(
            ev.prev_round[idx] < 0, AFTER_NOTHING, np.where(ev.prev_rejected[idx], AFTER_REJECTION, AFTER_FULL)
        )
    return Chunk(
        ev.drafts[idx],
        ev.k[idx],
        tab.P[pr],
        tab.Pb[pr[:, g]],
        tab.Qs[qr],
        tab.Qr[qr],
        tab.Qs[qb],
        ev.spare[idx],
        extra,
        tab.P[before],
        (tab, qr, pr[:, g]),
        after,
        None if ev.ctx_rows is None else {name: rows[idx] for name, rows in ev.ctx_rows.items()},
    )


def _add(out: np.ndarray, idx: np.ndarray, w: np.ndarray | float) -> None:
    """out[idx] += w with repeated indices summed (np.add.at, by bincount: many times faster)."""
    idx = np.asarray(idx).ravel()
    weights = np.broadcast_to(np.asarray(w, dtype=np.float64), idx.shape) if np.ndim(w) == 0 else np.asarray(w).ravel()
    out += np.bincount(idx, weights=weights, minlength=len(out))[: len(out)]


def _log(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.log(np.maximum(x, EPS))
    return out


#: the round's parts, each with the model hook that gives its law and its row in ``ll``
PARTS = (("draft", "draft_law", 0), ("acceptance", "accept", 1), ("replacement", "replaced", 2), ("bonus", "bonus", 3))


def _own_parts(model: RoundModel) -> set[str]:
    """The parts whose law a model computes itself (on the rule's tables, the others are the rule's)."""
    return {part for part, hook, _ in PARTS if getattr(type(model), hook) is not getattr(RoundModel, hook)}


def _chunk_events(
    model: RoundModel,
    c: Chunk,
    ref: _RefView,
    bands_of: dict[str, np.ndarray],
    layout: _Cells,
    ll: np.ndarray,
    exp: np.ndarray,
    obs: np.ndarray,
    parts: set[str],
) -> None:
    """Add one chunk's events of ``parts`` to ll [kinds, g + 1], exp / obs [cells]. Which events
    there are, and their cells, do not depend on the model: they are computed once per chunk
    (``_RefView.memo``); each model adds only its laws."""
    if "draft" in parts:
        _draft_events(model, c, ref, bands_of, layout, ll, exp, obs)
    if "acceptance" in parts:
        _accept_events(model, c, ref, layout, ll, exp, obs)
    g = c.X.shape[1]
    rows, j, y, cell, o = _token_cells(ref, bands_of, layout, "replacement")
    if "replacement" in parts and len(rows):
        law = model.replaced(c, j, rows)
        _add(ll[2], j, _log(law[np.arange(len(rows)), y]))
        _add(exp, cell, law.ravel())
        obs += o
    rows, _, y, cell, o = _token_cells(ref, bands_of, layout, "bonus")
    if "bonus" in parts and len(rows):
        law = model.bonus(c, rows)
        ll[3, g] += _log(law[np.arange(len(rows)), y]).sum()
        _add(exp, cell, law.ravel())
        obs += o


def _token_cells(
    ref: _RefView, bands_of: dict[str, np.ndarray], layout: _Cells, kind: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, their positions, tokens, cells [rows x V] flat, observed counts [cells]) of a chunk's
    replacements (rounds cut at a rejection) or bonus tokens (every draft kept)."""
    if kind not in ref.memo:
        c = ref.chunk
        g = c.X.shape[1]
        rows = np.nonzero(c.k < g if kind == "replacement" else c.k == g)[0]
        j = c.k[rows]
        if kind == "replacement":
            p, q = ref.P[rows, j], ref.Qr[rows, j]
            band = bands_of["P"][ref.prow_ids[rows, j]]
            cell = layout.rep0 + (np.minimum(j, 1)[:, None] * 2 + (p > q)) * _BANDS + band
        else:
            cell = layout.bon0 + bands_of["P"][ref.prow_ids[rows, g]]
        y = ref.y[rows]
        o = np.zeros(layout.size)
        _add(o, cell[np.arange(len(rows)), y], 1.0)
        ref.memo[kind] = (rows, j, y, cell.ravel(), o)
    out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] = ref.memo[kind]
    return out


def _draft_events(
    model: RoundModel,
    c: Chunk,
    ref: _RefView,
    bands_of: dict[str, np.ndarray],
    layout: _Cells,
    ll: np.ndarray,
    exp: np.ndarray,
    obs: np.ndarray,
) -> None:
    if "draft" not in ref.memo:  # positions [n g], cells [n g V] flat, observed counts [cells]
        n, g = c.X.shape
        pos = np.arange(g)[None, :]
        bq = bands_of["Q"][ref.qrow_ids]  # [n, g, V]
        cell = layout.dr0 + np.minimum(pos, 1)[..., None] * _BANDS + bq
        o = np.zeros(layout.size)
        _add(o, np.take_along_axis(cell, ref.chunk.X[:, :, None], 2).ravel(), 1.0)
        ref.memo["draft"] = (np.broadcast_to(pos, (n, g)).ravel(), cell.ravel(), o)
    pos_flat, cell_flat, o = ref.memo["draft"]
    D = model.draft_law(c)
    dx = np.take_along_axis(D, c.X[:, :, None], 2)[:, :, 0]
    _add(ll[0], pos_flat, _log(dx).ravel())
    _add(exp, cell_flat, D.ravel())
    obs += o


def _accept_events(
    model: RoundModel, c: Chunk, ref: _RefView, layout: _Cells, ll: np.ndarray, exp: np.ndarray, obs: np.ndarray
) -> None:
    if "acceptance" not in ref.memo:  # the tests reached, kept, their positions and cells
        n, g = c.X.shape
        pos = np.arange(g)[None, :]
        r_ref = ref.ratio
        band = np.where(r_ref <= 0, 0, np.where(r_ref >= 1, 3, np.where(r_ref <= 0.5, 1, 2)))
        reached = pos <= np.minimum(ref.chunk.k, g - 1)[:, None]
        kept = pos < ref.chunk.k[:, None]
        acell = layout.acc0 + (pos * 4 + band) * 2
        o = np.zeros(layout.size)
        _add(o, (acell + ~kept)[reached], 1.0)
        ref.memo["acceptance"] = (reached, kept[reached], np.broadcast_to(pos, (n, g))[reached], acell[reached], o)
    reached, kept, pos_r, acell, o = ref.memo["acceptance"]
    A = np.clip(model.accept(c), 0.0, 1.0)[reached]
    _add(ll[1], pos_r, np.where(kept, _log(A), _log(1 - A)))
    _add(exp, acell, A)
    _add(exp, acell + 1, 1 - A)
    obs += o


def _structure(
    model: RoundModel, ev: RoundEvidence, layout: _Cells, ll: np.ndarray, exp: np.ndarray, obs: np.ndarray
) -> None:
    """The two structural events of every round (module docstring of ``_evidence``)."""
    seen = ev.y >= 0
    mis_p = np.clip(model.mismatch(ev), EPS, 1 - EPS)[seen]
    mis = ev.mismatch[seen]
    ll[4, 0] += float(np.where(mis, np.log(mis_p), np.log1p(-mis_p)).sum())
    ns_p = np.clip(model.nonstandard(ev), EPS, 1 - EPS)[seen & ~ev.mismatch]
    ns = ~ev.standard[seen & ~ev.mismatch]
    ll[4, 0] += float(np.where(ns, np.log(ns_p), np.log1p(-ns_p)).sum())
    events = [(0, mis_p, mis), (2, ns_p, ns)]
    if ev.tail is not None and ev.emitted is not None:  # the shape of the non-standard blocks
        odd = seen & ~ev.mismatch & ~ev.standard
        g = ev.gamma
        for off, hook, o in ((4, model.one_token_tail, ev.tail == 1), (6, model.reaches_last, ev.emitted >= g)):
            p = np.clip(hook(ev), EPS, 1 - EPS)[odd]
            ll[4, 0] += float(np.where(o[odd], np.log(p), np.log1p(-p)).sum())
            events.append((off, p, o[odd]))
    for off, p, o in events:
        exp[layout.st0 + off] += p.sum()
        exp[layout.st0 + off + 1] += (1 - p).sum()
        obs[layout.st0 + off] += o.sum()
        obs[layout.st0 + off + 1] += (~o).sum()


def score_unit(
    ev: RoundEvidence,
    pair: Any,
    settings: SamplingSettings | None,
    models: Sequence[RoundModel],
    *,
    max_rounds: int = 20_000,
) -> tuple[dict[str, UnitScore], np.ndarray, _Cells]:
    """({model name: UnitScore}, observed cell counts, cell layout) of one unit's rounds.

    At most ``max_rounds`` usable rounds are scored (the first ones: a stated sample size that
    keeps a diagnosis to seconds); structural events use every round."""
    base = Tables(
        pair.target_table(settings), pair.target_table(settings), pair.draft_table(settings), pair.draft_table(settings)
    )
    g = ev.gamma
    layout = _Cells(g)
    idx_all = np.nonzero(ev.usable)[0][:max_rounds]
    bands_of = {"P": _bands(base.P), "Q": _bands(base.Qr)}
    NAN_KEEP[0] = _nan_convention(base, ev, idx_all)
    out: dict[str, UnitScore] = {}
    obs_final: np.ndarray | None = None
    chunks = [idx_all[s : s + CHUNK] for s in range(0, len(idx_all), CHUNK)]
    refs = [_reference_view(base, ev, idx) for idx in chunks]  # the rule's rows, shared by every model
    every = {part for part, _, _ in PARTS if part != "draft" or ev.drafted_by_impl}
    rule: tuple[np.ndarray, np.ndarray] | None = None  # the rule's (ll, exp) without structure
    for model in models:
        model.fit(ev)
        tab = model.tables(pair, settings, base)
        # a part whose hook the model keeps, read from the rule's tables, is the rule's: computed once
        parts = every if rule is None else every & (_own_parts(model) | _parts_read_from_other_tables(tab, base))
        ll = np.zeros((len(KINDS), g + 1))
        exp, obs = np.zeros(layout.size), np.zeros(layout.size)
        for idx, ref in zip(chunks, refs, strict=True):
            c = ref.chunk if tab is base else _gather(tab, ev, idx)
            _chunk_events(model, c, ref, bands_of, layout, ll, exp, obs, parts)
        if rule is None and type(model) is RoundModel:
            rule = (ll.copy(), exp.copy())
        elif rule is not None:
            _reuse(rule, every - parts, layout, ll, exp)
        _structure(model, ev, layout, ll, exp, obs)
        out[model.name] = UnitScore(ll, exp, len(idx_all))
        obs_final = obs if obs_final is None else obs_final  # the first model's: it counts every part
    assert obs_final is not None, "score_unit needs at least one model"
    return out, obs_final, layout


def _parts_read_from_other_tables(tab: Tables, base: Tables) -> set[str]:
    """The parts whose rule hooks would read rows of ``tab`` that differ from the rule's tables: a
    model that changes only the target's rows (a settings class) keeps the rule's drafts."""
    if tab is base:
        return set()

    def same(a: np.ndarray, b: np.ndarray) -> bool:
        return a is b or (a.shape == b.shape and bool(np.array_equal(a, b)))

    out = set() if same(tab.Qs, base.Qs) else {"draft"}
    if not (same(tab.P, base.P) and same(tab.Qr, base.Qr)):
        out |= {"acceptance", "replacement"}
    return out if same(tab.Pb, base.Pb) else out | {"bonus"}


def _reuse(
    rule: tuple[np.ndarray, np.ndarray], parts: set[str], layout: _Cells, ll: np.ndarray, exp: np.ndarray
) -> None:
    """Add the rule's log-likelihood and expected counts of ``parts`` to a model's."""
    for part, _, k in PARTS:
        if part in parts:
            ll[k] += rule[0][k]
            lo, hi = layout.span(part)
            exp[lo:hi] += rule[1][lo:hi]


def _nan_convention(base: Tables, ev: RoundEvidence, idx_all: np.ndarray) -> bool:
    """Whether the unit keeps drafts with q(x) = p(x) = 0 (most such reached drafts kept)."""
    keep = rej = 0
    g = ev.gamma
    for s in range(0, len(idx_all), CHUNK):
        c = _gather(base, ev, idx_all[s : s + CHUNK])
        zero = (c.at(c.P) <= 0) & (c.at(c.Qr) <= 0)
        pos = np.arange(g)[None, :]
        reached = pos <= np.minimum(c.k, g - 1)[:, None]
        kept = pos < c.k[:, None]
        keep += int((zero & reached & kept).sum())
        rej += int((zero & reached & ~kept).sum())
    return keep > rej


@dataclasses.dataclass
class _RefView:
    chunk: Chunk
    y: np.ndarray
    P: np.ndarray
    Qr: np.ndarray
    ratio: np.ndarray
    prow_ids: np.ndarray
    qrow_ids: np.ndarray
    memo: dict[str, Any] = dataclasses.field(default_factory=dict)  # model-independent cells (_chunk_events)


def _reference_view(base: Tables, ev: RoundEvidence, idx: np.ndarray) -> _RefView:
    from ._models import ratio

    c = _gather(base, ev, idx)
    pr = ev.prow[idx].copy()
    g = ev.gamma
    pr[:, g] = np.where(pr[:, g] >= 0, pr[:, g], pr[:, g - 1])
    return _RefView(c, ev.y[idx], c.P, c.Qr, ratio(c.at(c.P), c.at(c.Qr)), pr, ev.qrow[idx])


def g_statistic(obs: np.ndarray, exp: np.ndarray) -> float:
    """2 sum O log(O / E) over cells with O > 0 (E floored at EPS)."""
    m = obs > 0
    return float(2 * np.sum(obs[m] * np.log(obs[m] / np.maximum(exp[m], EPS))))


#: rounds per unit a fitted member's grid is scored on: a shape's parameter is pinned by far fewer
#: events than a diagnosis scores, and the grid costs (grid size) passes over them
FIT_ROUNDS = 1_000


def fit_on_grid(models: Sequence[Any], units: Sequence[tuple[RoundEvidence, Any, Any]], *, max_rounds: int) -> None:
    """Set each fitted family member (``_fitted``: ``FIT_GRID``, ``set_value``) to the grid value
    under which its own part's events, pooled over the units (the first ``min(max_rounds,
    FIT_ROUNDS)`` usable rounds of each), are likeliest (ties: the first); a member that fits its
    own numbers (``_loglinear``, ``_ratio_law``: ``collect``, ``solve``) fits them on those events."""
    max_rounds = min(max_rounds, FIT_ROUNDS)
    part_of = {id(m): _only_part(m) for m in models}
    totals = {id(m): np.zeros(len(getattr(m, "FIT_GRID", ()))) for m in models}
    for ev, pair, settings in units:
        base = Tables(
            pair.target_table(settings),
            pair.target_table(settings),
            pair.draft_table(settings),
            pair.draft_table(settings),
        )
        idx_all = np.nonzero(ev.usable)[0][:max_rounds]
        NAN_KEEP[0] = _nan_convention(base, ev, idx_all)
        for s in range(0, len(idx_all), CHUNK):
            c = _gather(base, ev, idx_all[s : s + CHUNK])
            y = ev.y[idx_all[s : s + CHUNK]]
            for m in models:
                part = part_of[id(m)]
                if part == "draft" and not ev.drafted_by_impl:
                    continue
                if isinstance(m, SelfFitted):  # fits its own numbers (``_loglinear``, ``_ratio_law``)
                    m.collect(c, y)
                    continue
                for i, v in enumerate(m.FIT_GRID):
                    m.set_value(v)
                    totals[id(m)][i] += _part_ll(m, c, y, part)
    for m in models:
        if isinstance(m, SelfFitted):
            m.solve()
        else:
            m.settle(totals[id(m)])


def _part_ll(model: RoundModel, c: Chunk, y: np.ndarray, part: str) -> float:
    """The log-likelihood of one part's events of a chunk under a model (``_chunk_events``'s,
    without the cells: what a fit needs, at a fraction of the cost)."""
    g = c.X.shape[1]
    if part == "acceptance":
        A = np.clip(model.accept(c), 0.0, 1.0)
        pos = np.arange(g)[None, :]
        reached = pos <= np.minimum(c.k, g - 1)[:, None]
        return float(np.where(pos < c.k[:, None], _log(A), _log(1 - A))[reached].sum())
    if part == "draft":
        return float(_log(np.take_along_axis(model.draft_law(c), c.X[:, :, None], 2)).sum())
    rows = np.nonzero(c.k < g if part == "replacement" else c.k == g)[0]
    if not len(rows):
        return 0.0
    law = model.replaced(c, c.k[rows], rows) if part == "replacement" else model.bonus(c, rows)
    return float(_log(law[np.arange(len(rows)), y[rows]]).sum())


def _only_part(model: RoundModel) -> str:
    parts = _own_parts(model)
    assert len(parts) == 1, f"a fitted member changes one part ({model.name}: {sorted(parts)})"
    return next(iter(parts))
