"""Round steps whose bonus token (after gamma accepted drafts) has the wrong law."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def _verified(prefix, draft, target, gamma, rng):
    """The standard verification; returns (tokens, rows, all_accepted)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out, xs, ps, False
    return out, xs, ps, True


def bonus_from_draft(prefix, draft, target, gamma, rng):
    """Draws the bonus token from the draft's next row, unverified.

    "The draft is already warm, let it propose one more": the extra token is appended without a
    test. Modelled on LiteRT-LM#3017 / B42 (the speculative path does not use the verifier's
    sampling) and the drafts-kept-unverified class of lattice#243.
    """
    out, xs, ps, all_ok = _verified(prefix, draft, target, gamma, rng)
    if all_ok:
        out.append(sample(draft(list(prefix) + xs), rng))  # BUG: q, not p
    return out


def bonus_from_last_draft_row(prefix, draft, target, gamma, rng):
    """Draws the bonus from target row gamma - 1 (the row that scored the last draft).

    ``ps[len(xs) - 1]``: the user took "the last target distribution" to be the last one that
    corresponds to a draft. The row offset of HF's ``new_logits[:, -candidate_length - 1:]``
    slicing (transformers#30042 / B05 cache_position class).
    """
    out, xs, ps, all_ok = _verified(prefix, draft, target, gamma, rng)
    if all_ok:
        out.append(sample(ps[len(xs) - 1], rng))  # BUG: should be ps[gamma]
    return out


def bonus_from_residual_with_extra_draft_row(prefix, draft, target, gamma, rng):
    """Treats the bonus position like a rejection: samples it from (p_gamma - q_gamma)+.

    The user ran the draft one step further to get q at the bonus position and used the
    replacement code path there too ("every emitted token that is not an accepted draft comes from
    the residual"). Written for the study: the bonus/replacement confusion that the engines notes
    call out for bonus positions (section 4, parity at verified vs bonus positions).
    """
    out, xs, ps, all_ok = _verified(prefix, draft, target, gamma, rng)
    if all_ok:
        q_next = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        out.append(sample_or(residual(ps[gamma], q_next), ps[gamma], rng))  # BUG: the bonus is ~ p
    return out


def bonus_greedy(prefix, draft, target, gamma, rng):
    """Takes the bonus token as the argmax of the last target row.

    The bonus was routed through the greedy sampler ("it is the target's own prediction").
    sgl-project/sglang#31214: EAGLE verification silently samples greedily on ROCm.
    """
    out, xs, ps, all_ok = _verified(prefix, draft, target, gamma, rng)
    if all_ok:
        out.append(int(np.argmax(ps[gamma])))  # BUG: not sampled
    return out
