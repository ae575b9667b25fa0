"""Accepted drafts per pass, block verification against the chain rule, on the audit's own pairs.

For each unit of a kernel audit (the default settings x the low- and high-overlap positional pairs,
V = 64, gamma = 4, seed 0) this prints E[kept drafts per round] under the chain rule, exactly
(positional rows: sum_i prod_{j <= i} beta_j, beta_j = sum min(p_j, q_j)), and under block
verification, Rao-Blackwellised over N rounds of drafts x ~ q (the mean of E[tau | x], from the
exact law of tau given the drafts; its standard error beside it), with the same N drafts for the
chain rule's E[kept | x] = sum_i prod_{j <= i} min(1, p_j(x_j) / q_j(x_j)) as a check.

    .venv/bin/python scripts/block_acceptance.py [N]
"""

from __future__ import annotations

import sys

import numpy as np

from specverify.algorithms.block_verification import block_tau_law
from specverify.audit import KernelAdapter
from specverify.audit.pipeline.config import AuditConfig
from specverify.audit.pipeline.plan import plan_audit
from specverify.catalogue.block import block_kernel


def main(n: int = 200_000) -> None:
    cfg = AuditConfig()
    g = cfg.gamma
    print(f"{'unit':58s} {'chain exact':>11s} {'chain (x)':>10s} {'block (x)':>10s} {'+/- se':>7s} {'ratio':>6s}")
    for unit in plan_audit(KernelAdapter(block_kernel), cfg).units:
        pair = unit.make_pair("kernel", cfg)
        P, Q = pair.target_table(unit.settings)[: g + 1], pair.draft_table(unit.settings)[:g]
        beta = np.minimum(P[:g], Q).sum(1)
        chain = float(np.cumprod(beta).sum())
        rng = np.random.default_rng([cfg.seed, unit.index])
        cq = np.cumsum(Q, axis=1)
        x = np.stack(
            [
                np.minimum(np.searchsorted(cq[j], rng.random(n) * cq[j, -1], side="right"), Q.shape[1] - 1)
                for j in range(g)
            ],
            1,
        )
        _, law = block_tau_law(P[None], Q[None], x)
        e_block = law @ np.arange(g + 1)
        ratio = np.minimum(1.0, P[np.arange(g), x] / Q[np.arange(g), x])
        e_chain = np.cumprod(ratio, axis=1).sum(1)
        se = float(e_block.std() / np.sqrt(n))
        print(
            f"{unit.label:58s} {chain:11.4f} {e_chain.mean():10.4f} {e_block.mean():10.4f} {se:7.4f} "
            f"{e_block.mean() / chain:6.3f}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
