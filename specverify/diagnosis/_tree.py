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
of drafts k is fitted over ``K_GRID`` and paid log(len(K_GRID)) nats.

Traversal verification's first token depends on the whole tree: an exact law sums over every tree
drawn (about 6e10 terms per context at V = 64), and the law given M whole drawn trees, averaged,
is too noisy at V = 64 (which two tokens the root's children are carries most of the variance: with
M = 16 trees per round the mutant's own rounds scored 49 nats below the target's law).
:mod:`._traversal` sums the root's two children exactly and draws only the leaves:
``traversal_remaining_mass_weight`` (the parent update min(1, r / (1 - Q(x))), the class the round
scorer names on a chain) gets, on the catalogue step's 2 x 2 tree (children drawn without
replacement, as :func:`specverify.catalogue.tree_steps.make_traversal_tree_step`), a law that is
exact over the root's children and estimated over ``LEAF_DRAWS`` leaf pairs per table row (drawn
with ``TRAVERSAL_SEED``, independent of the audited data; a control variate from the exact rule,
whose subtree acceptance is known in closed form). Each round's prefix is rebuilt from the unit's
prompts, and the rows after each root child from ``pair.row_of``. The class is scored on the first
``TRAVERSAL_ROUNDS`` rounds of each unit (0.5-1 ms a round at V = 64), where every class is
scored: when it leads them there and qualifies, it is named from those rounds; otherwise the SpecTr
classes are ranked on up to ``TREE_ROUNDS`` rounds as before. Other tree shapes or traversal
mutants are not modelled: they FAIL with "not a known class". Cells for the explained share:
target-mass bands, as in :mod:`._score`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spectr import _beta_batch, _geometric_batch, _optimal_batch
from ..algorithms.traversal import REMAINING_MASS
from ._diagnose import NOT_KNOWN, Diagnosis
from ._score import _bands
from ._tokens import TokenScores
from ._traversal import BRANCHING, RowSums, first_token_law, leaf_draws

if TYPE_CHECKING:  # the audit's types, for annotations only: the diagnosis sits below the audit
    from ..audit.pipeline.collect import UnitSample
    from ..audit.pipeline.plan import AuditPlan
    from ..audit.sources.adapters import Adapter
    from ..dists import SamplingSettings
    from ..harness import Generation
    from ._tokens import TokenUnit

__all__ = [
    "diagnose_tree",
    "is_tree",
    "tree_units",
    "spectr_first_token_law",
    "traversal_unit_law",
    "TREE_FACTS",
    "K_GRID",
]

K_GRID = (2, 3, 4)  # drafts per node the SpecTr classes may have
TREE_ROUNDS = 40_000  # first tokens scored per unit at most: a stated size that keeps it to seconds
TRAVERSAL_ROUNDS = 1_000  # first tokens per unit scored under the traversal class (0.5-1 ms each at V = 64)
LEAF_DRAWS = 4  # leaf pairs drawn per table row (for each root child's role) in the traversal class's law
TRAVERSAL_SEED = 2505_12398  # the leaves' generator: fixed, independent of the audited data
_CHUNK = 256  # contexts per block of the traversal law ([chunk, V, V] arrays)


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


def _round_prefixes(gen: Generation, first: np.ndarray) -> list[list[int]] | None:
    """The prefix of each round starting at token index ``first``: the sequence's prompt and the
    tokens emitted before it (None without recorded prompts)."""
    if gen.prompts is None:
        return None
    seq = gen.sequence
    start = np.r_[0, np.flatnonzero(np.diff(seq)) + 1]
    begin = np.repeat(start, np.diff(np.r_[start, len(seq)]))  # index of each token's sequence start
    out = []
    for i in first.tolist():
        prompt = gen.prompts[seq[i]]
        out.append(prompt[prompt >= 0].tolist() + gen.tokens[begin[i] : i].tolist())
    return out


def _child_key(pair: Any, prefix: list[int]) -> tuple[int, ...]:
    """What the rows after prefix + [x] depend on: for a context pair of order k, the length and the
    last k - 1 tokens (its rows key on the length and the last k tokens); else the whole prefix."""
    order = getattr(pair, "order", None)
    if order is None:
        return tuple(prefix)
    return (len(prefix), *prefix[max(0, len(prefix) - order + 1) :])


def traversal_unit_law(
    gen: Generation, pair: Any, settings: SamplingSettings, index: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(law [n, V] of the first token of each of the unit's first ``TRAVERSAL_ROUNDS`` rounds under
    ``traversal_remaining_mass_weight`` on a 2 x 2 tree, first tokens [n], target rows [n, V]); None
    when the unit's prefixes cannot be rebuilt (no prompts, no ``row_of``, or a row that disagrees), and
    when a draft row has fewer than two tokens (top-k, top-p, min-p): a tree drawn without replacement
    is then pruned, which the 2 x 2 law does not model (the rule's own tree steps prune it)."""
    if int((pair.draft_table(settings) > 0).sum(1).min()) < 2:
        return None
    first = np.flatnonzero(gen.position == 0)[:TRAVERSAL_ROUNDS]
    prefixes = _round_prefixes(gen, first) if hasattr(pair, "row_of") else None
    if prefixes is None or not len(first):
        return None
    r0 = gen.row[first]
    v = pair.vocab_size
    keys: dict[tuple[int, ...], int] = {}
    child_rows: list[list[int]] = []
    cid = np.empty(len(first), dtype=np.int64)
    for j, prefix in enumerate(prefixes):
        if pair.row_of(prefix) != r0[j]:
            return None  # the rebuilt prefix is not the recorded one: no law rather than a wrong one
        key = _child_key(pair, prefix)
        if key not in keys:
            keys[key] = len(child_rows)
            child_rows.append([pair.row_of(prefix + [x]) for x in range(v)])
        cid[j] = keys[key]
    T, D = pair.target_table(settings), pair.draft_table(settings)
    ctx, inverse = np.unique(np.stack([r0, cid], 1), axis=0, return_inverse=True)  # contexts repeat
    child = np.asarray(child_rows, dtype=np.int64)[ctx[:, 1]]
    rng = np.random.default_rng([TRAVERSAL_SEED, index])
    leaves = (leaf_draws(D, LEAF_DRAWS, rng), leaf_draws(D, LEAF_DRAWS, rng))  # x0's and x1's subtrees
    sums = RowSums(T, D)
    law = np.concatenate(
        [
            first_token_law(T, D, ctx[s : s + _CHUNK, 0], child[s : s + _CHUNK], leaves, REMAINING_MASS, sums)
            for s in range(0, len(ctx), _CHUNK)
        ]
    )
    return law[inverse.ravel()], gen.tokens[first], T[r0]


def _spectr_scores(units: Sequence[TokenUnit], pay: float) -> TokenScores:
    """The target and the SpecTr classes on the first ``TREE_ROUNDS`` rounds of each unit."""
    acc = TokenScores(4, "token")
    for gen, pair, settings, label in units:
        first = np.flatnonzero(gen.position == 0)[:TREE_ROUNDS]
        r, y = gen.row[first], gen.tokens[first]
        p, q = pair.target_table(settings)[r], pair.draft_table(settings)[r]
        laws, params = _unit_laws(p, q, y)
        acc.add_unit(label, laws, y, _bands(p), pay={n: pay for n in laws if n != "target"}, params=params)
    return acc


def _traversal_scores(units: Sequence[TokenUnit], pay: float) -> TokenScores:
    """Every tree class, traversal's among them, on the first ``TRAVERSAL_ROUNDS`` rounds of each
    unit whose prefixes can be rebuilt: the classes compared on the same rounds."""
    acc = TokenScores(4, "token")
    tree = " x ".join(map(str, BRANCHING))
    for index, (gen, pair, settings, label) in enumerate(units):
        got = traversal_unit_law(gen, pair, settings, index)
        if got is None:
            continue
        law, y, p = got
        first = np.flatnonzero(gen.position == 0)[: len(y)]
        laws, params = _unit_laws(p, pair.draft_table(settings)[gen.row[first]], y)
        laws["traversal_remaining_mass_weight"] = law
        params["traversal_remaining_mass_weight"] = f"{tree} tree, {len(y):,} rounds"
        acc.add_unit(label, laws, y, _bands(p), pay={n: pay for n in laws if n.startswith("spectr")}, params=params)
    return acc


def diagnose_tree(units: Sequence[TokenUnit], *, min_llr: float = 10.0, min_explained: float = 0.9) -> Diagnosis | None:
    """Rank the tree classes on the units of :func:`tree_units` (module docstring): the SpecTr
    classes on up to ``TREE_ROUNDS`` rounds a unit; the traversal class, when it leads every class
    on the first ``TRAVERSAL_ROUNDS`` rounds and qualifies there, is named from those rounds."""
    if not units:
        return None
    pay = float(np.log(len(K_GRID)))
    acc, trav = _spectr_scores(units, pay), _traversal_scores(units, pay)
    ranked = acc.ranked()
    sub = trav.ranked() if trav.tokens else []
    on_sub = bool(sub) and sub[0].name == "traversal_remaining_mass_weight" and sub[0].qualifies(min_llr, min_explained)
    if on_sub:
        acc, ranked = trav, sub
    else:  # the traversal class listed after the others, with its score on its own rounds
        ranked += [c for c in sub if c.name == "traversal_remaining_mass_weight"]
    top = ranked[0]
    known = top.qualifies(min_llr, min_explained)
    facts = [
        "the rounds run target passes along several paths (a tree or several draft sequences): each round's first "
        "token scored against the target's law given the round's prefix, and against each tree class's law"
    ]
    if known:
        unit = max(top.llr_by_unit, key=lambda k: top.llr_by_unit[k])
        facts.append(f"{TREE_FACTS[top.name]} (strongest in {unit}: {acc.params[top.name][unit]})")
    scope = f"the first {TRAVERSAL_ROUNDS:,}" if on_sub else f"at most {TREE_ROUNDS:,}"
    method = (
        f"law of the first token of each of {acc.tokens:,} tree rounds under each tree class ({scope} per unit); k "
        f"fitted over {list(K_GRID)} and paid {pay:.1f} nats; traversal_remaining_mass_weight on the first "
        f"{TRAVERSAL_ROUNDS:,} rounds of each unit ({trav.tokens:,} rounds, every class compared there), its law "
        f"summed over the root's children on a {' x '.join(map(str, BRANCHING))} tree and over {LEAF_DRAWS} leaf "
        "pairs drawn per table row; events floored at 1e-9"
    )
    return Diagnosis(top.name if known else NOT_KNOWN, ranked, facts, method, min_llr, min_explained, acc.tokens)


TREE_FACTS = {
    "spectr_single_draft_residual": (
        "the first tokens follow SpecTr's k-sequential acceptances followed by the single-draft residual (p - q)+"
    ),
    "spectr_rho_one": "the first tokens follow SpecTr's rule with rho = 1 and its residual clipped at 0",
    "traversal_remaining_mass_weight": (
        "the first tokens follow traversal verification whose parent weight after a rejected child is "
        "min(1, r / (1 - Q(x))) instead of r / (1 - w + r)"
    ),
}
