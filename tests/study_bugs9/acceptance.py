"""Round steps whose acceptance test (the rule that decides which drafts are kept) is wrong."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, sample_or, target_rows


def verification_by_target_argmax_bonus_sampled(prefix, draft, target, gamma, rng):
    """Verification keeps a draft iff it equals argmax p_i and emits argmax p_i at the first
    mismatch, whatever the request's temperature; only the bonus is sampled from p_gamma."""
    xs, _ = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        t = int(np.argmax(ps[i]))  # BUG: the greedy verify path taken for sampled requests
        if t == x:
            out.append(x)
            continue
        out.append(t)
        return out
    out.append(sample(ps[gamma], rng))
    return out


def best_of_two_branches_by_independent_matches(prefix, draft, target, gamma, rng):
    """Two draft chains are proposed; each is verified by sample-and-match against its own,
    independent target samples (t_i ~ p(. | prefix + chain[:i]), kept while t_i == x_i, then t_m
    emitted), which alone would be exact; the branch with the longer match is emitted (the first on a
    tie), so the choice depends on the verification's outcome."""
    branches = []
    for _ in range(2):
        xs, _ = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        ts = [sample(ps[i], rng) for i in range(gamma + 1)]
        m = next((i for i in range(gamma) if ts[i] != xs[i]), gamma)
        branches.append((m, list(xs[:m]) + [ts[m]]))
    return max(branches, key=lambda b: b[0])[1]  # BUG: picking the better-matching branch biases the law


def target_only_siblings_with_fresh_coin(prefix, draft, target, gamma, rng):
    """Target-only verification of a tree whose first level holds the draft's two most likely ids
    c1, c2 (tried in order against the cumulative target mass, as SGLang's kernel does), but the
    second sibling gets a fresh coin: c2 is taken with probability (1 - p(c1)) min(1, p(c1) + p(c2))
    instead of p(c2). Below an accepted sibling the chain of draft argmaxes is verified by the one-hot
    rule (accept with p(x), else a draw from p without x), then the bonus."""
    q0 = np.asarray(draft(list(prefix)), dtype=np.float64)
    c1, c2 = (int(t) for t in np.argsort(-q0, kind="stable")[:2])
    p0 = np.asarray(target(list(prefix), []), dtype=np.float64)[0]
    if rng.random() < p0[c1]:
        first = c1
    elif rng.random() < p0[c1] + p0[c2]:  # BUG: the cumulative mass must be compared with the same coin
        first = c2
    else:
        w = p0.copy()
        w[[c1, c2]] = 0.0
        return [sample_or(w, p0, rng)]
    xs = [first]
    for _ in range(gamma - 1):
        xs.append(int(np.argmax(draft(list(prefix) + xs))))
    ps = target_rows(prefix, target, xs)
    out = [first]
    for i in range(1, gamma):
        x = xs[i]
        if rng.random() < ps[i][x]:
            out.append(x)
            continue
        w = ps[i].copy()
        w[x] = 0.0
        out.append(sample_or(w, ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
