"""Round steps whose mistake is in which tokens a round emits given its accepted drafts."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from ._common import accept_mask, first_rejection, ratio


def replacement_inserted_before_kept_drafts(prefix, draft, target, gamma, rng):
    """After a rejection at n the replacement drawn from (p_n - q_n)+ is put in front of the kept
    drafts (out.insert(0, ...)) instead of after them: the round emits [replacement] + xs[:n]; a
    rejection at position 0 and a full acceptance are right."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n = first_rejection(accept_mask(xs, qs, ps, rng))
    if n == gamma:
        return list(xs) + [sample(ps[gamma], rng)]
    out = list(xs[:n])
    out.insert(0, sample_or(residual(ps[n], qs[n]), ps[n], rng))  # BUG: the replacement goes after xs[:n]
    return out


def accepted_drafts_through_np_unique(prefix, draft, target, gamma, rng):
    """The kept drafts are collected with np.unique(xs[:n]) (meant: as an array), which sorts and
    removes repeats: the round emits the distinct accepted ids in ascending order, then the
    replacement from (p_n - q_n)+ or the bonus from p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n = first_rejection(accept_mask(xs, qs, ps, rng))
    kept = np.unique(np.asarray(xs[:n], dtype=np.int64)).tolist()  # BUG: must be list(xs[:n]), order and repeats kept
    final = sample(ps[gamma], rng) if n == gamma else sample_or(residual(ps[n], qs[n]), ps[n], rng)
    return [int(t) for t in kept] + [final]


def full_acceptance_detected_by_output_length(prefix, draft, target, gamma, rng):
    """The verify loop appends the accepted drafts and, at a rejection, the replacement; the bonus
    is then added when len(out) == gamma, which is also the length after a rejection at the last
    position: such a round emits its replacement and then a bonus from p_gamma, a row that
    conditions on the rejected last draft."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        break
    if len(out) == gamma:  # BUG: a rejection at position gamma - 1 also leaves gamma tokens
        out.append(sample(ps[gamma], rng))
    return out
