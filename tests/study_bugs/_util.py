"""Small helpers the study's round steps share, written the way users write them.

Nothing here is buggy: every mistake of the study lives in the step that makes it, so the helpers
are the plain, correct building blocks (sampling from a weight vector, drafting a chain, the
logits-processing pipeline of a step that takes ``--logits``).
"""

from __future__ import annotations

import numpy as np

from specverify.dists import process_logits, softmax


def sample(w, rng):
    """One id from the weights ``w`` (normalised here)."""
    w = np.asarray(w, dtype=np.float64)
    return int(rng.choice(len(w), p=w / w.sum()))


def sample_or(w, fallback, rng):
    """Sample from ``w``; if it has no mass (an empty residual), from ``fallback`` instead.

    A defensive branch many implementations carry (transformers' and TensorRT-LLM's residuals have
    none and would produce NaN); it never fires for a correct rule on valid rows."""
    w = np.asarray(w, dtype=np.float64)
    if not np.isfinite(w).all() or w.sum() <= 0:
        w = np.asarray(fallback, dtype=np.float64)
    return sample(w, rng)


def draft_chain(prefix, draft, gamma, rng):
    """gamma tokens from the draft, each from its own row: (tokens, rows)."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q)
    return xs, qs


def target_rows(prefix, target, xs):
    """The target's gamma + 1 rows of one verification pass, as a float64 array."""
    return np.asarray(target(list(prefix), xs), dtype=np.float64)


def residual(p, q):
    """The standard replacement law's weights (p - q)+."""
    return np.maximum(np.asarray(p) - np.asarray(q), 0.0)


def counts(ids, v):
    return np.bincount(np.asarray(ids, dtype=np.int64), minlength=v).astype(np.float64)[:v]


def probs(logits, settings, history, *, seen=None, generated=None):
    """The request's processed law for one row of raw logits, given the history before it.

    The repetition penalty counts every token of ``history`` (prompt included); presence and
    frequency penalties count the generated ones (``history[settings.prompt_len:]``).
    ``seen`` / ``generated`` override those histories (for the steps whose bug is there)."""
    logits = np.asarray(logits, dtype=np.float64)
    v = len(logits)
    seen = history if seen is None else seen
    generated = list(history)[settings.prompt_len :] if generated is None else generated
    x = process_logits(logits, settings, seen_counts=counts(seen, v), output_counts=counts(generated, v))
    return softmax(x)


def standard_verify(xs, qs, ps, rng):
    """The standard chain rule on given drafts, draft rows and target rows."""
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample(residual(ps[i], qs[i]), rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out
