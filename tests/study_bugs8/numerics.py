"""Round steps with a numerical mistake: dtype, log space, normalisation."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, target_rows

from ._common import chain


def log_coin_in_base_ten_against_natural_log_ratio(prefix, draft, target, gamma, rng):
    """The test is done in log space with log10 of the coin against the natural-log ratio
    log p(x) - log q(x): a draft is accepted with probability min(1, r^ln(10)) instead of min(1, r)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def accept(i, x, p, q, u):
        with np.errstate(divide="ignore"):
            lr = np.log(p[x]) - np.log(q[x])
        return np.log10(u) < min(0.0, lr)  # BUG: the coin's log must be natural too (np.log)

    return chain(xs, qs, ps, rng, accept=accept)


def draft_prob_buffer_allocated_with_token_dtype(prefix, draft, target, gamma, rng):
    """The [gamma, V] draft-probability buffer is allocated with the dtype of the token buffer
    (int64), so every q entry below 1 is truncated to 0: the ratio is infinite and every draft is
    accepted, and the residual is p."""
    tokens = np.zeros(gamma, dtype=np.int64)
    xs, rows = draft_chain(prefix, draft, gamma, rng)
    tokens[:] = xs
    qs = np.empty((gamma, len(rows[0])), dtype=tokens.dtype)  # BUG: the q buffer must be float
    qs[:] = rows
    ps = target_rows(prefix, target, xs)
    return chain([int(t) for t in tokens], qs, ps, rng)


def log_of_zero_probabilities_left_at_zero(prefix, draft, target, gamma, rng):
    """The ratio is taken as exp(log p(x) - log q(x)) with the logs from np.log(..., where=w > 0) into
    a zero-filled buffer: where the target has probability 0 its "log" is 0 (probability 1), so a
    draft the target never emits is accepted (ratio 1 / q(x))."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def log(w):
        return np.log(w, out=np.zeros_like(w), where=w > 0)  # BUG: log 0 must be -inf, not 0

    def accept(i, x, p, q, u):
        return u < min(1.0, float(np.exp(log(p)[x] - log(q)[x])))

    return chain(xs, qs, ps, rng, accept=accept)


def residual_normalised_with_floor_division(prefix, draft, target, gamma, rng):
    """The residual is normalised with // (floor division): every entry becomes 0 unless the
    residual has a single token, and the empty-row fallback then draws the replacement from p."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)

    def replace(i, p, q):
        w = residual(p, q)
        with np.errstate(divide="ignore", invalid="ignore"):
            return w // w.sum()  # BUG: true division (w / w.sum())

    return chain(xs, qs, ps, rng, replace=replace)
