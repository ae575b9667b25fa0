"""Round steps whose bonus token (every draft accepted) is drawn wrongly."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _verified(xs, qs, ps, rng):
    """The standard test and replacement; returns (out, all_accepted, last_coin)."""
    out, u = [], None
    for i, x in enumerate(xs):
        u = rng.random()
        if u < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out, False, u
    return out, True, u


def bonus_sorted_position_as_id(prefix, draft, target, gamma, rng):
    """The bonus is drawn from row gamma sorted in descending order, and the drawn *position* in
    the sorted row is emitted as the token id (the inverse permutation is never applied).

    Written for the study: sampling kernels sort a row for top-p and sample on the sorted copy
    (sgl-project/sglang's top_p_renorm path, engines notes section 3); forgetting to map back
    through the sort is the id-order confusion of ggml-org/llama.cpp examples/speculative (B32).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, full, _ = _verified(xs, qs, ps, rng)
    if full:
        sorted_row = np.sort(ps[gamma])[::-1]
        out.append(sample(sorted_row, rng))  # BUG: a position in the sorted row, not an id
    return out


class BonusFromPreviousRoundRow:
    """The bonus is drawn from a "last logits" buffer that is updated only after the bonus is
    sampled, so a fully accepted round draws its bonus from the previous round's row gamma (the
    row of another context); the first round of a sequence uses its own row.

    Written for the study: the ordering class of vllm-project/vllm#46899 (stale values fed back
    from the previous step) and vllm-project/vllm#52071 (a step read a field the previous step was
    to set), on the buffer the bonus sampler reads.
    """

    def __init__(self):
        self.expect = None
        self.last_row = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.expect is None or prefix != self.expect:
            self.last_row = None
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        out, full, _ = _verified(xs, qs, ps, rng)
        if full:
            row = ps[gamma] if self.last_row is None else self.last_row  # BUG: read before update
            out.append(sample(row, rng))
        self.last_row = np.array(ps[gamma])
        self.expect = prefix + out
        return out


bonus_from_previous_round_row = BonusFromPreviousRoundRow()


def bonus_softmax_of_probs(prefix, draft, target, gamma, rng):
    """The bonus is drawn from softmax(p_gamma), a softmax over the row's probabilities (as if
    they were logits), instead of from p_gamma.

    huggingface/transformers#28508 (B01: renormalisation written as a softmax over probabilities),
    on the bonus path: the bonus sampler is handed the verify path's probabilities and applies the
    softmax it would apply to logits.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out, full, _ = _verified(xs, qs, ps, rng)
    if full:
        e = np.exp(ps[gamma] - ps[gamma].max())  # BUG: softmax of probabilities
        out.append(sample(e / e.sum(), rng))
    return out
