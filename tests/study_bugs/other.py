"""Round steps with mistakes outside the rule's formulas: stop tokens and random numbers."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, sample_or, target_rows


def stop_token_accepted_unverified(prefix, draft, target, gamma, rng, settings):
    """A drafted stop token ends the round at once, accepted without its test.

    "If the draft says the answer ends here, we are done": a stop id among the drafts is taken
    as is and the round (and request) ends. openvinotoolkit/openvino.genai#3293: the sampler
    took a drafted stop without the acceptance test (docs/adapters.md, the stop unit).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if x in settings.stop_token_ids:  # BUG: no acceptance test for a stop
            out.append(x)
            return out
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def one_uniform_per_round(prefix, draft, target, gamma, rng):
    """Draws one uniform per round and uses it for every draft's test.

    ``u = rng.random()`` was hoisted out of the loop "for speed": the tests of one round are no
    longer independent (after one acceptance with a small u, the next ones are likely too).
    Modelled on the RNG-coupling bugs B08 / B09 (engines notes, section 4: "RNG coupling is only
    visible statistically") and vllm-project/vllm#47386.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    u = rng.random()  # BUG: one coin for all positions
    out = []
    for i, x in enumerate(xs):
        if u < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def _inverse_cdf(w, u):
    c = np.cumsum(w)
    return int(min(np.searchsorted(c, u * c[-1], side="right"), len(w) - 1))


def coin_reused_for_replacement(prefix, draft, target, gamma, rng):
    """Uses the rejecting uniform again to draw the replacement by inverse CDF.

    Given a rejection, u lies in [p/q, 1), not uniform on [0, 1): the replacement is pushed to
    the tail of the id order. Modelled on the shared-noise class of vllm-project/vllm#47386 /
    #54282 ("a reused noise source makes the replacement nearly a function of the draft").
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u = rng.random()
        if u < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        r = residual(ps[i], qs[i])
        out.append(_inverse_cdf(r if r.sum() > 0 else ps[i], u))  # BUG: u is conditioned on the rejection
        return out
    out.append(_inverse_cdf(ps[gamma], rng.random()))
    return out


def draft_and_verifier_share_noise(prefix, draft, target, gamma, rng):
    """The draft's sampling uniform is also the acceptance test's uniform.

    Each draft is drawn by inverse CDF with u_i, and the same u_i decides its acceptance: the
    draft token and its coin are dependent. vllm-project/vllm#47386 (fixed by #54282): draft and
    verifier shared noise, fine for accept-iff-equal but biased for u < p/q.
    """
    prefix = list(prefix)
    xs, qs, us = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        u = rng.random()
        xs.append(_inverse_cdf(q, u))
        qs.append(q)
        us.append(u)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if us[i] < min(1.0, ps[i][x] / qs[i][x]):  # BUG: the drafting uniform reused
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def race_with_uniforms(prefix, draft, target, gamma, rng):
    """Samples the replacement as argmax(r / u) with uniforms, not argmax(r / E) with exponentials.

    vLLM's recovered token is ``argmax(max(p - q, 0) / E)``, E ~ Exp(1) (engines notes 1.4); the
    user drew ``torch.rand`` instead of ``torch.empty().exponential_()``, which favours the
    heaviest tokens. Written for the study from that kernel's description.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        r = residual(ps[i], qs[i])
        if r.sum() <= 0:
            r = ps[i]
        noise = 1.0 - rng.random(len(r))  # BUG: uniform in (0, 1], should be -log of it
        out.append(int(np.argmax(r / noise)))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def rng_seeded_by_position(prefix, draft, target, gamma, rng):
    """Seeds its own generator from the position (``len(prefix)``) instead of using ``rng``.

    "Reproducible per request" was implemented as a generator keyed by the sequence position, so
    every request draws the same numbers at the same offset. NVIDIA/TensorRT-LLM#19487 / #19505:
    the RNG offset keyed by sequence slot, so serial unseeded requests share one stream and give
    identical samples.
    """
    own = np.random.default_rng(len(prefix))  # BUG: the same stream for every request
    xs, qs = draft_chain(prefix, draft, gamma, own)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if own.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], own))
        return out
    out.append(sample(ps[gamma], own))
    return out
