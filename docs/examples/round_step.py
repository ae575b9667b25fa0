"""A round step in the article's shape: ``specverify audit --round round_step:step``.

``prefix`` is the whole sequence so far (prompt + emitted tokens), ``draft(prefix)`` returns the
draft's next-token probabilities [V], ``target(prefix, proposed)`` the target's len(proposed) + 1
rows of one pass, and ``rng`` (a numpy Generator) is the only source of randomness.
"""

import numpy as np


def _sample(w, rng):
    """One draw from the weights ``w`` (not necessarily normalised), by inverse CDF: the same law as
    ``rng.choice(len(w), p=w / w.sum())`` at a fifth of its cost (no validation of ``p`` per call)."""
    c = np.asarray(w, dtype=np.float64).cumsum()
    i = c.searchsorted(rng.random() * c[-1], side="right")
    return int(min(i, c.searchsorted(c[-1])))  # u * total rounded up to total: the last id with mass


def step(prefix, draft, target, gamma, rng):
    xs, qs = [], []
    for _ in range(gamma):  # draft gamma tokens
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(_sample(q, rng))
        qs.append(q)
    ps = np.asarray(target(list(prefix), xs), dtype=np.float64)  # [gamma + 1, V], one target pass
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):  # accept with probability min(1, p/q)
            out.append(x)
            continue
        out.append(_sample(np.maximum(ps[i] - qs[i], 0.0), rng))  # replacement from (p - q)+
        return out
    out.append(_sample(ps[gamma], rng))  # every draft accepted: a bonus token from the last row
    return out
