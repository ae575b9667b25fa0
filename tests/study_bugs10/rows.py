"""Round steps whose mistake is in the rows: the target's rows of the verification pass, or the
draft rows reported as the law the drafts were drawn from."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, sample_or, target_rows

from ._common import chain


def verify_ids_shifted_by_special_token_offset(prefix, draft, target, gamma, rng):
    """The drafts are mapped to the target's ids through a table that adds a special-token offset
    the ids already carry, so the verification pass is fed (x + 1) mod V for every draft x: row 0
    is p(. | prefix), row j >= 1 (the bonus row included) conditions on the shifted ids, while the
    ratio, the residual and the emitted tokens use the drafts themselves."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    v = len(qs[0])
    fed = [(x + 1) % v for x in xs]  # BUG: the offset is added twice; the pass must be fed xs
    ps = target_rows(prefix, target, fed)
    return chain(xs, qs, ps, rng)


def verify_positions_start_one_early(prefix, draft, target, gamma, rng):
    """The verification pass numbers its positions from len(prefix) - 1 (the drafter's convention,
    which recomputes the last committed token), emulated by running it on the prefix without its
    first token: the same last tokens at a position one too low, for every target row (ratio,
    residual and bonus); the drafter is right."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ctx = list(prefix)[1:] or list(prefix)  # BUG: positions must start at len(prefix); pass the whole prefix
    ps = target_rows(ctx, target, xs)
    return chain(xs, qs, ps, rng)


DRAFT_VOCAB = 48


def drafter_vocab_trimmed_q_not_renormalised(prefix, draft, target, gamma, rng):
    """The drafter works over a reduced vocabulary (ids below 48, an EAGLE-3 style draft vocab): each
    draft is sampled from its row restricted to those ids and renormalised, but the row handed to
    the verifier is the full-vocabulary row with the other ids zeroed and not renormalised, so the
    ratio divides by Z q'(x) instead of q'(x) (Z the row's mass on the reduced vocabulary) and the
    residual is (p - Z q')+."""
    ctx = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx + xs), dtype=np.float64)
        trimmed = q.copy()
        trimmed[DRAFT_VOCAB:] = 0.0
        xs.append(sample_or(trimmed, q, rng))
        qs.append(trimmed)  # BUG: the law sampled from is trimmed / trimmed.sum()
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


def drafter_context_follows_argmax_rows_rescored_on_samples(prefix, draft, target, gamma, rng):
    """The drafter grows its chain on its own argmax tokens (its context is prefix + a[:i], a_k the
    argmax of row k) and samples each draft from that row, but the rows handed to the verifier are
    re-scored on the sampled chain, q(. | prefix + xs[:i]): from position 1 on a draft is tested
    against a row it was not drawn from whenever an earlier draft differs from the argmax."""
    ctx = list(prefix)
    xs, greedy = [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx + greedy), dtype=np.float64)
        xs.append(sample(q, rng))
        greedy.append(int(np.argmax(q)))
    qs = [np.asarray(draft(ctx + xs[:i]), dtype=np.float64) for i in range(gamma)]  # BUG: report the rows sampled from
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)
