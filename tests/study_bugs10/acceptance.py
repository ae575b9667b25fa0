"""Round steps whose mistake is in the acceptance test."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows

from ._common import chain, ratio


def second_candidate_tested_against_unupdated_target(prefix, draft, target, gamma, rng):
    """SpecInfer-style multi-candidate verification at the first position: a second candidate y ~
    q_0 is drawn besides the chain; if x_0 is rejected, y is tested against the target row, which
    must first be replaced by the normalised residual (p_0 - q_0)+, but is left as p_0: y is
    accepted with min(1, p_0(y) / q_0(y)) and a second rejection draws from (p_0 - q_0)+ instead of
    the residual of the residual. A kept x_0 continues the chain (standard rule); a kept y ends the
    round."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    alt = sample(qs[0], rng)
    ps = target_rows(prefix, target, xs)
    if rng.random() < ratio(ps[0], qs[0], xs[0]):
        return [xs[0]] + chain(xs[1:], qs[1:], ps[1:], rng)
    nxt = ps[0]  # BUG: must be (p_0 - q_0)+ normalised before the next candidate is tested
    if rng.random() < ratio(nxt, qs[0], alt):
        return [alt]
    return [sample_or(residual(nxt, qs[0]), nxt, rng)]


def exponential_clock_with_gumbel_noise(prefix, draft, target, gamma, rng):
    """The log-space test 'accept iff E > log(q(x) / p(x))' (exact with E ~ Exp(1)) is run with a
    standard Gumbel variable -log(-log u) in place of E = -log u: a draft is accepted with
    probability 1 - exp(-p(x) / q(x)) instead of min(1, p(x) / q(x)); replacement and bonus are
    standard."""

    def accept(i, x, p, q, u):
        with np.errstate(divide="ignore", invalid="ignore"):
            g = -np.log(-np.log(u))  # BUG: Gumbel noise; the clock must be E = -log(u)
            return bool(g > np.log(q[x]) - np.log(p[x]))

    xs, qs = draft_chain(prefix, draft, gamma, rng)
    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def one_hot_rule_for_drafts_at_row_argmax(prefix, draft, target, gamma, rng):
    """Drafts are sampled from q, but the verifier takes a draft equal to its row's argmax for a
    greedy (one-hot) proposal: such a draft is accepted with probability p(x) and a rejection draws
    from p with x removed; every other draft gets the full rule (min(1, p/q), residual (p - q)+)."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    one_hot = [x == int(np.argmax(q)) for x, q in zip(xs, qs)]  # BUG: sampled drafts are not one-hot proposals
    out = []
    for i, x in enumerate(xs):
        p, q = ps[i], qs[i]
        r = float(p[x]) if one_hot[i] else ratio(p, q, x)
        if rng.random() < r:
            out.append(x)
            continue
        if one_hot[i]:
            w = p.copy()
            w[x] = 0.0
        else:
            w = residual(p, q)
        out.append(sample_or(w, p, rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
