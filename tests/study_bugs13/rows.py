"""Round steps whose mistake is in which target or draft row is used: the pass's rows read in an
interleaved layout, a reported draft row whose two special ids are not remapped, a drafter that
explores while reporting its plain row, and a target whose attention restarts at each EOS."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import chain

from ._common import last_id


def verify_rows_read_in_strided_layout(prefix, draft, target, gamma, rng):
    """The pass's rows are gathered with the index of a two-way interleaved layout (even slots
    first, then odd ones: 0, 2, 4, 1, 3 for gamma = 4), although the pass returns them in position
    order: position 0 is right, position i >= 1 (the bonus included) is verified against the row
    of another prefix of the drafts."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    rows = target_rows(prefix, target, xs)
    order = list(range(0, gamma + 1, 2)) + list(range(1, gamma + 1, 2))
    ps = rows[order]  # BUG: rows, in position order (the pass does not interleave its slots)
    return chain(xs, qs, ps, rng)


def draft_row_special_ids_not_remapped(prefix, draft, target, gamma, rng):
    """The drafter's vocabulary has its first and last ids (two special tokens) swapped with
    respect to the target's; the drafted ids are mapped to the target's ids, but the reported
    rows are not: the verifier reads q(0) where q(V - 1) is meant and the reverse, in the ratio and
    in the residual."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)  # the target's id order
        v = len(q)
        swap = np.arange(v)
        swap[[0, v - 1]] = [v - 1, 0]
        q_drafter = q[swap]  # the same row in the drafter's id order
        y = sample(q_drafter, rng)
        xs.append(int(swap[y]))  # mapped to the target's ids
        qs.append(q_drafter)  # BUG: q_drafter[swap] (= q), the row in the target's id order
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def drafter_mixes_uniform_exploration(prefix, draft, target, gamma, rng):
    """The drafter explores: each draft is drawn from 0.7 q_i + 0.3 / V (a uniform share for
    diverse proposals) while its plain row q_i is reported as the law it was drawn from."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        mixed = 0.7 * q + 0.3 / len(q)
        xs.append(sample(mixed, rng))
        qs.append(q)  # BUG: mixed, the row the draft was drawn from
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def target_attention_reset_after_eos(prefix, draft, target, gamma, rng):
    """The target's attention mask comes from packed-sequence code that starts a new document at
    each EOS (the last id): its context is the prefix from its last EOS on, so once a request has
    emitted an EOS every target row (ratio, residual, bonus) conditions on a shorter context at
    another position; the drafter sees the whole prefix."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    eos = last_id(qs[0])
    start = max((k for k, t in enumerate(prefix) if t == eos), default=0)
    ctx = prefix[start:]  # BUG: prefix, the request's whole context (EOS is an ordinary token in it)
    return chain(xs, qs, target_rows(ctx, target, xs), rng)
