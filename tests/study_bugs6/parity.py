"""Round steps that take raw logits and apply the sampling settings themselves (``--logits``), the
target's processing differing from the request's law. Draft rows are processed the same way as the
target's, so the drafts' law is consistent with the q the verifier uses; only the target's law is off.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, probs, sample

from specverify import SamplingSettings
from specverify.dists import process_logits, softmax
from study_bugs6._common import verify


def _chain(prefix, draft, target, gamma, rng, settings, law):
    """Draft gamma tokens and build both blocks of rows with ``law(logits, history)``."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = law(draft(prefix + xs), prefix + xs)
        xs.append(sample(q, rng))
        qs.append(q)
    logits = np.asarray(target(prefix, xs), dtype=np.float64)
    return xs, qs, logits


def target_top_p_before_top_k(prefix, draft, target, gamma, rng, settings):
    """The target applies top-p to the full temperature-scaled row and top-k afterwards (an engine's
    filter order), instead of top-k first and top-p on the renormalised top-k row: when both are set
    the target's nucleus is wider than the request's; the draft rows follow the request's order."""
    prefix = list(prefix)

    def law(logits, history):
        return probs(logits, settings, history)

    def target_law(logits, history):
        v = len(logits)
        seen, gen = counts(history, v), counts(history[settings.prompt_len :], v)
        first = dataclasses.replace(settings, top_k=0, min_p=0.0)
        x = process_logits(logits, first, seen_counts=seen, output_counts=gen)
        then = SamplingSettings(
            top_k=settings.top_k, min_p=settings.min_p, min_tokens_to_keep=settings.min_tokens_to_keep
        )
        x = process_logits(x, then)  # BUG: top-k after top-p; the request's order is top-k, then top-p
        return softmax(x)

    xs, qs, logits = _chain(prefix, draft, target, gamma, rng, settings, law)
    ps = [target_law(logits[j], prefix + xs[:j]) for j in range(gamma + 1)]
    return verify(xs, qs, ps, rng)


def frequency_penalty_normalised_by_generated_length(prefix, draft, target, gamma, rng, settings):
    """The target's frequency penalty uses each token's share of the generated tokens (count / number
    generated) instead of its count; the presence penalty and the repetition penalty are right."""
    prefix = list(prefix)

    def law(logits, history):
        return probs(logits, settings, history)

    def target_law(logits, history):
        v = len(logits)
        gen = list(history)[settings.prompt_len :]
        c = counts(gen, v)
        freq = c / max(len(gen), 1)  # BUG: a frequency (share), not a count
        pen = dataclasses.replace(settings, frequency_penalty=0.0, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
        x = process_logits(logits, pen, seen_counts=counts(history, v), output_counts=c)
        x = x - settings.frequency_penalty * freq
        filt = dataclasses.replace(
            settings, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0, logit_bias=()
        )
        return softmax(process_logits(x, filt))

    xs, qs, logits = _chain(prefix, draft, target, gamma, rng, settings, law)
    ps = [target_law(logits[j], prefix + xs[:j]) for j in range(gamma + 1)]
    return verify(xs, qs, ps, rng)


def repetition_penalty_ignores_prompt(prefix, draft, target, gamma, rng, settings):
    """The target's repetition penalty counts the generated tokens only (the presence / frequency
    penalties' history reused), not the prompt too; the draft rows count the whole history."""
    prefix = list(prefix)

    def law(logits, history):
        return probs(logits, settings, history)

    def target_law(logits, history):
        return probs(logits, settings, history, seen=list(history)[settings.prompt_len :])  # BUG: prompt left out

    xs, qs, logits = _chain(prefix, draft, target, gamma, rng, settings, law)
    ps = [target_law(logits[j], prefix + xs[:j]) for j in range(gamma + 1)]
    return verify(xs, qs, ps, rng)


def logit_bias_missing_after_first_row(prefix, draft, target, gamma, rng, settings):
    """The logit bias reaches the verification pass's first row only (the row the regular sampler
    prepares); rows 1 .. gamma, the bonus row included, are processed without it. Draft rows carry it."""
    prefix = list(prefix)
    nobias = dataclasses.replace(settings, logit_bias=())

    def law(logits, history):
        return probs(logits, settings, history)

    xs, qs, logits = _chain(prefix, draft, target, gamma, rng, settings, law)
    ps = [probs(logits[0], settings, prefix)]
    ps += [probs(logits[j], nobias, prefix + xs[:j]) for j in range(1, gamma + 1)]  # BUG: bias dropped after row 0
    return verify(xs, qs, ps, rng)
