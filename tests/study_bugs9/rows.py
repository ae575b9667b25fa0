"""Round steps that verify with the wrong rows: a verification input built wrong, a draft row
mutated by the drafter's sampler, a target context with a token id masked out."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows

from ._common import chain

PAD_ID = 0  # the id the serving stack pads batches with; also an ordinary token of the vocabulary


def verify_input_repeats_first_draft(prefix, draft, target, gamma, rng):
    """The verification input is written as [input slot] + drafts, where the input slot already
    holds x_0 (the drafter wrote its first token there), so the pass is fed x_0 twice; its first
    gamma + 1 rows are used: rows 0 and 1 are right, row j >= 2 (the bonus row included) conditions
    on prefix + [x_0] + xs[:j - 1]."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    fed = [xs[0]] + list(xs)  # BUG: x_0 is already the input slot; the pass should be fed xs
    ps = np.asarray(target(list(prefix), fed), dtype=np.float64)[: gamma + 1]
    return chain(xs, qs, ps, rng)


def draft_row_divided_by_race_noise_in_place(prefix, draft, target, gamma, rng):
    """The drafter samples each token by the exponential race argmax(q / E), dividing its row by
    the noise in place; the divided buffer (q / E, unnormalised) is what the verifier receives as q
    for the ratio and the residual."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.array(draft(list(prefix) + xs), dtype=np.float64)
        e = rng.exponential(size=len(q))
        np.divide(q, e, out=q)  # BUG: in place: the reported row is q / E (vllm#16952's probs.div_)
        xs.append(int(np.argmax(q)))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return chain(xs, qs, ps, rng)


def target_context_drops_pad_id(prefix, draft, target, gamma, rng):
    """The target's attention mask is derived from the ids (ids != PAD_ID), so every committed
    token equal to the pad id 0 is masked out of the verification pass's context: the target's rows
    condition on the prefix with its zeros removed (shorter, shifted), the drafter on the whole
    prefix."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ctx = [t for t in prefix if t != PAD_ID]  # BUG: id 0 is a real token here, not padding
    ps = target_rows(ctx, target, xs)
    return chain(xs, qs, ps, rng)
