"""Round steps whose rule for the number of accepted drafts is wrong (vectorised verifiers)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _accept_mask(xs, qs, ps, rng):
    """One coin per position, all at once: accept[i] = u_i < min(1, p_i(x_i) / q_i(x_i))."""
    g = len(xs)
    idx = np.arange(g)
    qs = np.asarray(qs)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(1.0, ps[idx, xs] / qs[idx, xs])
    return rng.random(g) < ratio


def _emit(n, xs, qs, ps, rng):
    """xs[:n], then the replacement from (p_n - q_n)+ (n < gamma) or the bonus from p_gamma."""
    if n < len(xs):
        return list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
    return list(xs) + [sample(ps[len(xs)], rng)]


def first_rejection_found_with_argmax_of_accepts(prefix, draft, target, gamma, rng):
    """The first rejection is looked up with np.argmax on the accept mask instead of on its negation,
    so n is the index of the first accepted draft (0 if x_0 was accepted or nothing was); every draft
    accepted gives n = gamma as it should."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _accept_mask(xs, qs, ps, rng)
    n = gamma if acc.all() else int(np.argmax(acc))  # BUG: argmax(acc) finds an acceptance, should be argmax(~acc)
    return _emit(n, xs, qs, ps, rng)


def leading_accepts_via_trim_zeros(prefix, draft, target, gamma, rng):
    """The number of leading accepts is taken as the length of the accept mask with its trailing
    rejections trimmed (np.trim_zeros(..., "b")): n is one past the last accepted draft, so rejected
    drafts before it are kept."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _accept_mask(xs, qs, ps, rng)
    n = len(np.trim_zeros(acc.astype(np.int8), "b"))  # BUG: trims trailing zeros only, not from the first zero on
    return _emit(n, xs, qs, ps, rng)


def all_accepted_guard_tests_any(prefix, draft, target, gamma, rng):
    """n = argmin(accept) (the first rejection), guarded for the all-accepted case with accept.any()
    instead of accept.all(): when every draft is rejected, all of them are kept and the bonus drawn;
    when every draft is accepted, n = 0 and a replacement is drawn at position 0."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    acc = _accept_mask(xs, qs, ps, rng)
    n = int(np.argmin(acc)) if acc.any() else gamma  # BUG: the guard should be `if not acc.all()`
    return _emit(n, xs, qs, ps, rng)
