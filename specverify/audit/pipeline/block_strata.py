"""The white-box strata of a unit audited under a declared block rule (``rule='block'``): the rows
the unit's rounds used, handed to :func:`specverify.stats._block.whitebox_block_tests`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...stats._block import BlockRows, whitebox_block_tests

if TYPE_CHECKING:
    from ...harness import Generation
    from ...stats import StratumResult
    from .config import AuditConfig
    from .plan import AuditUnit

__all__ = ["block_whitebox"]


def block_whitebox(
    unit: AuditUnit, pair: Any, gen: Generation, cfg: AuditConfig, rng: np.random.Generator
) -> list[StratumResult]:
    """Kernels: positional rows; round steps (context pairs): each draft's context row."""
    if gen.drafts is None:
        return []
    s = unit.settings
    P, Q = pair.target_table(s), pair.draft_table(s)
    if gen.draft_rows is not None:
        rows = BlockRows(P, Q, np.asarray(gen.draft_rows, dtype=np.int64)[:, : cfg.gamma])
    else:
        rows = BlockRows(P[: cfg.gamma + 1], Q[: cfg.gamma])
    return whitebox_block_tests(
        gen.tokens,
        gen.position,
        gen.rounds_of_tokens,
        gen.num_accepted,
        rows,
        drafts=np.asarray(gen.drafts, dtype=np.int64)[:, : cfg.gamma],
        token_rows=gen.row,
        drafts_from_implementation=bool(gen.drafts_from_implementation),
        rng=rng,
    )
