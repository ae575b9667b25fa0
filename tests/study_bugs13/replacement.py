"""Round steps whose mistake is in the token drawn after a rejection: a residual formed against
the drafter's log-probabilities, a residual against a sparse draft row laid on the wrong ids,
and an exponential race reduced within one tile of the vocabulary."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows
from study_bugs10._common import chain


def residual_subtracts_draft_logprobs(prefix, draft, target, gamma, rng):
    """The drafter hands over log-probabilities (floored at log 1e-12) next to its probabilities;
    the test uses the probabilities, but the residual subtracts the log-probabilities: the
    replacement is drawn from (p - log q)+ = p + |log q|, heaviest where the drafter gave least
    mass, instead of (p - q)+. The bonus is standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    logqs = [np.log(np.maximum(q, 1e-12)) for q in qs]

    def replace(i, p, q):
        return sample_or(np.maximum(p - logqs[i], 0.0), p, rng)  # BUG: residual(p, q), in probabilities

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def residual_subtracts_sparse_draft_row_at_leading_ids(prefix, draft, target, gamma, rng):
    """The drafter exports each row sparsely, as its 16 most likely (id, probability) pairs sorted
    by probability; the test reads q(x) from the dense row, but the residual densifies the sparse
    row by writing the probabilities at ids 0 .. 15 (dense[:16] = probs) instead of at their ids:
    the replacement is drawn from (p - d)+ with d the draft's largest probabilities laid on the
    lowest ids, not from (p - q)+. The bonus is standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        top = np.argsort(-q, kind="stable")[:16]
        dense = np.zeros_like(q)
        dense[: len(top)] = q[top]  # BUG: dense[top] = q[top], each probability at its own id
        return sample_or(residual(p, dense), p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def replacement_race_reduced_within_first_nonempty_tile(prefix, draft, target, gamma, rng):
    """The replacement is the exponential race argmax((p - q)+ / E), computed per tile of 16 ids,
    and the tiles' winners are not compared: the winner of the first tile that holds residual
    mass is emitted, so the replacement always comes from the lowest tile with support. Test and
    bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        w = residual(p, q)
        score = w / rng.exponential(size=len(w))
        for start in range(0, len(w), 16):
            if (w[start : start + 16] > 0).any():
                return start + int(np.argmax(score[start : start + 16]))  # BUG: argmax over every tile
        return sample(p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)
