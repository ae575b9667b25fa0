"""Exact round steps written in unusual ways; several look like bugs."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, probs, sample, sample_or, target_rows

from study_bugs7._common import RequestTracker, verify, with_knob

#: verification stops at the first draft row whose peak is below this (a draft-side confidence cut)
P_MIN = 0.3

#: the drafter's own top-k in draft_sampler_narrower_than_request
DRAFT_TOP_K = 8


def ratio_in_base_two(prefix, draft, target, gamma, rng):
    """Everything in base-2 log space: the ratio is exp2(log2 p - log2 q), the residual
    (exp2(log2 p) - exp2(log2 q))+ and the bonus exp2(log2 p): the bases match, so it is exact."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    with np.errstate(divide="ignore"):
        lq = np.log2(np.asarray(qs))
        lp = np.log2(target_rows(prefix, target, xs))
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, np.exp2(lp[i][x] - lq[i][x])):
            out.append(x)
            continue
        out.append(sample_or(np.maximum(np.exp2(lp[i]) - np.exp2(lq[i]), 0.0), np.exp2(lp[i]), rng))
        return out
    out.append(sample(np.exp2(lp[gamma]), rng))
    return out


def coin_from_two_uniforms_mod_one(prefix, draft, target, gamma, rng):
    """Each acceptance coin is (u1 + u2) mod 1 for two fresh uniforms, a "dithered" coin; the sum of
    two independent uniforms taken mod 1 is again uniform on [0, 1), so the test is the standard one."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        u = (rng.random() + rng.random()) % 1.0
        if u < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(np.maximum(ps[i] - qs[i], 0.0), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def verification_stops_at_unconfident_draft_row(prefix, draft, target, gamma, rng):
    """All gamma drafts are proposed and sent to the target, but verification stops at the first
    position k whose draft row peaks below P_MIN (a cut decided from the draft's rows, never from the
    draft token or the target): xs[:k] are verified and the "bonus" is drawn from the middle row
    p_k = p(. | prefix + xs[:k]). Exact: the cut depends only on the context of row k."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    k = next((i for i, q in enumerate(qs) if q.max() < P_MIN), gamma)
    return verify(xs[:k], qs[:k], ps, rng)


def draft_sampler_narrower_than_request(prefix, draft, target, gamma, rng, settings):
    """``--logits``: the drafter samples under its own settings (the request's with top-k capped at 8)
    and reports exactly the rows it sampled from; the target is processed with the request's
    settings. Draft and target differ, but only the target's law reaches the output."""
    prefix = list(prefix)
    dsettings = with_knob(settings, top_k=min(settings.top_k or DRAFT_TOP_K, DRAFT_TOP_K))
    xs, qs = [], []
    for _ in range(gamma):
        q = probs(draft(prefix + xs), dsettings, prefix + xs)
        xs.append(sample(q, rng))
        qs.append(q)
    z = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [probs(z[j], settings, prefix + xs[:j]) for j in range(gamma + 1)]
    return verify(xs, qs, ps, rng)


class VerifyPassPaddedWithPreviousDrafts:
    """Adaptive draft length (one more than last round's accepted count, capped at gamma), with the
    verification pass always fed gamma tokens: the slots past this round's drafts are padded with the
    previous round's drafts (stale tokens from another context). Only rows 0 .. k are read, the bonus
    from row k, none of which sees the padding, so it is exact."""

    def __init__(self):
        self.tracker = RequestTracker()
        self.k = 1
        self.last = []

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.tracker.is_new(prefix):
            self.k, self.last = gamma, []
        k = min(self.k, gamma)
        xs, qs = draft_chain(prefix, draft, k, rng)
        pad = (self.last + [0] * gamma)[k:gamma]
        ps = target_rows(prefix, target, xs + pad)
        out = verify(xs, qs, ps, rng)
        self.k = len(out)
        self.last = xs + pad
        self.tracker.done(prefix, out)
        return out


class GeneratorForkedOncePerRequest:
    """At the first round of a request the step draws a seed from the audit's rng and forks its own
    generator; every random number of the request (drafts, coins, replacements, bonus) then comes
    from that generator. A fresh seeded stream per request: exact and reproducible."""

    def __init__(self):
        self.tracker = RequestTracker()
        self.g = None

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.tracker.is_new(prefix):
            self.g = np.random.default_rng(int(rng.integers(2**63)))
        xs, qs = draft_chain(prefix, draft, gamma, self.g)
        ps = target_rows(prefix, target, xs)
        out = verify(xs, qs, ps, self.g)
        self.tracker.done(prefix, out)
        return out


verify_pass_padded_with_previous_drafts = VerifyPassPaddedWithPreviousDrafts()
generator_forked_once_per_request = GeneratorForkedOncePerRequest()
