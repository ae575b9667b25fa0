"""Tree rules as a user writes them: round steps in the seed article's shape, for ``--round``.

A tree or multi-draft round is still one round: it starts at the prefix, emits one to depth + 1
tokens, and an exact rule emits them with the target's law. So a user audits a tree implementation
as any round step (``step(prefix, draft, target, gamma, rng) -> tokens``), and the audit's
sequence test applies unchanged::

    specverify audit --round specverify.catalogue.tree_steps:spectr_step                      # PASS
    specverify audit --round specverify.catalogue.tree_steps:spectr_single_draft_residual_step  # FAIL

Here ``draft(prefix)`` is the draft's row after ``prefix`` and ``target(prefix, path)`` the target's
len(path) + 1 rows along ``path``, one pass per root-to-leaf path. The steps:

* SpecTr's sequence form (:mod:`specverify.algorithms.spectr`): ``k`` i.i.d. draft sequences of
  length gamma; at each depth the k-sequential rule selects a token among the drafts that still
  match the output (a residual draw that equals a draft counts as a match) and those drafts go on;
  none left, the round ends; past depth gamma a bonus token comes from the target. ``k`` is an
  optional keyword (default 2), as a user's extra parameter would be. Mutants: the single-draft
  residual norm((p - q)+) after the k-sequential acceptances, and rho = 1 < rho* (residual clipped
  at 0 and renormalised). The diagnosis names them from the first token of each round
  (:mod:`specverify.diagnosis._tree`).
* Traversal verification (arXiv 2505.12398) on a full tree of shape ``branching`` (default 2 x 2),
  children drawn without replacement; mutant: the parent update min(1, r / (1 - Q(x))). On the
  default tree the diagnosis names it (``traversal_remaining_mass_weight``) from the first token of
  each round (:mod:`specverify.diagnosis._traversal`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..algorithms.spectr import SPECTR, SPECTR_VARIANTS, SpecTrRule, verify_spectr
from ..algorithms.traversal import (
    REMAINING_MASS,
    TRAVERSAL,
    TraversalVariant,
    branching_parents,
    verify_traversal,
)

__all__ = [
    "TREE_MUTANTS",
    "make_spectr_step",
    "make_traversal_tree_step",
    "spectr_step",
    "traversal_tree_step",
]

Step = Callable[..., list[int]]
Draft = Callable[[list[int]], Any]
Target = Callable[[list[int], list[int]], Any]


def _sample(w: Any, rng: np.random.Generator, exclude: Sequence[int] = ()) -> int:
    """One id from the unnormalised row ``w`` without the ids in ``exclude`` (inverse CDF)."""
    w = np.array(w, dtype=np.float64)
    w[list(exclude)] = 0.0
    c = np.cumsum(w)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), len(w) - 1))


def make_spectr_step(rule: SpecTrRule, name: str, doc: str = "") -> Step:
    """A round step running SpecTr's sequence form with node rule ``rule`` (module docstring)."""

    def step(prefix: Sequence[int], draft: Draft, target: Target, gamma: int, rng: np.random.Generator, *, k: int = 2):
        ctx = list(prefix)
        seqs: list[list[int]] = [[] for _ in range(k)]
        q_rows: list[list[np.ndarray]] = [[] for _ in range(k)]
        for s in range(k):  # k independent draft sequences
            for _ in range(gamma):
                q = np.asarray(draft(ctx + seqs[s]), dtype=np.float64)
                seqs[s].append(_sample(q, rng))
                q_rows[s].append(q)
        p_rows = [np.asarray(target(ctx, seqs[s]), dtype=np.float64) for s in range(k)]  # [gamma + 1, V] each
        alive, out = list(range(k)), list[int]()
        for d in range(gamma):
            s0 = alive[0]  # the drafts still alive share the output so far, hence their rows at d
            cands = [seqs[s][d] for s in alive]
            u = rng.random(len(cands)).tolist()
            kind, val = verify_spectr(p_rows[s0][d], q_rows[s0][d], cands, u, float(rng.random()), rule)
            y = cands[val] if kind == "accept" else val
            out.append(y)
            alive = [s for s in alive if seqs[s][d] == y]
            if not alive:
                return out
        out.append(_sample(p_rows[alive[0]][gamma], rng))  # bonus
        return out

    step.__name__ = step.__qualname__ = name
    step.__doc__ = doc or f"A round of SpecTr's sequence form, node rule {rule.name!r}."
    return step


def _draw_tree(
    prefix: list[int], draft: Draft, parents: Sequence[int], rng: np.random.Generator
) -> tuple[list[int], list[Any], list[int]]:
    """(tokens [N'], draft rows [N' + 1]: slot 0 the root's, slot n + 1 the row after node n, parents
    [N']) of the tree drawn: children without replacement, so a node whose earlier siblings used up
    its draft row's support is not there, nor is its subtree (the pruned tree the exact law
    :func:`specverify.algorithms.traversal.tree_draws` sums over)."""
    q_rows: list[np.ndarray] = [np.asarray(draft(prefix), dtype=np.float64)]
    tokens: list[int] = []
    paths: list[list[int]] = []
    kept: list[int] = []
    index: dict[int, int] = {-1: -1}  # node of the full shape -> node of the tree drawn
    for n, par in enumerate(parents):
        if par not in index:  # its parent is not there
            continue
        p = index[par]
        siblings = [tokens[m] for m in range(len(tokens)) if kept[m] == p]
        row = q_rows[p + 1]
        if row.sum() - row[siblings].sum() <= 0:  # the row's support is used up
            continue
        index[n] = len(tokens)
        tokens.append(_sample(row, rng, exclude=siblings))
        kept.append(p)
        paths.append((paths[p] if p >= 0 else []) + [tokens[-1]])
        q_rows.append(np.asarray(draft(prefix + paths[-1]), dtype=np.float64))
    return tokens, q_rows, kept


def make_traversal_tree_step(variant: TraversalVariant, name: str, doc: str = "") -> Step:
    """A round step running traversal verification ``variant`` on a full tree (module docstring);
    ``gamma`` is not read: the tree's depth is ``len(branching)``."""

    def step(
        prefix: Sequence[int],
        draft: Draft,
        target: Target,
        gamma: int,
        rng: np.random.Generator,
        *,
        branching: Sequence[int] = (2, 2),
    ) -> list[int]:
        ctx = list(prefix)
        tokens, q_rows, parents = _draw_tree(ctx, draft, branching_parents(branching), rng)
        p_rows: list[Any] = [None] * (len(parents) + 1)
        for leaf in (n for n in range(len(parents)) if n not in parents):
            path = [leaf]
            while parents[path[-1]] >= 0:
                path.append(parents[path[-1]])
            path.reverse()
            rows = np.asarray(target(ctx, [tokens[m] for m in path]), dtype=np.float64)  # one pass per path
            for slot, row in zip([0] + [m + 1 for m in path], rows):
                p_rows[slot] = row
        u = rng.random(len(parents)).tolist()
        return verify_traversal(p_rows, q_rows, tokens, parents, u, float(rng.random()), variant=variant)

    step.__name__ = step.__qualname__ = name
    step.__doc__ = doc or f"A round of traversal verification on a tree, variant {variant.name!r}."
    return step


spectr_step = make_spectr_step(SPECTR, "spectr_step", "SpecTr (k = 2 i.i.d. draft sequences, rho*), one round.")
spectr_rho_k_step = make_spectr_step(
    SPECTR_VARIANTS["spectr_rho_k"], "spectr_rho_k_step", "SpecTr with rho = k (exact, lower acceptance)."
)
spectr_single_draft_residual_step = make_spectr_step(
    SPECTR_VARIANTS["spectr_single_draft_residual"],
    "spectr_single_draft_residual_step",
    "SpecTr's k-sequential acceptances with the single-draft residual norm((p - q)+) (wrong).",
)
spectr_rho_one_step = make_spectr_step(
    SPECTR_VARIANTS["spectr_rho_one"],
    "spectr_rho_one_step",
    "SpecTr with rho = 1 < rho* for k >= 2, the residual clipped at 0 (wrong).",
)
traversal_tree_step = make_traversal_tree_step(
    TRAVERSAL, "traversal_tree_step", "Traversal verification on a 2 x 2 tree, one round."
)
traversal_tree_remaining_mass_step = make_traversal_tree_step(
    REMAINING_MASS,
    "traversal_tree_remaining_mass_step",
    "Traversal verification on a 2 x 2 tree, parent update min(1, r / (1 - Q(x))) (wrong).",
)

#: the exact tree steps (each must PASS) and the mutants (each must FAIL), by name
TREE_REFERENCES: dict[str, Step] = {f.__name__: f for f in (spectr_step, spectr_rho_k_step, traversal_tree_step)}
TREE_MUTANTS: dict[str, Step] = {
    f.__name__: f for f in (spectr_single_draft_residual_step, spectr_rho_one_step, traversal_tree_remaining_mass_step)
}
