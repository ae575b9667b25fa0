"""A greedy round step: ``specverify audit --round greedy_step:step --greedy``.

With ``--greedy`` the rows are raw probabilities (temperature 1) and the output must be, token for
token, target-only greedy decoding: the argmax of the target row given the true prefix, the lowest
id among exact ties (``numpy.argmax`` picks the first maximum).
"""

import numpy as np


def step(prefix, draft, target, gamma, rng):
    prefix = list(prefix)
    xs = []
    for _ in range(gamma):
        xs.append(int(np.argmax(draft(prefix + xs))))  # greedy drafts
    rows = np.asarray(target(prefix, xs))
    out = []
    for j, x in enumerate(xs):
        t = int(np.argmax(rows[j]))  # the target's own choice at this position
        out.append(t)
        if t != x:  # first disagreement: the target's token replaces the draft, the round ends
            return out
    return out + [int(np.argmax(rows[gamma]))]
