"""A round step that applies the sampling settings itself: ``specverify audit --round
round_step_logits:step --logits``.

With ``--logits``, ``draft(prefix)`` and ``target(prefix, proposed)`` return raw logits and the step
receives the audit's ``settings`` (a :class:`specverify.RequestSettings`: the sampling settings, and
``prompt_len``, the length of the request's prompt at the start of ``prefix``) as a sixth argument.
The repetition penalty counts every token of the history; presence and frequency penalties count
the generated ones only.
Only the target's processing decides the output law, so it is what this audit tests: here it is
specverify's own pipeline (``probs_from_logits``); in your code it is your own.
"""

import numpy as np

from specverify.dists import probs_from_logits


def _counts(ids, v):
    return np.bincount(np.asarray(ids, dtype=np.int64), minlength=v).astype(np.float64)


def _probs(logits, settings, history):
    if not settings.uses_history:  # no penalty in this request: the counts would go unread
        return probs_from_logits(np.asarray(logits, dtype=np.float64), settings)
    seen, generated = _counts(history, len(logits)), _counts(history[settings.prompt_len :], len(logits))
    return probs_from_logits(np.asarray(logits, dtype=np.float64), settings, seen_counts=seen, output_counts=generated)


def _sample(w, rng):
    return int(rng.choice(len(w), p=w / w.sum()))


def step(prefix, draft, target, gamma, rng, settings):
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = _probs(draft(prefix + xs), settings, prefix + xs)
        xs.append(_sample(q, rng))
        qs.append(q)
    logits = np.asarray(target(prefix, xs))  # [gamma + 1, V] raw logits
    out = []
    for i, x in enumerate(xs):
        p = _probs(logits[i], settings, prefix + xs[:i])  # row by row: none past the first rejection
        if rng.random() < min(1.0, p[x] / qs[i][x]):
            out.append(x)
            continue
        out.append(_sample(np.maximum(p - qs[i], 0.0), rng))
        return out
    out.append(_sample(_probs(logits[gamma], settings, prefix + xs), rng))
    return out
