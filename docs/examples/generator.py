"""A whole generator: ``specverify audit --generator generator:generate``.

``model`` gives the next-token laws the audit controls: ``model.target_probs(prefix)`` and
``model.draft_probs(prefix)`` (float64 [V], the sampling settings already applied). This one
decodes speculatively, gamma = 3 drafts per round, and returns ``max_new_tokens`` ids.
"""

import numpy as np


def _sample(w, rng):
    """One draw from the weights ``w`` (not necessarily normalised), by inverse CDF: the same law as
    ``rng.choice(len(w), p=w / w.sum())`` at a fifth of its cost (no validation of ``p`` per call)."""
    c = np.asarray(w, dtype=np.float64).cumsum()
    i = c.searchsorted(rng.random() * c[-1], side="right")
    return int(min(i, c.searchsorted(c[-1])))  # u * total rounded up to total: the last id with mass


def generate(prompt, max_new_tokens, seed, model, gamma=3):
    rng = np.random.default_rng(seed)
    seq = list(prompt)
    while len(seq) - len(prompt) < max_new_tokens:
        xs, qs = [], []
        for _ in range(gamma):
            q = np.asarray(model.draft_probs(seq + xs), dtype=np.float64)
            xs.append(_sample(q, rng))
            qs.append(q)
        for i, x in enumerate(xs):
            p = np.asarray(model.target_probs(seq), dtype=np.float64)
            if rng.random() < min(1.0, p[x] / qs[i][x]):
                seq.append(x)
                continue
            seq.append(_sample(np.maximum(p - qs[i], 0.0), rng))
            break
        else:
            seq.append(_sample(model.target_probs(seq), rng))
    return seq[len(prompt) :][:max_new_tokens]
