"""Round steps whose mistake is numerical: how probabilities are stored or normalised, and how
the acceptance coin is made."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import chain, ratio

TILE = 16


def _log2_store(rows):
    """Each probability rounded to the nearest power of two (log2-probabilities kept as integers)."""
    w = np.asarray(rows, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(w > 0, np.exp2(np.round(np.log2(np.where(w > 0, w, 1.0)))), 0.0)


def probabilities_stored_as_integer_log2(prefix, draft, target, gamma, rng):
    """The draft and target rows are stored as integer log2-probabilities and read back as powers
    of two (each probability rounded to the nearest 2^k, unnormalised) for the ratio and the
    residual; drafts come from the exact q and the bonus from the exact p_gamma."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    p2, q2 = _log2_store(ps), _log2_store(qs)  # BUG: the test and residual need the exact rows
    return chain(xs, list(q2), list(p2), rng, bonus=lambda _: sample(ps[gamma], rng))


def coin_as_product_of_two_uniforms(prefix, draft, target, gamma, rng):
    """The acceptance coin is u1 * u2, two uniforms combined by a product (meant to mix two random
    streams): P(u1 u2 < r) = r - r ln r > r, so every draft with r = min(1, p/q) < 1 is accepted too
    often. Replacement and bonus are standard."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return u * rng.random() < ratio(p, q, x)  # BUG: a product of uniforms is not uniform

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def _tile_normalised(p):
    """Each tile of 16 ids divided by its own sum (the block reduction's result not shared)."""
    p = np.asarray(p, dtype=np.float64)
    v = len(p)
    pad = np.zeros(-(-v // TILE) * TILE)
    pad[:v] = p
    t = pad.reshape(-1, TILE)
    s = t.sum(axis=1, keepdims=True)
    return (np.divide(t, s, out=np.zeros_like(t), where=s > 0)).ravel()[:v]


def target_rows_normalised_per_tile(prefix, draft, target, gamma, rng):
    """The target's rows are renormalised by a tiled kernel whose per-tile partial sums are never
    combined (a missing synchronisation after the block reduction): each tile of 16 ids is divided
    by its own mass, and those rows are used for the ratio, the residual and the bonus (the bonus
    sampler renormalises the row)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    ps = np.array([_tile_normalised(p) for p in ps])  # BUG: one sum over the whole row
    return chain(xs, qs, ps, rng)
