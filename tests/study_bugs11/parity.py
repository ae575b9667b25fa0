"""Round steps that take raw logits and the request's settings (``--logits``) and apply one knob
to the target's rows differently from the request (the drafter applies the request's settings)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts
from study_bugs10._common import (
    chain,
    draft_chain_logits,
    histories,
    probs,
    processed_rows,
    staged_logits,
    target_logits,
)

from specverify.dists import process_logits, softmax

from ._common import only_min_p, pipeline_with_repetition


def target_temperature_read_as_int(prefix, draft, target, gamma, rng, settings):
    """The verifier's copy of the sampling config types temperature as an integer, so the target's
    rows are processed at int(T): T = 0.8 becomes 0 (greedy target rows), T = 1.5 becomes 1; every
    other knob and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    knobs = dataclasses.replace(settings, temperature=float(int(settings.temperature)))  # BUG: a float
    ps = [probs(z[i], settings, prefix + xs[:i], knobs=knobs) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_logit_bias_ids_off_by_one(prefix, draft, target, gamma, rng, settings):
    """The verifier builds its bias vector with 1-based token ids (id t's bias lands on id t + 1;
    a bias on the last id is dropped); everything else, and the drafts' bias, is right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    v = z.shape[-1]
    shifted = tuple((t + 1, b) for t, b in settings.logit_bias if t + 1 < v)  # BUG: ids are 0-based
    knobs = dataclasses.replace(settings, logit_bias=shifted)
    ps = [probs(z[i], settings, prefix + xs[:i], knobs=knobs) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_repetition_penalty_compounds_per_occurrence(prefix, draft, target, gamma, rng, settings):
    """The verifier applies the repetition penalty in a loop over the history list, so a token seen
    k times is divided (or multiplied) by the penalty k times instead of once; bias, the additive
    penalties, temperature and filters, and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)

    def ids_of(seen):
        return list(seen)  # BUG: each seen id once (the distinct ids)

    ps = [pipeline_with_repetition(z[i], settings, prefix + xs[:i], ids_of) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def _top_p_uncomplemented(x, top_p, keep):
    """Ascending sort; remove the tokens whose cumulative mass is <= top_p (keep the last ``keep``)."""
    order = np.argsort(x, kind="stable")
    cum = np.cumsum(softmax(x[order]))
    remove = cum <= top_p  # BUG: the removed mass is at most 1 - top_p
    remove[len(remove) - keep :] = False
    out = x.copy()
    out[order[remove]] = -np.inf
    return out


def target_top_p_threshold_not_complemented(prefix, draft, target, gamma, rng, settings):
    """The verifier's hand-written top-p removes the least likely tokens while their cumulative
    mass is <= top_p instead of <= 1 - top_p, keeping a much smaller nucleus (top_p = 0.9 keeps
    about the top 10% of the mass); bias, penalties, temperature, top-k, min-p and the drafts are
    right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    if settings.is_greedy or settings.top_p >= 1.0 or settings.temperature_last:
        return chain(xs, qs, processed_rows(prefix, xs, z, settings), rng)
    ps = []
    for i in range(gamma + 1):
        h = prefix + xs[:i]
        seen, generated = histories(settings, h)
        v = len(z[i])
        x = process_logits(
            z[i],
            dataclasses.replace(settings, top_p=1.0, min_p=0.0),
            seen_counts=counts(seen, v),
            output_counts=counts(generated, v),
        )
        x = _top_p_uncomplemented(x, settings.top_p, settings.min_tokens_to_keep)
        ps.append(softmax(process_logits(x, only_min_p(settings))))
    return chain(xs, qs, ps, rng)


def target_presence_penalty_mask_inverted(prefix, draft, target, gamma, rng, settings):
    """The verifier's presence penalty is subtracted from the tokens not yet generated (count == 0)
    instead of those generated at least once; the frequency and repetition penalties, the rest of
    the pipeline and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)

    def additive(x, output_counts, presence, frequency):
        return x - presence * (output_counts == 0) - frequency * output_counts  # BUG: count > 0

    ps = [softmax(staged_logits(z[i], settings, prefix + xs[:i], additive=additive)) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)
