"""A batched verification kernel: ``specverify audit --kernel kernel:verify --full-rule``.

Shapes: draft_tokens [B, g] int64, draft_probs [B, g, V], target_probs [B, g + 1, V] (read-only),
generator a numpy Generator. Returns [B, g + 1] token ids, -1 after the emitted ones.
"""

import numpy as np


def _sample(w, u):
    c = np.cumsum(w)
    return int(min(np.searchsorted(c, u * c[-1], side="right"), len(w) - 1))


def verify(draft_tokens, draft_probs, target_probs, generator):
    b, g = draft_tokens.shape
    out = np.full((b, g + 1), -1, dtype=np.int64)
    for r in range(b):
        for i in range(g):
            x = draft_tokens[r, i]
            p, q = target_probs[r, i], draft_probs[r, i]
            if generator.random() < min(1.0, p[x] / q[x]):  # accept
                out[r, i] = x
                continue
            out[r, i] = _sample(np.maximum(p - q, 0.0), generator.random())  # replacement from (p - q)+
            break
        else:
            out[r, g] = _sample(target_probs[r, g], generator.random())  # bonus token
    return out
