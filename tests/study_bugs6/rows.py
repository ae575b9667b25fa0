"""Round steps whose verification reads the wrong target or draft rows."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows

from study_bugs6._common import verify


def target_block_rows_reversed(prefix, draft, target, gamma, rng):
    """The verification pass returns its rows last position first (a right-to-left gather of a
    "last token first" output layout) and the step does not flip them back: row i used at position i
    is p(. | prefix + xs[:gamma - i]); the bonus is drawn from p(. | prefix)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ps = ps[::-1]  # BUG: the rows are already in position order; reversing them misaligns every row
    return verify(xs, qs, ps, rng)


def target_vocab_shifted_by_one(prefix, draft, target, gamma, rng):
    """The target's rows are re-indexed as if its vocabulary had a reserved id 0 in front (a
    padded-embedding/vocab offset): the step uses p'(v) = p(v - 1) (p'(0) = p(V - 1)) for the ratio,
    the residual and the bonus."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ps = np.roll(ps, 1, axis=1)  # BUG: vocab offset applied to a head that has no reserved id
    return verify(xs, qs, ps, rng)


def verify_context_holds_draft_argmax(prefix, draft, target, gamma, rng):
    """Drafts are sampled from q, but the verification pass is fed the argmax of each draft row (the
    token buffer the drafter fills for greedy mode): target row j is p(. | prefix + a[:j]) with
    a_k = argmax q_k, instead of p(. | prefix + xs[:j]); row 0 is right."""
    xs, qs, top = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(sample(q, rng))
        top.append(int(np.argmax(q)))
        qs.append(q)
    ps = target_rows(prefix, target, top)  # BUG: the greedy token buffer is verified, not the sampled drafts
    return verify(xs, qs, ps, rng)


def q0_row_taken_from_target_pass(prefix, draft, target, gamma, rng):
    """The first draft is sampled from the drafter's row, but its q row is read from the target's
    pass (an MTP-style step that reuses the model's own first row): the first ratio is p_0(x_0) /
    p_0(x_0) (1 where p_0 > 0), the first residual (p_0 - p_0)+ = 0 (falls back to p_0); later
    positions are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    qs[0] = ps[0]  # BUG: the first draft row replaced by the target's first row
    return verify(xs, qs, ps, rng)
