"""Round steps with a numerical mistake: log bases, normalisation, a softmax too many, log-space arithmetic."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, sample_or, target_rows

from specverify.dists import softmax
from study_bugs7._common import verify


def target_log2_probs_exponentiated_with_exp(prefix, draft, target, gamma, rng):
    """The target's rows arrive as base-2 log-probabilities (a log2-domain softmax kernel's output)
    and are turned back into probabilities with exp instead of exp2: the step uses p ** (1 / ln 2)
    (p sharpened, unnormalised) for the ratio, the residual and the bonus."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    with np.errstate(divide="ignore"):
        lp2 = np.log2(target_rows(prefix, target, xs))  # what the kernel hands back
    ps = np.exp(lp2)  # BUG: base-2 logs need exp2
    return verify(xs, qs, ps, rng)


def target_rows_normalised_by_their_max(prefix, draft, target, gamma, rng):
    """The target's rows are "renormalised" after a float32 round trip by dividing by their maximum
    (the min-p habit) instead of their sum: p / max(p) inflates the ratio and the residual
    (p / max p - q)+; the bonus is unaffected (the sampler normalises)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs).astype(np.float32).astype(np.float64)
    ps = ps / ps.max(axis=1, keepdims=True)  # BUG: divide by the sum, not the max
    return verify(xs, qs, ps, rng)


def draft_probabilities_softmaxed_as_logits(prefix, draft, target, gamma, rng):
    """The drafter returns probabilities and the verifier, written for a drafter that returns logits,
    applies softmax to them: the ratio and the residual use softmax(q) (close to uniform) while the
    drafts were sampled from q."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    qs = [softmax(q) for q in qs]  # BUG: q is already a distribution
    return verify(xs, qs, ps, rng)


def residual_in_log_space_with_logaddexp(prefix, draft, target, gamma, rng):
    """The residual is computed in log space, log(p - q) where p > q, with np.logaddexp (numpy has no
    log-subtract-exp), which is log(p + q): the replacement is drawn from (p + q) on {p > q}."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        with np.errstate(divide="ignore"):
            lp, lq = np.log(ps[i]), np.log(qs[i])
        lres = np.where(lp > lq, np.logaddexp(lp, lq), -np.inf)  # BUG: logaddexp adds; the residual subtracts
        out.append(sample_or(np.exp(lres), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
