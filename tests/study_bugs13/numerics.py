"""Round steps whose mistake is numerical: draft rows normalised with an L2 default, a target
softmax whose normaliser misses the temperature (``--logits``), and the filters' mask applied to
the target's probabilities after their normalisation (``--logits``)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import chain, draft_chain_logits, histories, probs, target_logits

from specverify.dists import process_logits, softmax

from ._common import count_vector


def draft_rows_normalised_with_l2_default(prefix, draft, target, gamma, rng):
    """The draft rows are renormalised (after a dtype cast) with a ``normalize`` helper whose default
    norm is L2 (as ``sklearn.preprocessing.normalize``): the verifier gets q / ||q||_2 >= q, so the
    ratio is p(x) ||q||_2 / q(x) (too few acceptances) and the residual (p - q / ||q||_2)+; the drafts
    are drawn from q."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    rows = [q / np.linalg.norm(q) for q in qs]  # BUG: q / q.sum(), the L1 norm of a probability row
    return chain(xs, rows, target_rows(prefix, target, xs), rng)


def _counts(settings, history, v):
    seen, generated = histories(settings, history)
    return count_vector(seen, v), count_vector(generated, v)


def target_softmax_denominator_untempered(prefix, draft, target, gamma, rng, settings):
    """The verifier's softmax divides exp(y), y the processed (tempered, filtered) logits, by the
    sum of exp(T y), the normaliser of the logits before temperature: at T != 1 the target's rows
    do not sum to 1 (the ratio and the residual use them as they are; the bonus sampler
    renormalises). Greedy and T = 1 rows and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    t = settings.temperature

    def row(zi, h):
        if settings.is_greedy or t == 1.0:
            return probs(zi, settings, h)
        sc, oc = _counts(settings, h, len(zi))
        y = process_logits(zi, settings, seen_counts=sc, output_counts=oc)
        ty = t * y
        m = np.max(ty)
        return np.exp(y - (m + np.log(np.sum(np.exp(ty - m)))))  # BUG: softmax(y), normalised by sum exp(y)

    ps = [row(z[i], prefix + xs[:i]) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_filter_mask_applied_after_normalisation(prefix, draft, target, gamma, rng, settings):
    """The verifier normalises the target's row before the filters (bias, penalties and
    temperature applied) and then zeroes the tokens top-k, top-p and min-p remove, without
    renormalising: the rows sum to the kept mass (ratio and residual use them so; the bonus
    sampler renormalises). Rows without a filter, greedy rows and the drafts are right."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    unfiltered = dataclasses.replace(settings, top_k=0, top_p=1.0, min_p=0.0)

    def row(zi, h):
        sc, oc = _counts(settings, h, len(zi))
        y = process_logits(zi, settings, seen_counts=sc, output_counts=oc)
        full = softmax(process_logits(zi, unfiltered, seen_counts=sc, output_counts=oc))
        return np.where(np.isfinite(y), full, 0.0)  # BUG: softmax(y), renormalised over the kept tokens

    ps = [row(z[i], prefix + xs[:i]) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)
