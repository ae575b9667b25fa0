"""Block verification and traversal verification in the audit: the reference kernels and round
steps (they must PASS), and the catalogue's mutants of each rule (they must FAIL, named).

A block-verification kernel has the chain kernel's I/O, ``kernel(draft_tokens, draft_probs,
target_probs, generator) -> [B, gamma + 1]`` (-1 padded), and a round step the seed article's,
``step(prefix, draft, target, gamma, rng) -> tokens``; only the acceptance rule differs. Every
callable here declares ``specverify_rule = "block"``, so the audit adds block verification's
white-box strata (:mod:`specverify.stats._block`) with no option::

    specverify audit --kernel specverify.catalogue.block:block_kernel                 # PASS
    specverify audit --kernel specverify.catalogue.block:block_weight_test_chain_residual_kernel  # FAIL

(``KernelAdapter(fn, rule="block")`` declares the rule for any other kernel.) Traversal
verification on a chain of drafts is block verification (:mod:`specverify.algorithms.traversal`),
so its kernels run the traversal code on the chain and are audited under the block rule too.

:data:`MUTANTS` lists each mutant with the mechanism, what to check and its source; the diagnosis
has one record per mutant (``specverify.diagnosis._classes``), whose round model is the mutant's
exact law (:class:`specverify.diagnosis._block_models.BlockVariantModel`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..algorithms.block_verification import BLOCK, BLOCK_VARIANTS, BlockVariant, verify_block, verify_block_batch
from ..algorithms.traversal import REMAINING_MASS, TRAVERSAL, TraversalVariant, chain_parents, verify_traversal_batch

__all__ = [
    "BlockMutant",
    "MUTANTS",
    "REFERENCES",
    "block_kernel",
    "block_step",
    "traversal_chain_kernel",
    "make_block_kernel",
    "make_block_step",
    "make_traversal_chain_kernel",
    "variant",
]

Kernel = Callable[[np.ndarray, np.ndarray, np.ndarray, np.random.Generator], np.ndarray]
Step = Callable[..., list[int]]


def variant(name: str) -> BlockVariant:
    """The block variant of :data:`BLOCK_VARIANTS` called ``name``."""
    return {v.name: v for v in BLOCK_VARIANTS}[name]


def _declare(fn: Any, name: str, doc: str) -> None:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn.specverify_rule = "block"  # the audit's white-box strata of block verification


def make_block_kernel(v: BlockVariant, name: str, doc: str = "") -> Kernel:
    """A batched block-verification kernel implementing ``v`` (uniforms drawn from ``generator``)."""

    def kernel(
        draft_tokens: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, generator: np.random.Generator
    ) -> np.ndarray:
        b, g = np.shape(draft_tokens)
        ua, uf = generator.random((b, g)), generator.random(b)
        return verify_block_batch(draft_tokens, draft_probs, target_probs, ua, uf, variant=v).tokens

    _declare(kernel, name, doc or f"Block verification, variant {v.name!r} (batched).")
    return kernel


def make_traversal_chain_kernel(v: TraversalVariant, name: str, doc: str = "") -> Kernel:
    """Traversal verification (``v``) on the chain of drafts, with the chain kernel's I/O: the leaf's
    draft row, never read, is the bonus target row."""

    def kernel(
        draft_tokens: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, generator: np.random.Generator
    ) -> np.ndarray:
        x = np.asarray(draft_tokens)
        b, g = x.shape
        p = np.asarray(target_probs)
        q = np.concatenate([np.broadcast_to(draft_probs, (b,) + np.shape(draft_probs)[1:]), p[:, g:]], axis=1)
        ua, uf = generator.random((b, g)), generator.random(b)
        res = verify_traversal_batch(x, chain_parents(g), q, p, ua, uf, variant=v)
        out = np.full((b, g + 1), -1, dtype=np.int64)
        out[:, : res.tokens.shape[1]] = res.tokens
        return out

    _declare(kernel, name, doc or f"Traversal verification on a chain, variant {v.name!r} (batched).")
    return kernel


def make_block_step(v: BlockVariant, name: str, doc: str = "") -> Step:
    """A round step ``step(prefix, draft, target, gamma, rng)`` drafting gamma tokens from
    ``draft`` and verifying them with block verification ``v`` (the scalar reference)."""

    def step(
        prefix: Sequence[int],
        draft: Callable[[list[int]], Any],
        target: Callable[[list[int], list[int]], Any],
        gamma: int,
        rng: np.random.Generator,
    ) -> list[int]:
        ctx, xs, q_rows = list(prefix), list[int](), list[list[float]]()
        for _ in range(gamma):
            q = np.asarray(draft(ctx + xs), dtype=np.float64)
            xs.append(int(np.searchsorted(np.cumsum(q), rng.random() * q.sum(), side="right").clip(0, len(q) - 1)))
            q_rows.append(q.tolist())
        p_rows = np.asarray(target(ctx, xs), dtype=np.float64).tolist()
        return verify_block(p_rows, q_rows, xs, rng.random(gamma).tolist(), float(rng.random()), variant=v)

    _declare(step, name, doc or f"A round of block verification, variant {v.name!r}.")
    return step


@dataclasses.dataclass(frozen=True)
class BlockMutant:
    """One mutant of a rule: its bug class name, the rule as implemented, and the record's text."""

    name: str
    variant: BlockVariant  # the law it follows, as a block variant (a traversal mutant: its chain form)
    mechanism: str
    check: str
    source: str
    kernel: Kernel
    step: Step | None = None


def _mutant(name: str, v: str, mechanism: str, check: str, source: str, *, traversal: bool = False) -> BlockMutant:
    bv = variant(v)
    if traversal:
        kernel = make_traversal_chain_kernel(REMAINING_MASS, f"{name}_kernel", mechanism)
        return BlockMutant(name, bv, mechanism, check, source, kernel)
    step = make_block_step(bv, f"{name}_step", mechanism)
    return BlockMutant(name, bv, mechanism, check, source, make_block_kernel(bv, f"{name}_kernel", mechanism), step)


MUTANTS: tuple[BlockMutant, ...] = (
    _mutant(
        "block_weight_test_chain_residual",
        "weight_test_unadjusted_residual",
        "Block verification implemented with the token-wise acceptance test and an unadjusted residual: the "
        "block is cut at the largest i with u_i < w_i (the capped prefix ratio itself, not the threshold "
        "h_i = r_i / (1 - w_i + r_i)), and the token after it is drawn from the chain rule's (p - q)+ instead "
        "of (w_tau p - q)+.",
        "the block rule's acceptance threshold (Equation 5 of Sun et al.: h_i from the next position's "
        "residual mass) and its residual (Equation 4: max(w_tau p - q, 0))",
        "vllm-project/vllm-ascend#7807 (fixed in #7808)",
    ),
    _mutant(
        "block_weight_test",
        "weight_test",
        "Block verification with the token-wise test alone: the block is cut at the largest i with u_i < w_i "
        "(the capped prefix ratio) instead of u_i < h_i = r_i / (1 - w_i + r_i); the residual is the paper's.",
        "the acceptance threshold of each prefix: h_i = r_i / (1 - w_i + r_i) for i < gamma, w_gamma at the end",
        "vllm-project/vllm-ascend#7807 (its acceptance half)",
    ),
    _mutant(
        "block_chain_residual",
        "unadjusted_residual",
        "Block verification whose token after tau kept drafts is drawn from the chain rule's residual "
        "(p - q)+ instead of (w_tau p - q)+: right whenever no draft is kept (w_0 = 1), wrong after one.",
        "the residual after tau kept drafts: max(w_tau p_{tau+1} - q_{tau+1}, 0), with the prefix weight",
        "vllm-project/vllm-ascend#7807 (its residual half: sample_recovered_tokens unchanged by block_verify)",
    ),
    _mutant(
        "block_threshold_off_by_one",
        "threshold_off_by_one",
        "Block verification's thresholds read the residual mass one position early: h_i from r_{i-1} = "
        "sum max(w_{i-1} p_i - q_i, 0) (Z_i) instead of r_i = sum max(w_i p_{i+1} - q_{i+1}, 0) (Z_{i+1}).",
        "the index of the residual mass in h_i = Z_{i+1} / (Z_{i+1} + 1 - w_i): the next position's",
        "structural mutant (vllm-project/vllm#46781's notation: h_i = Z_{i+1} / (Z_{i+1} + 1 - p_i))",
    ),
    _mutant(
        "block_final_position_untested",
        "final_position_untested",
        "Block verification forgets the final position: the scan for the longest passing prefix starts at "
        "gamma - 1, so the whole block (threshold h_gamma = w_gamma) is never kept and no bonus is drawn.",
        "the scan's range: position gamma is tested against w_gamma, and keeping it draws the bonus from p",
        "structural mutant (a loop bound one short)",
    ),
    _mutant(
        "traversal_remaining_mass_weight",
        "remaining_mass_threshold",
        "Traversal verification updates a parent's weight after a child is rejected as min(1, r / (1 - Q(x))), "
        "the residual's mass over the draft mass left, instead of r / (1 - w + r); on a chain this is block "
        "verification with the thresholds h_i = min(1, r_i / (1 - q_{i+1}(x_{i+1}))).",
        "the parent update after a rejected child: w <- r / (1 - w + r) with r the residual's mass",
        "structural mutant (a misreading of arXiv 2505.12398's parent update, met while deriving it)",
        traversal=True,
    ),
)

block_kernel = make_block_kernel(BLOCK, "block_kernel", "Block verification (Sun et al., ICLR 2025), batched.")
block_step = make_block_step(BLOCK, "block_step", "A round of block verification (the scalar reference).")
traversal_chain_kernel = make_traversal_chain_kernel(
    TRAVERSAL, "traversal_chain_kernel", "Traversal verification (arXiv 2505.12398) on a chain of drafts."
)
#: the exact rules' kernels and steps, by name (every one must PASS)
REFERENCES: dict[str, Kernel | Step] = {f.__name__: f for f in (block_kernel, block_step, traversal_chain_kernel)}

# each mutant's kernel (and round step) as a module attribute, for --kernel / --round MOD:FN
block_weight_test_chain_residual_kernel = MUTANTS[0].kernel
block_weight_test_kernel = MUTANTS[1].kernel
block_chain_residual_kernel = MUTANTS[2].kernel
block_threshold_off_by_one_kernel = MUTANTS[3].kernel
block_final_position_untested_kernel = MUTANTS[4].kernel
traversal_remaining_mass_weight_kernel = MUTANTS[5].kernel
block_weight_test_chain_residual_step = MUTANTS[0].step
block_chain_residual_step = MUTANTS[2].step
