"""Tree and multi-draft samplers over table models, for audits of the variants in
:mod:`specverify.algorithms.multi_draft` (exact ones must PASS; inexact ones FAIL; Medusa's
typical acceptance FAILs labelled lossy by design, with its deviation computed exactly)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ..algorithms.multi_draft import Pairing, draw_candidates, node_outcome_law, verify_node_procedural
from ..dists import SamplingSettings
from ..harness import ChainSampler, RoundOutput
from ..lm.synthetic import TablePair

__all__ = ["TreeSampler", "first_token_deviation"]


class TreeSampler(ChainSampler):
    """One tree round per call: candidates per node by the pairing's mechanism from the draft row
    at the node's path, verified top-down by the pairing's node rule."""

    harness = "sequence"

    def __init__(self, pairing: Pairing, branching: Sequence[int] = (2, 2)) -> None:
        self.pairing = pairing
        self.branching = tuple(branching)
        self.name = f"tree:{pairing.name}"
        self.exact = pairing.exact
        self.lossy_by_design = pairing.lossy_by_design
        self.source = pairing.source

    def round(
        self,
        pair: TablePair,
        ctx: npt.NDArray[np.int64],
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        P, Q = pair.target_table(settings), pair.draft_table(settings)
        depth = len(self.branching)
        b = len(ctx)
        tokens = np.full((b, depth + 1), -1, dtype=np.int64)
        n_acc = np.zeros(b, dtype=np.int64)
        for i in range(b):
            c = int(ctx[i])
            for d in range(depth + 1):
                p = P[c]
                if d == depth:
                    tokens[i, d] = int(rng.choice(len(p), p=p))
                    break
                q = Q[c]
                cands = draw_candidates(q, self.branching[d], self.pairing.mechanism, rng)
                kind, val = verify_node_procedural(p, q, cands, self.pairing.rule, rng)
                if kind == "accept":
                    tokens[i, d] = cands[val]
                    c = cands[val]
                    n_acc[i] += 1
                else:
                    tokens[i, d] = val
                    break
        ar = np.arange(b)
        return RoundOutput(tokens, n_acc, np.zeros((b, max(1, depth)), dtype=np.int64), tokens[ar, n_acc])

    def exact_deviation(self, pair: TablePair, settings: SamplingSettings | None) -> tuple[float, float]:
        """(mean, max) over contexts of the exact TV between the first emitted token's law and p."""
        P, Q = pair.target_table(settings), pair.draft_table(settings)
        tvs = [first_token_deviation(self.pairing, P[c], Q[c], self.branching[0]) for c in range(P.shape[0])]
        return float(np.mean(tvs)), float(np.max(tvs))


def first_token_deviation(pairing: Pairing, p: Iterable[float], q: Iterable[float], k: int) -> float:
    """Exact TV between the law of the first emitted token and p, at one node (float64)."""
    from ..algorithms.multi_draft import candidate_law

    p = [float(x) for x in p]
    q = [float(x) for x in q]
    law = np.zeros(len(p))
    for cands, cw in candidate_law(q, k, pairing.mechanism).items():
        for (kind, val), w in node_outcome_law(p, q, cands, pairing.rule).items():
            law[cands[val] if kind == "accept" else val] += cw * w
    return float(0.5 * np.abs(law - np.asarray(p)).sum())
