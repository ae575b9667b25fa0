"""Greedy speculative decoding.

* ``greedy_*``: greedy steppers ``step(prefix, draft, target, gamma, rng)`` audited with
  ``--greedy``: rows are raw probabilities and the output must be target-only greedy decoding
  (argmax of the target row for the true prefix, lowest id on exact ties).
* ``step_settings_*``: probability-mode steps with a 6th parameter ``settings``; at
  ``settings.temperature == 0`` the rows are raw probabilities and the step must decode greedily,
  otherwise the rows are already processed and the step samples.
"""

import numpy as np

from ._choice import choice


def _argmax_drafts(prefix, draft, gamma):
    xs = []
    for _ in range(gamma):
        xs.append(int(np.argmax(draft(list(prefix) + xs))))
    return xs


# ----------------------------------------------------------------------------- greedy steppers, correct


def greedy_argmax(prefix, draft, target, gamma, rng):
    """Correct: drafts argmax q, emits argmax p up to and including the first mismatch, bonus argmax p_gamma."""
    xs = _argmax_drafts(prefix, draft, gamma)
    P = np.asarray(target(list(prefix), xs))
    out = []
    for j, x in enumerate(xs):
        t = int(np.argmax(P[j]))
        out.append(t)
        if t != x:
            return out
    return out + [int(np.argmax(P[gamma]))]


def greedy_sampled_drafts(prefix, draft, target, gamma, rng):
    """Correct (unusual): drafts are *sampled* from q, verification is argmax p (output is still target greedy)."""
    prefix = list(prefix)
    xs = []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs))
        xs.append(choice(rng, len(q), q))
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        t = int(np.argmax(P[j]))
        if t != x:
            return xs[:j] + [t]
    return xs + [int(np.argmax(P[-1]))]


def greedy_vectorised(prefix, draft, target, gamma, rng):
    """Correct: argmax of all target rows at once, accepted length from a cumulative product of matches."""
    xs = _argmax_drafts(prefix, draft, gamma)
    best = np.asarray(target(list(prefix), xs)).argmax(axis=1)
    n = int(np.cumprod(best[:gamma] == np.array(xs)).sum())
    return [int(t) for t in best[: n + 1]]


# ----------------------------------------------------------------------------- greedy steppers, buggy


def greedy_residual_argmax(prefix, draft, target, gamma, rng):
    """Bug: on a mismatch emits argmax max(0, p - q) (the sampling residual) instead of argmax p."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        qs.append(np.asarray(draft(prefix + xs)))
        xs.append(int(np.argmax(qs[-1])))
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if int(np.argmax(P[j])) != x:
            return xs[:j] + [int(np.argmax(np.maximum(P[j] - qs[j], 0)))]
    return xs + [int(np.argmax(P[gamma]))]


def greedy_tie_highest(prefix, draft, target, gamma, rng):
    """Bug: the target argmax breaks exact ties towards the highest id (argmax of the reversed row)."""
    xs = _argmax_drafts(prefix, draft, gamma)
    P = np.asarray(target(list(prefix), xs))
    V = P.shape[1]
    best = [V - 1 - int(np.argmax(row[::-1])) for row in P]
    for j, x in enumerate(xs):
        if best[j] != x:
            return xs[:j] + [best[j]]
    return xs + [best[gamma]]


def greedy_tie_accepts_draft(prefix, draft, target, gamma, rng):
    """Bug: accepts a draft whenever p[x] == max p, so on an exact tie the draft's id wins over the lowest id."""
    prefix = list(prefix)
    xs = []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs))
        xs.append(int(np.flatnonzero(q == q.max())[-1]))  # drafter breaks ties the other way
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if P[j][x] != P[j].max():
            return xs[:j] + [int(np.argmax(P[j]))]
    return xs + [int(np.argmax(P[gamma]))]


def greedy_bonus_wrong_row(prefix, draft, target, gamma, rng):
    """Bug: the bonus token is argmax of row gamma - 1 instead of row gamma."""
    xs = _argmax_drafts(prefix, draft, gamma)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if int(np.argmax(P[j])) != x:
            return xs[:j] + [int(np.argmax(P[j]))]
    return xs + [int(np.argmax(P[gamma - 1]))]


def greedy_near(prefix, draft, target, gamma, rng):
    """Bug: "near-greedy" acceptance: keeps a draft if p[x] >= 0.5 * max p."""
    xs = _argmax_drafts(prefix, draft, gamma)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if P[j][x] < 0.5 * P[j].max():
            return xs[:j] + [int(np.argmax(P[j]))]
    return xs + [int(np.argmax(P[gamma]))]


# ----------------------------------------------------------------------------- settings-aware steps


def _sample_round(prefix, draft, target, gamma, rng):
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        qs.append(np.asarray(draft(prefix + xs)))
        xs.append(choice(rng, len(qs[-1]), qs[-1]))
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            r = np.maximum(P[j] - qs[j], 0)
            r = r / r.sum() if r.sum() > 0 else P[j]
            return xs[:j] + [choice(rng, len(r), r)]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_settings_correct(prefix, draft, target, gamma, rng, settings):
    """Correct: greedy verification at temperature 0, the textbook sampling rule otherwise."""
    if settings.temperature == 0:
        return greedy_argmax(prefix, draft, target, gamma, rng)
    return _sample_round(prefix, draft, target, gamma, rng)


def step_settings_one_hot(prefix, draft, target, gamma, rng, settings):
    """Correct (unusual): at temperature 0 turns both rows into one-hot argmax vectors and runs the ordinary
    sampling rule.
    """
    if settings.temperature != 0:
        return _sample_round(prefix, draft, target, gamma, rng)

    def one_hot(row):
        out = np.zeros(len(row))
        out[int(np.argmax(row))] = 1.0
        return out

    def d(pre):
        return one_hot(np.asarray(draft(pre)))

    def t(pre, prop):
        return np.stack([one_hot(r) for r in np.asarray(target(pre, prop))])

    return _sample_round(prefix, d, t, gamma, rng)


def step_settings_ignores_greedy(prefix, draft, target, gamma, rng, settings):
    """Bug: ignores temperature 0 and samples from the raw rows it is given."""
    return _sample_round(prefix, draft, target, gamma, rng)


def step_settings_low_temperature(prefix, draft, target, gamma, rng, settings):
    """Bug: emulates temperature 0 with temperature 1e-3, which splits exact (and near) ties instead of taking
    the lowest id.
    """
    if settings.temperature != 0:
        return _sample_round(prefix, draft, target, gamma, rng)

    def sharpen(row):
        with np.errstate(divide="ignore"):
            z = np.log(row) / 1e-3
        e = np.exp(z - z.max())
        return e / e.sum()

    def d(pre):
        return sharpen(np.asarray(draft(pre)))

    def t(pre, prop):
        return np.stack([sharpen(r) for r in np.asarray(target(pre, prop))])

    return _sample_round(prefix, d, t, gamma, rng)


def greedy_rotating_cache_256(prefix, draft, target, gamma, rng, settings):
    """Bug (a rotating KV cache of 256 slots; greedy output diverging after a few hundred tokens, as
    in ml-explore/mlx-lm#1423): past 256 tokens of context the verification pass sees the last 256."""
    if not settings.is_greedy:
        raise NotImplementedError("greedy only")
    xs = []
    for _ in range(gamma):
        xs.append(int(np.argmax(draft(list(prefix) + xs))))
    rows = np.asarray(target(list(prefix)[-256:], xs))
    out = []
    for j, x in enumerate(xs):
        out.append(int(np.argmax(rows[j])))
        if out[-1] != x:
            return out
    return out + [int(np.argmax(rows[gamma]))]
