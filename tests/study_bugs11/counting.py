"""Round steps whose mistake is in the number of drafts kept or in the tokens the round emits."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows
from study_bugs10._common import accept_mask, first_rejection, ratio

from ._common import emit


def kept_count_from_np_prod(prefix, draft, target, gamma, rng):
    """n = gamma * np.prod(accept) (np.prod written for np.cumprod(...).sum()): a round keeps every
    draft and draws the bonus when all coins pass, and otherwise keeps none and emits a draw from
    (p_0 - q_0)+, even when the first rejection is at a later position."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng)
    n = gamma * int(np.prod(acc))  # BUG: the leading accepts are int(np.cumprod(acc).sum())
    return emit(xs, qs, ps, n, rng)


def rejections_found_with_bitwise_not_of_uint8_mask(prefix, draft, target, gamma, rng):
    """The accept mask is stored as uint8 and the rejections are np.flatnonzero(~mask): ~ on uint8
    is a bitwise not (1 -> 254, 0 -> 255), non-zero everywhere, so the first 'rejection' is always
    position 0 and every round emits a single draw from (p_0 - q_0)+ (p_0 when empty)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = accept_mask(xs, qs, ps, rng).astype(np.uint8)
    bad = np.flatnonzero(~acc)  # BUG: ~ is bitwise on uint8; the rejections are acc == 0
    n = int(bad[0]) if len(bad) else gamma
    return emit(xs, qs, ps, n, rng)


def replacement_appended_twice(prefix, draft, target, gamma, rng):
    """After a rejection the replacement from (p_n - q_n)+ is appended inside the verify loop and
    appended again by the code that finishes the round: such a round emits xs[:n] + [r, r]; full
    acceptances are right."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    final = None
    for i, x in enumerate(xs):
        if rng.random() < ratio(ps[i], qs[i], x):
            out.append(x)
            continue
        final = sample_or(residual(ps[i], qs[i]), ps[i], rng)
        out.append(final)
        break
    if final is None:
        return out + [sample(ps[gamma], rng)]
    out.append(final)  # BUG: the loop already appended the replacement
    return out


def kept_drafts_sliced_one_late(prefix, draft, target, gamma, rng):
    """With n the number of leading accepts, the kept drafts are xs[1:n + 1] instead of xs[:n]: x_0
    is dropped and, after a rejection at n >= 1, the rejected x_n is emitted in its place; the
    final token (a draw from (p_n - q_n)+ or the bonus) is drawn from the right row."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    n = first_rejection(accept_mask(xs, qs, ps, rng))
    kept = list(xs[1 : n + 1])  # BUG: the kept drafts are xs[:n]
    if n == gamma:
        return kept + [sample(ps[gamma], rng)]
    return kept + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
