"""Round steps that take raw logits and the request's settings (``--logits``) and apply one knob
to the target's rows differently from the request (the drafter applies the request's settings)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs10._common import (
    chain,
    draft_chain_logits,
    histories,
    probs,
    staged_logits,
    tail_knobs,
    target_logits,
)

from specverify.dists import process_logits, softmax

from ._common import row_probs


def _rounds(prefix, draft, target, gamma, rng, settings, row):
    """Draft with the request's settings, then verify with target rows ``row(z_i, history_i, i)``."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    ps = [row(z[i], prefix + xs[:i], i, xs) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_repetition_penalty_skips_prompt(prefix, draft, target, gamma, rng, settings):
    """The verifier's repetition penalty counts the generated tokens only (llama-cpp-python's
    convention) while the request's counts the prompt too; the other knobs and the drafts are
    right."""

    def row(z, h, i, xs):
        seen, generated = histories(settings, h)
        return row_probs(z, settings, h, seen=generated)  # BUG: seen (prompt included)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_frequency_penalty_follows_logit_sign(prefix, draft, target, gamma, rng, settings):
    """The verifier applies the frequency penalty with the repetition penalty's sign rule: a
    negative logit gets + frequency * count (pushed towards 0) instead of - frequency * count;
    presence and repetition penalties, the rest of the pipeline and the drafts are right."""

    def additive(x, c, presence, frequency):
        sign = np.where(x < 0, -1.0, 1.0)  # BUG: the frequency penalty subtracts whatever the sign
        return x - presence * (c > 0) - sign * frequency * c

    def row(z, h, i, xs):
        return softmax(staged_logits(z, settings, h, additive=additive))

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_penalty_history_includes_scored_token(prefix, draft, target, gamma, rng, settings):
    """Target row i is penalised over prefix + xs[:i + 1], the history sliced one too far (it
    includes the draft the row scores); the bonus row (xs[:gamma + 1] == xs) is right, and so are
    the drafts."""

    def row(z, h, i, xs):
        return probs(z, settings, list(prefix) + list(xs[: i + 1]))  # BUG: xs[:i], the history before row i

    prefix = list(prefix)
    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_repetition_penalty_inverted(prefix, draft, target, gamma, rng, settings):
    """The verifier's config stores the repetition penalty as its reciprocal (an engine where
    values below 1 penalise), so seen tokens are favoured by the penalty instead of penalised;
    the other knobs and the drafts are right."""
    knobs = dataclasses.replace(settings, repetition_penalty=1.0 / settings.repetition_penalty)  # BUG: as given

    def row(z, h, i, xs):
        return probs(z, settings, h, knobs=knobs)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_top_k_set_from_raw_logits(prefix, draft, target, gamma, rng, settings):
    """The verifier's top-k set is computed on the raw logits (before the bias and the penalties)
    and applied as a mask, in place of top-k on the processed logits; bias, penalties, temperature,
    top-p, min-p and the drafts are right."""
    k = settings.top_k
    knobs = dataclasses.replace(settings, top_k=0)

    def row(z, h, i, xs):
        z = np.asarray(z, dtype=np.float64)
        if k <= 0 or k >= len(z):
            return probs(z, settings, h)
        kth = np.sort(z)[-k]
        masked = np.where(z < kth, -np.inf, z)  # BUG: top-k on the processed logits (the request's pipeline)
        return probs(masked, settings, h, knobs=knobs)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_top_p_applied_twice(prefix, draft, target, gamma, rng, settings):
    """The verifier runs the request's pipeline and then its sampler's own top-p stage again on the
    result (renormalised nucleus cut once more); greedy rows and requests without top-p are right,
    and so are the drafts."""
    again = dataclasses.replace(tail_knobs(settings), temperature=1.0, top_k=0, min_p=0.0, temperature_last=False)

    def row(z, h, i, xs):
        with np.errstate(divide="ignore"):
            x = np.log(probs(z, settings, h))
        if settings.is_greedy:
            return softmax(x)
        return softmax(process_logits(x, again))  # BUG: top-p is applied once, in the pipeline

    return _rounds(prefix, draft, target, gamma, rng, settings, row)


def target_temperature_multiplies_logits(prefix, draft, target, gamma, rng, settings):
    """The verifier applies temperature as logits * T instead of logits / T (T = 0.7 sharpens by
    1 / 0.49 relative to the request's law); greedy rows (T = 0) take the pipeline's greedy path,
    and bias, penalties, filters and the drafts are right."""
    t = settings.temperature

    def row(z, h, i, xs):
        if settings.is_greedy or t == 1.0:
            return probs(z, settings, h)
        knobs = dataclasses.replace(settings, temperature=1.0 / t)  # BUG: the pipeline divides by T itself
        return probs(z, settings, h, knobs=knobs)

    return _rounds(prefix, draft, target, gamma, rng, settings, row)
