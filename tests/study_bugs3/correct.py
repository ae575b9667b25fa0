"""Correct round steps written in unusual ways (each exactly lossless): the study's decoys. Several
look like a bug of the set at first sight."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, draft_chain, probs, residual, sample, sample_or, target_rows

from specverify.dists import SamplingSettings, process_logits, softmax


def draft_ignores_settings(prefix, draft, target, gamma, rng, settings):
    """The draft samples from the softmax of its raw logits (no temperature, filters or penalties)
    and the ratio and residual use exactly that law; the target's rows get the request's pipeline.

    Exact: the chain rule is lossless for any proposal law as long as q is the law each draft was
    drawn from (engines notes, Table A's [derived] note). It looks like transformers#28166 (B02:
    the assistant did not inherit the generation config), which is only slow when q is consistent.
    """
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = softmax(np.asarray(draft(prefix + xs), dtype=np.float64))
        xs.append(sample(q, rng))
        qs.append(q)
    zs = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [probs(zs[j], settings, prefix + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        if rng.random() * qs[i][x] < ps[i][x]:
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def draft_context_lagged(prefix, draft, target, gamma, rng):
    """The draft model sees the prefix without its last token (a draft cache rewound one entry too
    far), and its drafts are verified with exactly the rows they were drawn from.

    Exact: the drafts' law only changes acceptance; q is still the law each was drawn from and the
    target rows condition on the true prefix. lablup/mlxcel#994 (B30) reported this as an
    acceptance-only finding.
    """
    prefix = list(prefix)
    lagged = prefix[:-1]
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(lagged + xs), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def race_on_unclamped_difference(prefix, draft, target, gamma, rng):
    """The replacement is the exponential race argmax((p - q) / E), E ~ Exp(1), on the difference
    without the clamp at 0.

    Exact: after a rejection some entry of p - q is positive; a positive entry divided by E > 0
    always beats the zero and negative ones, so the argmax is the race over (p - q)+, which picks
    k with probability (p - q)+_k / sum.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        e = rng.exponential(size=len(ps[i]))
        out.append(int(np.argmax((ps[i] - qs[i]) / e)))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def no_bonus_after_full_acceptance(prefix, draft, target, gamma, rng):
    """When every draft is accepted the round ends with the drafts and no bonus token.

    Exact (only slower): the accepted drafts have the target's law, and the next round starts from
    the true prefix; transformers does the same for an EOS candidate accepted at the end of a block.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    return out


def residual_with_rejected_draft_masked(prefix, draft, target, gamma, rng):
    """The rejected draft is zeroed in the residual before the draw ("never re-emit the token just
    rejected").

    Exact: a draft is rejected only when p(x) < q(x) (else its acceptance probability is 1), and
    then (p - q)+ is already 0 at x, so the mask changes nothing. It looks like the one-hot rule's
    "remove x" mixed into the full rule (vllm-project/vllm#40149).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        r = residual(ps[i], qs[i])
        r[x] = 0.0
        out.append(sample_or(r, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


class AdaptiveDraftLength:
    """The number of drafts adapts across rounds (transformers' "heuristic" schedule: + 2 after a
    fully accepted round, - 1 otherwise, kept within 1 .. gamma, starting at 2).

    Exact: each round's length is fixed before the round from what was already emitted, and the
    chain rule is lossless for any length (engines notes, section 2: draft-side only).
    """

    def __init__(self):
        self.expect = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.expect is None or prefix != self.expect:
            self.k = min(2, gamma)
        k = self.k
        xs, qs = draft_chain(prefix, draft, k, rng)
        ps = target_rows(prefix, target, xs)
        out = []
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            break
        else:
            out.append(sample(ps[k], rng))
        full = len(out) == k + 1
        self.k = max(1, min(gamma, k + 2 if full else k - 1))
        self.expect = prefix + out
        return out


adaptive_draft_length = AdaptiveDraftLength()


def temperature_as_power(prefix, draft, target, gamma, rng, settings):
    """Both sides apply temperature as a power of the penalised probabilities, p ** (1 / T)
    renormalised, and then the filters on the log of that; greedy requests and llama.cpp's order
    (temperature last) go through the library pipeline.

    Exact: softmax(z / T) = softmax(z) ** (1 / T) / sum, and top-k, top-p and min-p depend on a
    row's logits only up to an additive constant, so filtering log(p ** (1 / T) / sum) keeps the
    same tokens as filtering z / T.
    """
    s = settings

    def law(z, h):
        if s.is_greedy or s.temperature_last:
            return probs(z, s, h)
        v = len(z)
        pen = process_logits(
            z,
            dataclasses.replace(s, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
            seen_counts=counts(h, v),
            output_counts=counts(h[s.prompt_len :], v),
        )
        w = softmax(pen) ** (1.0 / s.temperature)
        w = w / w.sum()
        with np.errstate(divide="ignore"):
            lw = np.log(w)
        filters = SamplingSettings(top_k=s.top_k, top_p=s.top_p, min_p=s.min_p, min_tokens_to_keep=s.min_tokens_to_keep)
        return softmax(process_logits(lw, filters))

    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        q = law(np.asarray(draft(h), dtype=np.float64), h)
        xs.append(sample(q, rng))
        qs.append(q)
    zs = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [law(zs[j], prefix + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
