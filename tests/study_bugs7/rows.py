"""Round steps whose verification reads the wrong target or draft rows."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows

from study_bugs7._common import verify


def draft_heads_sampled_in_parallel_chained_rows_reported(prefix, draft, target, gamma, rng):
    """Medusa-style proposal: every draft is sampled from the draft's row at the prefix (one forward
    pass feeds all the heads), but the q rows handed to the verifier are the chained rows
    q(. | prefix + xs[:i]) that a sequential drafter would have used; row 0 is the same either way."""
    q0 = np.asarray(draft(list(prefix)), dtype=np.float64)
    xs = [sample(q0, rng) for _ in range(gamma)]
    qs = [
        np.asarray(draft(list(prefix) + xs[:i]), dtype=np.float64) for i in range(gamma)
    ]  # BUG: not the rows sampled from
    ps = target_rows(prefix, target, xs)
    return verify(xs, qs, ps, rng)


def _race(w, rng):
    """argmax(w / E), E ~ Exp(1): the exponential race (vLLM's recovered-token sampler); id 0 when w is all zero."""
    return int(np.argmax(w / rng.exponential(size=len(w))))


def target_rows_read_as_vocab_major(prefix, draft, target, gamma, rng):
    """The verification pass's output is treated as a flat buffer laid out vocabulary-major ([V, gamma
    + 1], as a kernel that writes one column per token would) and re-viewed and transposed; the pass
    returns it position-major, so every "row" mixes entries of several rows. Replacement and bonus are
    drawn by the exponential race (no normalisation needed)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    v = ps.shape[1]
    ps = np.ascontiguousarray(ps).reshape(v, gamma + 1).T  # BUG: the buffer is [gamma + 1, V], not [V, gamma + 1]
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = min(1.0, ps[i][x] / qs[i][x])
        if rng.random() < a:
            out.append(x)
            continue
        out.append(_race(np.maximum(ps[i] - qs[i], 0.0), rng))
        return out
    out.append(_race(ps[gamma], rng))
    return out


def target_rows_ring_indexed_by_absolute_position(prefix, draft, target, gamma, rng):
    """The target's rows live in a ring of gamma + 1 slots that the verification pass fills from slot
    0, but the reader indexes the ring by absolute token position ((len(prefix) + i) mod (gamma + 1)),
    so the rows are rotated unless the prefix length is a multiple of gamma + 1."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ps = ps[(len(prefix) + np.arange(gamma + 1)) % (gamma + 1)]  # BUG: the pass wrote from slot 0, not from len(prefix)
    return verify(xs, qs, ps, rng)


def peaked_draft_rows_snapped_to_one_hot(prefix, draft, target, gamma, rng):
    """Draft rows whose peak exceeds 0.5 are handed to the verifier as the one-hot of their argmax (the
    "argmax drafts are one-hot" shortcut), although the drafts were sampled from the full rows: a
    non-argmax draft then has q = 0 (accepted outright) and the argmax draft is accepted with p(x)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    qs = [np.eye(len(q))[np.argmax(q)] if q.max() > 0.5 else q for q in qs]  # BUG: the drafts were sampled, not argmax
    return verify(xs, qs, ps, rng)
