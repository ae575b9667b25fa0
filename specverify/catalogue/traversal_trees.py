"""Traversal verification on a tree, audited through the sequence harness (issue 24).

:mod:`specverify.catalogue.block` audits traversal verification's kernel on a chain of drafts,
where it is block verification. :class:`TraversalTreeSampler` runs it on a real tree: one round per
call, the tree of shape ``branching`` drawn over the pair's draft table (the children of a slot
without replacement from the draft row after the slot's token, the table pair being order-1 Markov),
the target and draft rows of every slot gathered, and :func:`~specverify.algorithms.traversal.
verify_traversal_batch` run on the whole batch at once. The audit compares the law of the emitted
sequences with the target's: the rule PASSes, its wrong parent update (``remaining_mass_weight``,
h = min(1, r / (1 - Q(x)))) FAILs. Any SpecTr or other multi-draft pairing goes through
:class:`~specverify.catalogue.trees.TreeSampler` the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..algorithms.traversal import TRAVERSAL, TraversalVariant, branching_parents, verify_traversal_batch
from ..dists import SamplingSettings, inverse_cdf_sample
from ..errors import UnsupportedSettingError
from ..harness import ChainSampler, RoundOutput
from ..lm.synthetic import TablePair

__all__ = ["TraversalTreeSampler", "draw_tree"]


def draw_tree(
    Q: npt.NDArray[np.float64], ctx: npt.NDArray[np.int64], parents: Sequence[int], rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """[B, N] node tokens: node n drawn from Q[its parent's token] (Q[ctx] under the root) without its
    earlier siblings' tokens, by the inverse CDF at one uniform per node."""
    b = len(ctx)
    x = np.empty((b, len(parents)), dtype=np.int64)
    ar = np.arange(b)
    for n, par in enumerate(parents):
        w = Q[ctx if par < 0 else x[:, par]].copy()  # [B, V]
        for m in range(n):
            if parents[m] == par:
                w[ar, x[:, m]] = 0.0
        if not (w > 0).any(axis=1).all():
            raise UnsupportedSettingError(
                f"node {n}: a draft row has fewer tokens with q > 0 than the tree has siblings (greedy or top-k "
                "drafting); this sampler's trees are full, without replacement"
            )
        x[:, n] = inverse_cdf_sample(w, rng.random(b))
    return x


class TraversalTreeSampler(ChainSampler):
    """One traversal-verification round per call on a tree of shape ``branching`` (module docstring)."""

    harness = "sequence"
    rule = None  # the chain rule's white-box strata do not apply to a tree

    def __init__(self, variant: TraversalVariant = TRAVERSAL, branching: Sequence[int] = (2, 2)) -> None:
        self.variant = variant
        self.branching = tuple(branching)
        self.parents = branching_parents(self.branching)
        self.name = f"traversal_tree:{variant.name}:{'x'.join(map(str, self.branching))}"
        self.exact = not variant.remaining_mass
        self.source = "Traversal verification (arXiv 2505.12398) on a tree" + (
            "" if self.exact else ", with the parent weight min(1, r / (1 - Q(x))) (wrong)"
        )

    def round(
        self,
        pair: TablePair,
        ctx: npt.NDArray[np.int64],
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        P, Q = pair.target_table(settings), pair.draft_table(settings)
        ctx = np.asarray(ctx, dtype=np.int64)
        b = len(ctx)
        x = draw_tree(Q, ctx, self.parents, rng)
        slots = np.concatenate([ctx[:, None], x], axis=1)  # the token each slot's rows follow
        n = len(self.parents)
        res = verify_traversal_batch(
            x, self.parents, Q[slots], P[slots], rng.random((b, n)), rng.random(b), variant=self.variant
        )
        ar = np.arange(b)
        last = res.tokens[ar, res.num_accepted]
        return RoundOutput(res.tokens, res.num_accepted, np.zeros((b, len(self.branching)), dtype=np.int64), last)
