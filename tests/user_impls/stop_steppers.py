"""Round steps under a stop unit, written as users write them (issue 21, item 2).

A round step is told the request's stop ids through ``settings.stop_token_ids``; the audit's loop
ends a request at the first stop a round emits (an engine's stop check), so a step may cut its
round at a stop itself or leave that to the loop. What a step must not do is change the law of
the stop ids: they are tokens like any other until one is emitted.
"""

import numpy as np


def _sample(w, rng):
    w = np.asarray(w, dtype=np.float64)
    return int(rng.choice(len(w), p=w / w.sum()))


def _verify(prefix, xs, qs, target, rng):
    ps = np.asarray(target(list(prefix), xs), dtype=np.float64)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(_sample(np.maximum(ps[i] - qs[i], 0.0), rng))
        return out
    out.append(_sample(ps[len(xs)], rng))
    return out


def _no_greedy(settings):
    if settings.temperature == 0:
        raise NotImplementedError("greedy decoding is not implemented by this step")


def _draft(prefix, draft, gamma, rng, stops=()):
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(_sample(q, rng))
        qs.append(q)
        if xs[-1] in stops:  # stop drafting at a drafted stop (nothing after it could be kept)
            break
    return xs, qs


def step_cuts_at_stop_correct(prefix, draft, target, gamma, rng, settings):
    """Correct: the chain rule, and the round is cut after its first stop (the engine's finish check
    moved into the step)."""
    _no_greedy(settings)
    xs, qs = _draft(prefix, draft, gamma, rng)
    out = _verify(prefix, xs, qs, target, rng)
    cut = next((i for i, t in enumerate(out) if t in settings.stop_token_ids), None)
    return out if cut is None else out[: cut + 1]


def step_draft_stops_at_stop_correct(prefix, draft, target, gamma, rng, settings):
    """Correct (unusual): drafting ends at a drafted stop (openvinotoolkit/openvino.genai#3293's
    fix: early termination on a draft EOS), so a round may verify fewer than gamma drafts; the stop
    itself is verified like any draft."""
    _no_greedy(settings)
    xs, qs = _draft(prefix, draft, gamma, rng, stops=settings.stop_token_ids)
    return _verify(prefix, xs, qs, target, rng)


def step_drafted_stop_unverified(prefix, draft, target, gamma, rng, settings):
    """Bug (openvinotoolkit/openvino.genai#3293: when the draft generates EOS the sampler marks the
    sequence finished, though the target may reject that EOS): drafting ends at a drafted stop and
    the request ends there, the drafts up to it taken without the acceptance test."""
    _no_greedy(settings)
    xs, qs = _draft(prefix, draft, gamma, rng, stops=settings.stop_token_ids)
    if xs[-1] in settings.stop_token_ids:
        return xs  # the sequence is already finished: nothing is verified
    return _verify(prefix, xs, qs, target, rng)


def step_replacement_never_stop(prefix, draft, target, gamma, rng, settings):
    """Bug (written for the suite; the issue's "an EOS id treated specially"): the replacement after a
    rejection is drawn with the stop ids masked out, as if a request could not end on a token the
    draft did not propose; a stop is emitted only as an accepted draft or a bonus."""
    _no_greedy(settings)
    xs, qs = _draft(prefix, draft, gamma, rng)
    ps = np.asarray(target(list(prefix), xs), dtype=np.float64)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        r = np.maximum(ps[i] - qs[i], 0.0)
        r[list(settings.stop_token_ids)] = 0.0
        out.append(_sample(r if r.sum() > 0 else ps[i], rng))
        return out
    out.append(_sample(ps[len(xs)], rng))
    return out
