"""Round steps whose replacement (the token after a rejection) comes from the wrong law."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _with_replacement(prefix, draft, target, gamma, rng, replace):
    """The standard round with ``replace(p, q, x, rng) -> id`` drawing the replacement."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(replace(ps[i], qs[i], x, rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def residual_softmax_of_probs(prefix, draft, target, gamma, rng):
    """The residual is normalised with a softmax over its probabilities, softmax((p - q)+), instead
    of being divided by its sum.

    huggingface/transformers#28508 (B01): the residual renormalised with softmax(clamp(p - q, 0)).
    """

    def replace(p, q, x, rng):
        r = residual(p, q)
        e = np.exp(r - r.max())  # BUG: softmax of probabilities
        return sample(e / e.sum(), rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def residual_of_sorted_rows(prefix, draft, target, gamma, rng):
    """The residual subtracts the two rows after each was sorted by its own probabilities (index-
    aligned entries of two differently ordered candidate lists), and the drawn position is mapped
    back to an id through the target's order.

    ggml-org/llama.cpp examples/speculative (B32, code reading): the residual subtracts
    index-aligned entries of two sorted, possibly different, candidate lists.
    """

    def replace(p, q, x, rng):
        order_p = np.argsort(-p, kind="stable")
        sp, sq = p[order_p], np.sort(q)[::-1]
        r = np.maximum(sp - sq, 0.0)  # BUG: entries of different ids subtracted
        k = sample_or(r, sp, rng)
        return int(order_p[k])

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def replacement_by_redrafting(prefix, draft, target, gamma, rng):
    """After a rejection a new token is drafted from the same draft row and put through the same
    test, repeatedly, until one passes (at most 100 tries, then (p - q)+): the replacement's law is
    min(p, q) normalised, not (p - q)+.

    Written for the study: "if the draft was wrong, draft again" is the naive reading of rejection
    sampling (rejection sampling of p from proposal q does retry, but with the envelope test
    u < p/(M q), and its accepted tokens are exact only without speculation's residual).
    """

    def replace(p, q, x, rng):
        for _ in range(100):
            y = sample(q, rng)  # BUG: a retry of the draft instead of the residual
            if rng.random() < min(1.0, p[y] / q[y]):
                return y
        return sample_or(residual(p, q), p, rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def replacement_greedy(prefix, draft, target, gamma, rng):
    """The replacement is the argmax of the residual (p - q)+, not a sample from it.

    Written for the study: one recovery kernel serves greedy and random rows (vLLM's rejection
    sampler has both paths, engines notes 1.1), and the greedy row's argmax is applied to every row;
    the bonus keeps its sampler.
    """

    def replace(p, q, x, rng):
        r = residual(p, q)
        return int(np.argmax(r if r.sum() > 0 else p))  # BUG: argmax, not a draw

    return _with_replacement(prefix, draft, target, gamma, rng, replace)


def stop_ids_removed_from_replacement(prefix, draft, target, gamma, rng, settings):
    """The request's stop ids are zeroed in the residual before the replacement is drawn (the
    replacement "should not end the request on a correction"); drafts and the bonus are unchanged.

    Written for the study: docs/adapters.md's stop unit names a step that masks the stop id out of
    the replacement as a case it must catch; the class of openvinotoolkit/openvino.genai#3293 (a
    sampler that treats a stop id specially on the speculative path).
    """

    def replace(p, q, x, rng):
        r = residual(p, q)
        for t in settings.stop_token_ids:
            if t < len(r):
                r[t] = 0.0  # BUG: stops removed from the law
        return sample_or(r, p, rng)

    return _with_replacement(prefix, draft, target, gamma, rng, replace)
