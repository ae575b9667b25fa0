"""Round steps whose token after a fully accepted draft block is not drawn from p_gamma, or not
once."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def bonus_restricted_to_draft_candidates(prefix, draft, target, gamma, rng, k=8):
    """After a fully accepted block the bonus is drawn from p_gamma restricted to the drafter's next
    candidates (the top 8 ids of q(. | prefix + xs)) and renormalised, p_gamma as the fallback when
    they carry no target mass, instead of from p_gamma over the whole vocabulary.

    Written for the study from tree verification (Medusa / EAGLE candidates from the draft heads,
    statistics notes 7c-7d; SGLang's target-only tree, engines notes section 3), with the final draw
    from p outside the tried candidates replaced by a draw among the candidates.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    nxt = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
    w = np.zeros_like(ps[gamma])
    top = np.argsort(-nxt, kind="stable")[:k]
    w[top] = ps[gamma][top]  # BUG: the bonus is a draw from all of p_gamma
    out.append(sample_or(w, ps[gamma], rng))
    return out


def bonus_decode_step_position_off_by_one(prefix, draft, target, gamma, rng):
    """After a fully accepted block the bonus is not read from the verification pass but computed
    by a separate one-token decode step whose position is one short (the cache position was not
    advanced for the last accepted draft): the bonus row is p at the right last tokens but one
    position earlier (here the context without its first token), instead of p_gamma.

    huggingface/transformers#30042 (B05: cache_position not advanced correctly in assisted
    decoding), here on the bonus step only.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    row = target_rows(list(prefix)[1:] + xs, target, [])[0]  # BUG: one position short
    out.append(sample(row, rng))
    return out


def bonus_row_conditioned_on_draft_argmax(prefix, draft, target, gamma, rng):
    """The verification pass is fed the drafts with the last one replaced by the argmax of its draft
    row (the drafter's last step writes its greedy id into the input buffer); rows 0 .. gamma - 1
    do not see the last input and are right, but the bonus row is p(. | prefix + xs[:-1] + argmax
    q_{gamma-1}) instead of p(. | prefix + xs).

    huggingface/transformers#47932 (B04: an argmax generator whose returned token and logits did
    not match what was sampled) and llama.cpp examples/speculative (B32: the top candidate kept in
    place of the sample), here only in the verify input.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    fed = xs[:-1] + [int(np.argmax(qs[-1]))]  # BUG: the sampled last draft is not what is fed
    ps = target_rows(prefix, target, fed)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
