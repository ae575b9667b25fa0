"""Round steps whose bonus token (every draft accepted) is drawn wrongly."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from study_bugs7._common import icdf

#: the id a freshly allocated token buffer holds
PLACEHOLDER = 0


def _accepted_prefix(xs, qs, ps, rng):
    """The standard test and replacement; (tokens, True) if every draft was accepted."""
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out, False
    return out, True


def bonus_row_sees_placeholder_in_last_slot(prefix, draft, target, gamma, rng):
    """The verification pass is launched from a token buffer before the last draft is written into it
    (overlapped with the drafter's last step), so the pass sees the placeholder id 0 in the last slot:
    rows 0 .. gamma - 1 are right (none conditions on the last draft), and the bonus row is
    p(. | prefix + xs[:gamma - 1] + [0])."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs[:-1] + [PLACEHOLDER])  # BUG: the last slot is not written yet
    out, all_accepted = _accepted_prefix(xs, qs, ps, rng)
    if all_accepted:
        out.append(sample(ps[gamma], rng))
    return out


def bonus_reuses_last_draft_uniform(prefix, draft, target, gamma, rng):
    """Drafts are drawn by inverse CDF from explicit uniforms; the bonus is drawn by inverse CDF from
    the last draft's uniform instead of a fresh one, so given x_{gamma-1} the bonus's uniform lies in
    x_{gamma-1}'s interval of q_{gamma-1}'s CDF."""
    xs, qs, us = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        us.append(rng.random())
        xs.append(icdf(q, us[-1]))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out, all_accepted = _accepted_prefix(xs, qs, ps, rng)
    if all_accepted:
        out.append(icdf(ps[gamma], us[-1]))  # BUG: the draft's noise reused; the bonus needs a fresh uniform
    return out


def bonus_sorted_draw_mapped_by_inverse_permutation(prefix, draft, target, gamma, rng):
    """The bonus is drawn from the last row sorted by descending probability (a rank k), and the rank
    is mapped back to an id with argsort(order)[k] (the inverse permutation: the rank of token id k)
    instead of order[k] (the token at rank k)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, all_accepted = _accepted_prefix(xs, qs, ps, rng)
    if all_accepted:
        order = np.argsort(-ps[gamma], kind="stable")
        k = sample(ps[gamma][order], rng)
        out.append(int(np.argsort(order)[k]))  # BUG: the inverse permutation; the id at rank k is order[k]
    return out
