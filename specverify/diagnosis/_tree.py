"""Diagnosis of tree and multi-draft round steps, from the first token of each round.

A round step that runs its target passes along more than one path (``Generation.paths`` > 1: a
tree, or several draft sequences) shows no chain of drafts, so the round scorer has no events to
score. What it does show is each round's first token, whose law given the round's prefix is exact
and cheap for SpecTr's k-sequential rule (:mod:`specverify.algorithms.spectr`): with target row p,
draft row q, k drafts and rho,

    m = min(q, p / rho),   beta = sum m,   S = sum_{j < k} (1 - beta)^j,
    law(y) = m(y) S + (1 - beta)^k R(y) / sum R,

R the residual the rule draws from: p - m S at rho* for the exact rule (the law is p), (p - q)+
for ``spectr_single_draft_residual``, max(p - m S, 0) at rho = 1 for ``spectr_rho_one``. The number
of drafts k is fitted over ``K_GRID`` and paid log(len(K_GRID)) nats. Traversal verification's
first token depends on the whole tree (an exact law sums over every tree drawn), so its mutants on
a tree are not modelled here: they FAIL with "not a known class" (on a chain of drafts the round
scorer names them). Cells for the explained share: target-mass bands, as in :mod:`._score`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spectr import _beta_batch, _geometric_batch, _optimal_batch
from ._diagnose import NOT_KNOWN, Diagnosis
from ._score import _bands
from ._tokens import TokenScores

if TYPE_CHECKING:  # the audit's types, for annotations only: the diagnosis sits below the audit
    from ..audit.pipeline.collect import UnitSample
    from ..audit.pipeline.plan import AuditPlan
    from ..audit.sources.adapters import Adapter
    from ..harness import Generation
    from ._tokens import TokenUnit

__all__ = ["diagnose_tree", "is_tree", "tree_units", "spectr_first_token_law", "TREE_FACTS", "K_GRID"]

K_GRID = (2, 3, 4)  # drafts per node the SpecTr classes may have
TREE_ROUNDS = 40_000  # first tokens scored per unit at most: a stated size that keeps it to seconds


def is_tree(gen: Generation) -> bool:
    """Most of the rounds ran target passes along more than one path."""
    return gen.paths is not None and len(gen.paths) > 0 and float((gen.paths > 1).mean()) > 0.5


def tree_units(
    adapter: Adapter, plan: AuditPlan, pairs: dict[int, Any], samples: dict[int, UnitSample]
) -> list[TokenUnit]:
    """(Generation, pair, settings, label) of every tree-shaped unit on a table pair."""
    out: list[TokenUnit] = []
    for u in plan.units:
        s, pair = samples.get(u.index), pairs.get(u.index)
        gen: Generation | None = getattr(s, "gen", None)
        if gen is None or not len(gen.tokens) or not is_tree(gen) or not hasattr(pair, "target_table"):
            continue
        if u.settings is None or u.settings.uses_history or u.settings.is_greedy or getattr(adapter, "greedy", False):
            continue
        if not getattr(pair, "tabled", True):
            continue
        out.append((gen, pair, u.settings, u.label))
    return out


def spectr_first_token_law(p: np.ndarray, q: np.ndarray, k: int, residual: str) -> np.ndarray:
    """[n, V] law of the token a SpecTr node emits with k drafts (module docstring); ``residual``:
    'exact' (rho*), 'single_draft' ((p - q)+ at rho*) or 'rho_one' (rho = 1, clipped)."""
    rho = np.ones(len(p)) if residual == "rho_one" else _optimal_batch(p, q, k)
    m = np.minimum(q, p / rho[:, None])
    beta = _beta_batch(p, q, rho)
    s = _geometric_batch(beta, k)
    r = np.maximum(p - q, 0.0) if residual == "single_draft" else np.maximum(p - m * s[:, None], 0.0)
    mass = r.sum(1, keepdims=True)
    r = np.where(mass > 0, r / np.where(mass > 0, mass, 1.0), p)
    out: np.ndarray = m * s[:, None] + ((1 - beta) ** k)[:, None] * r
    return out


def _unit_laws(p: np.ndarray, q: np.ndarray, y: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """({class: law [n, V]}, {class: fitted k}) of first tokens ``y`` with rows p, q [n, V]."""
    laws: dict[str, np.ndarray] = {"target": p}
    params: dict[str, str] = {}
    ar = np.arange(len(y))
    best: dict[str, tuple[float, int, np.ndarray]] = {}
    for k in K_GRID:
        for name, residual in (("spectr_single_draft_residual", "single_draft"), ("spectr_rho_one", "rho_one")):
            law = spectr_first_token_law(p, q, k, residual)
            ll = float(np.log(np.maximum(law[ar, y], 1e-9)).sum())
            if name not in best or ll > best[name][0]:
                best[name] = (ll, k, law)
    laws["spectr_single_draft_residual"] = best["spectr_single_draft_residual"][2]
    laws["spectr_rho_one"] = best["spectr_rho_one"][2]
    for name, (_, k, _) in best.items():
        params[name] = f"k = {k} drafts per node"
    return laws, params


def diagnose_tree(units: Sequence[TokenUnit], *, min_llr: float = 10.0, min_explained: float = 0.9) -> Diagnosis | None:
    """Rank the tree classes on the units of :func:`tree_units` (module docstring)."""
    if not units:
        return None
    acc = TokenScores(4, "token")
    pay = float(np.log(len(K_GRID)))
    for gen, pair, settings, label in units:
        first = np.flatnonzero(gen.position == 0)[:TREE_ROUNDS]
        r, y = gen.row[first], gen.tokens[first]
        p, q = pair.target_table(settings)[r], pair.draft_table(settings)[r]
        laws, params = _unit_laws(p, q, y)
        acc.add_unit(label, laws, y, _bands(p), pay={n: pay for n in laws if n != "target"}, params=params)
    ranked, params_by = acc.ranked(), acc.params
    top = ranked[0]
    known = top.qualifies(min_llr, min_explained)
    facts = [
        "the rounds run target passes along several paths (a tree or several draft sequences): each round's first "
        "token scored against the target's law given the round's prefix, and against each tree class's law"
    ]
    if known:
        unit = max(top.llr_by_unit, key=lambda k: top.llr_by_unit[k])
        facts.append(f"{TREE_FACTS[top.name]} (strongest in {unit}: {params_by[top.name][unit]})")
    method = (
        f"law of the first token of each of {acc.tokens:,} tree rounds under each tree class (at most "
        f"{TREE_ROUNDS:,} per unit); k fitted over {list(K_GRID)} and paid {pay:.1f} nats; events floored at 1e-9"
    )
    return Diagnosis(top.name if known else NOT_KNOWN, ranked, facts, method, min_llr, min_explained, acc.tokens)


TREE_FACTS = {
    "spectr_single_draft_residual": (
        "the first tokens follow SpecTr's k-sequential acceptances followed by the single-draft residual (p - q)+"
    ),
    "spectr_rho_one": "the first tokens follow SpecTr's rule with rho = 1 and its residual clipped at 0",
}
