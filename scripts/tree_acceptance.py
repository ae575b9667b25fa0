"""Accepted drafts per pass: SpecTr's sequence form and traversal verification on a tree against
the chain rule, on the audit's own kernel pairs (default settings x low / high overlap, V = 64).

The kernel pairs are positional (the rows at depth d are P[d], Q[d] whatever the path), so a round
of any rule is simulated in batch form on N rounds: the chain rule with gamma = 2 and 4 (exact:
sum_i prod_{j <= i} beta_j), SpecTr with k = 2 draft sequences of length 2 and 4
(``verify_spectr_batch`` at each depth on the drafts still alive), block verification (gamma = 4,
Rao-Blackwellised as in scripts/block_acceptance.py) and traversal verification on a 2 x 2 tree
(``verify_traversal_batch``). Printed: mean drafts kept per round (its standard error about
0.002-0.004 at N = 100,000) and the drafted tokens each rule spends per round.

    .venv/bin/python scripts/tree_acceptance.py [N]
"""

from __future__ import annotations

import sys

import numpy as np

from specverify.algorithms.block_verification import block_tau_law
from specverify.algorithms.spectr import SPECTR, verify_spectr_batch
from specverify.algorithms.traversal import branching_parents, verify_traversal_batch
from specverify.audit import KernelAdapter
from specverify.audit.pipeline.config import AuditConfig
from specverify.audit.pipeline.plan import plan_audit
from specverify.catalogue.block import block_kernel
from specverify.dists import inverse_cdf_sample


def _draw(q: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    return inverse_cdf_sample(np.broadcast_to(q, (n, len(q))), rng.random(n))


def spectr_kept(P: np.ndarray, Q: np.ndarray, k: int, depth: int, n: int, rng: np.random.Generator) -> float:
    """Mean drafts kept per round of SpecTr's sequence form (k sequences of ``depth`` drafts)."""
    alive, kept = np.full(n, k), np.zeros(n)
    for d in range(depth):
        nxt = np.zeros(n, dtype=np.int64)
        for a in range(1, k + 1):
            idx = np.flatnonzero(alive == a)
            if not len(idx):
                continue
            x = np.stack([_draw(Q[d], len(idx), rng) for _ in range(a)], 1)
            u = rng.random((len(idx), a)), rng.random(len(idx))
            res = verify_spectr_batch(P[d][None], Q[d][None], x, *u, SPECTR)
            nxt[idx] = (x == res.token[:, None]).sum(1)
        kept += nxt > 0
        alive = nxt
    return float(kept.mean())


def traversal_kept(P: np.ndarray, Q: np.ndarray, branching: tuple[int, ...], n: int, rng: np.random.Generator) -> float:
    """Mean drafts kept per round of traversal verification on the full tree ``branching``."""
    parents = branching_parents(branching)
    depth = [0] * len(parents)
    for i, par in enumerate(parents):
        depth[i] = 0 if par < 0 else depth[par] + 1
    x = np.empty((n, len(parents)), dtype=np.int64)
    for i, par in enumerate(parents):  # children of a slot without replacement
        w = np.broadcast_to(Q[depth[i]], (n, Q.shape[1])).copy()
        for m in range(i):
            if parents[m] == par:
                w[np.arange(n), x[:, m]] = 0.0
        x[:, i] = inverse_cdf_sample(w, rng.random(n))
    slot_depth = [0] + [d + 1 for d in depth]
    q = np.stack([Q[min(d, Q.shape[0] - 1)] for d in slot_depth])[None].repeat(n, 0)
    p = np.stack([P[d] for d in slot_depth])[None].repeat(n, 0)
    res = verify_traversal_batch(x, parents, q, p, rng.random((n, len(parents))), rng.random(n))
    return float(res.num_accepted.mean())


def main(n: int = 100_000) -> None:
    cfg = AuditConfig()
    g = cfg.gamma
    cols = ["chain g=2", "SpecTr 2x2", "chain g=4", "block g=4", "SpecTr 2x4", "trav 2x2"]
    print(f"{'unit':58s} " + " ".join(f"{c:>10s}" for c in cols))
    print(f"{'drafted tokens per round':58s} " + " ".join(f"{t:>10d}" for t in (2, 4, 4, 4, 8, 6)))
    for unit in plan_audit(KernelAdapter(block_kernel), cfg).units:
        pair = unit.make_pair("kernel", cfg)
        P, Q = pair.target_table(unit.settings)[: g + 1], pair.draft_table(unit.settings)[:g]
        beta = np.minimum(P[:g], Q).sum(1)
        rng = np.random.default_rng([cfg.seed, unit.index, 24])
        x = np.stack([_draw(Q[j], n, rng) for j in range(g)], 1)
        _, law = block_tau_law(P[None], Q[None], x)
        vals = [
            float(np.cumprod(beta[:2]).sum()),
            spectr_kept(P, Q, 2, 2, n, rng),
            float(np.cumprod(beta).sum()),
            float((law @ np.arange(g + 1)).mean()),
            spectr_kept(P, Q, 2, 4, n, rng),
            traversal_kept(P, Q, (2, 2), n, rng),
        ]
        print(f"{unit.label:58s} " + " ".join(f"{v:10.4f}" for v in vals))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
