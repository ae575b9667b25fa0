"""Whole generators: ``generate(prompt, max_new_tokens, seed, model) -> list[int]``.

``model.target_probs(prefix)`` / ``model.draft_probs(prefix)`` give the next-token laws [V] of a
full prefix; ``model.vocab_size`` is V. Randomness comes from ``np.random.default_rng(seed)``.
"""

import numpy as np

from ._choice import choice


def _round(seq, model, gamma, rng):
    """One speculative round on the full sequence ``seq``; returns the emitted tokens."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(model.draft_probs(seq + xs))
        xs.append(choice(rng, len(q), q))
        qs.append(q)
    for j, x in enumerate(xs):
        p = np.asarray(model.target_probs(seq + xs[:j]))
        if rng.random() >= p[x] / qs[j][x]:
            r = np.maximum(p - qs[j], 0)
            r = r / r.sum() if r.sum() > 0 else p
            return xs[:j] + [choice(rng, len(r), r)]
    p = np.asarray(model.target_probs(seq + xs))
    return xs + [choice(rng, len(p), p)]


def generate_correct(prompt, max_new_tokens, seed, model):
    """Correct: speculative sampling with gamma = 4, truncated to max_new_tokens."""
    rng = np.random.default_rng(seed)
    seq = list(prompt)
    while len(seq) < len(prompt) + max_new_tokens:
        seq += _round(seq, model, 4, rng)
    return seq[len(prompt) : len(prompt) + max_new_tokens]


def generate_adaptive_gamma(prompt, max_new_tokens, seed, model):
    """Correct (unusual): gamma changes every round (grows after a full accept, shrinks after a rejection, like
    HF's heuristic).
    """
    rng = np.random.default_rng(seed)
    seq, gamma = list(prompt), 3
    while len(seq) < len(prompt) + max_new_tokens:
        out = _round(seq, model, gamma, rng)
        gamma = min(gamma + 2, 8) if len(out) == gamma + 1 else max(gamma - 1, 1)
        seq += out
    return seq[len(prompt) :][:max_new_tokens]


def generate_realign_bug(prompt, max_new_tokens, seed, model):
    """Bug: from the second round on, the context misses the last emitted token (it is meant to be fed with the
    drafts, and is not).
    """
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < max_new_tokens:
        ctx = list(prompt) + (out[:-1] if out else [])  # last token "still pending" in the KV cache
        out += _round(ctx, model, 4, rng)
    return out[:max_new_tokens]


def generate_unverified_tail(prompt, max_new_tokens, seed, model):
    """Bug: after 8 generated tokens it trusts the draft and appends draft samples without verification."""
    rng = np.random.default_rng(seed)
    seq = list(prompt)
    while len(seq) < len(prompt) + max_new_tokens:
        if len(seq) - len(prompt) >= 8:  # "the draft has warmed up"
            q = np.asarray(model.draft_probs(seq))
            seq.append(choice(rng, len(q), q))
        else:
            seq += _round(seq, model, 4, rng)
    return seq[len(prompt) : len(prompt) + max_new_tokens]


def generate_last_round_unverified(prompt, max_new_tokens, seed, model):
    """Bug: when fewer than gamma + 1 tokens remain, it fills the rest with draft samples instead of verifying them."""
    rng = np.random.default_rng(seed)
    seq, gamma, end = list(prompt), 4, len(prompt) + max_new_tokens
    while len(seq) < end:
        if end - len(seq) < gamma + 1:
            while len(seq) < end:
                q = np.asarray(model.draft_probs(seq))
                seq.append(choice(rng, len(q), q))
        else:
            seq += _round(seq, model, gamma, rng)
    return seq[len(prompt) : end]
