"""``choice(rng, n, p)``: the same draw as ``int(rng.choice(n, p=p))``, in less than half the time.

numpy's ``Generator.choice`` validates ``p`` on every call (a Kahan sum, a sign check), which is
most of its cost on a 64-token row; the suite's steps draw millions of tokens. Where ``p`` is
plainly a law, this runs numpy's own inverse CDF on the same uniform (``p.cumsum()``, divided by
its last entry, ``searchsorted(rng.random(), side="right")``), so the token and the generator's
state afterwards are identical; anything else goes to ``rng.choice`` itself, which raises its own
error for an invalid ``p``. Only the tests' implementations use it; a verdict stays bit for bit.
request_generators.py and stop_steppers.py keep rng.choice: tests copy them outside the repository,
where a relative import has no package.
"""

import numpy as np


def choice(rng, n, p):
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or len(p) != n or not p.min() >= 0.0 or not abs(p.sum() - 1.0) <= 1e-9:
        return int(rng.choice(n, p=p))
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return int(cdf.searchsorted(rng.random(), side="right"))
