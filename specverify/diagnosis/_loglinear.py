"""Log-linear laws of a part, fitted by maximum likelihood: the weights of a replacement or a bonus
as a product of powers of the rows' own quantities, when no fixed shape explains them.

A named class or a one-parameter member (``_fitted``) states one shape of a part's law. Bugs in the
draw of a replacement or a bonus multiply or mask the rule's weights in ways a list of shapes lags
(the residual weighted once more by p, restricted to the draft's support, sharpened by a noise
race). A member here lets the draw's weights be

    replacement   w_i = exp(theta . phi_i),  phi_i = (log((p_i - q_i)+ + d), log(p_i + d), log(q_i + d),
                                                       [q_i > 0], [p_i > q_i])
    bonus         w_i = exp(theta . phi_i),  phi_i = (log(p_i + d), log(q_i + d), [q_i > 0],
                                                       [i = argmax p], [i = argmax q])

(p, q: the rows of the stopping position, or the bonus position's target row and the draft row
there; d = 1e-9) and fits theta on the part's own events pooled over the units (the first
``FIT_ROUNDS`` usable rounds of each) by maximum likelihood; the conditional-logit log-likelihood
is concave in theta (Newton's method). The rule is theta = (1, 0, 0, 0, 0) for both parts: (p - q)+
and p. Coefficients leave the rule's values one at a time, each time the one that gains most,
while the gain pays BIC's (1/2) log(n) nats (n: the events), and the member pays that price for
each one freed, far more than a one-parameter member's log(grid): it leads a part only where no
fixed shape does, and its mechanism must still explain 99% of the deviation on the cells. Its
words give the freed coefficients only, so they say no more than the evidence shows (on rows that
make two terms nearly collinear, one of them is freed, not both).
"""

from __future__ import annotations

import math

import numpy as np

from ._mechanism import SelfFitted
from ._models import Chunk

__all__ = ["LogLinear", "loglinear_family_models"]

DELTA = 1e-9
#: an indicator's coefficient is kept in [-CAP, CAP]: one never contradicted by the events (every
#: replacement where q > 0) would otherwise run to infinity; e^15 is a mask for any row here
CAP = 15.0
#: a power is kept in [0, MAX_POWER]: a bug multiplies, masks or sharpens the weights; a negative
#: power (weights inverse to p or to the residual) fits the coarse cells of unrelated bugs (a
#: residual rolled by one id) without describing any draw code would make
MAX_POWER = 4.0
_RIDGE = 1e-6  # keeps the Newton step defined when a feature is constant over the events
#: an indicator's coefficient from which its words read as a mask (e^10: 22,000 times any other token)
MASK = 10.0


def _features(part: str, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[n, V, 5] the features of every token of the rows p, q [n, V] (module docstring)."""
    if part == "replacement":
        r = np.maximum(p - q, 0.0)
        cols = (np.log(r + DELTA), np.log(p + DELTA), np.log(q + DELTA), q > 0, p > q)
    else:
        top_p = np.arange(p.shape[1])[None, :] == p.argmax(-1)[:, None]
        top_q = np.arange(q.shape[1])[None, :] == q.argmax(-1)[:, None]
        cols = (np.log(p + DELTA), np.log(q + DELTA), q > 0, top_p, top_q)
    return np.stack([np.asarray(c, dtype=np.float64) for c in cols], axis=-1)


def _law(phi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """[n, V] softmax over tokens of phi . theta."""
    z = phi @ theta
    z = z - z.max(-1, keepdims=True)
    w = np.exp(z)
    out: np.ndarray = w / w.sum(-1, keepdims=True)
    return out


def fit_conditional_logit(
    phi: np.ndarray | list[np.ndarray],
    y: np.ndarray | list[np.ndarray],
    theta0: np.ndarray,
    free: np.ndarray | None = None,
    *,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
    steps: int = 50,
) -> tuple[np.ndarray, np.ndarray, float]:
    """(theta, standard errors, log-likelihood) maximising sum log softmax(phi_e theta)[y_e] over the
    events e (phi [n, V, k], y [n]; or lists of such blocks, one per vocabulary size: units of one
    audit may differ in it) in the coordinates ``free`` (default: all; the others stay at
    ``theta0``), by damped Newton steps within ``bounds`` (default: [-CAP, CAP]); a coordinate that
    reaches a bound stays there (an indicator the events never contradict). Standard errors of
    fixed coordinates are inf."""
    blocks = list(zip(phi, y, strict=True)) if isinstance(phi, list) else [(phi, np.asarray(y))]
    free = np.ones(len(theta0), dtype=bool) if free is None else free.copy()
    lo, hi = bounds if bounds is not None else (np.full(len(theta0), -CAP), np.full(len(theta0), CAP))

    def ll_grad_hess(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        k = len(theta)
        ll, grad, hess = 0.0, np.zeros(k), _RIDGE * np.eye(k)
        for ph, yy in blocks:
            idx = np.arange(len(yy))
            pi = _law(ph, theta)  # [n, V]
            weighted = ph * pi[..., None]  # [n, V, k]
            mean = weighted.sum(1)  # [n, k] E[phi] per event
            ll += float(np.log(np.maximum(pi[idx, yy], 1e-300)).sum())
            grad += (ph[idx, yy] - mean).sum(0)
            hess += weighted.reshape(-1, k).T @ ph.reshape(-1, k) - mean.T @ mean  # one BLAS product
        return ll, grad, hess

    theta = theta0.astype(np.float64).copy()
    ll, grad, hess = ll_grad_hess(theta)
    for _ in range(steps):
        f = np.nonzero(free)[0]
        if not len(f):
            break
        step = np.zeros_like(theta)
        step[f] = np.linalg.solve(hess[np.ix_(f, f)], grad[f])
        t, moved = 1.0, False
        while t > 1e-4:  # halve the step until the likelihood rises
            cand = np.clip(theta + t * step, lo, hi)
            ll_c, grad_c, hess_c = ll_grad_hess(cand)
            if ll_c > ll:
                moved = True
                break
            t /= 2
        if not moved:
            break
        gain = ll_c - ll
        theta, ll, grad, hess = cand, ll_c, grad_c, hess_c
        free &= (theta > lo) & (theta < hi)
        if gain < 1e-7:
            break
    se = np.full(len(theta), np.inf)
    f = np.nonzero(free)[0]
    if len(f):
        se[f] = np.sqrt(np.maximum(np.diag(np.linalg.inv(hess[np.ix_(f, f)])), 0.0))
    return theta, se, ll


def forward_select(
    phi: list[np.ndarray], y: list[np.ndarray], rule: np.ndarray, powers: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """(theta, which coefficients left the rule, log-likelihood) on the event blocks ``phi``, ``y``
    (``fit_conditional_logit``): coefficients freed one at a time,
    each time the one whose fit gains most, while the gain pays BIC's (1/2) log(n) nats; the others
    stay at the rule's values. The law then says no more than the evidence shows (rows that make two
    terms nearly collinear free one of them, not both). The first ``powers`` coefficients are
    powers, kept in [0, MAX_POWER]; the others indicators, in [-CAP, CAP]."""
    n, k = sum(len(b) for b in y), len(rule)
    bounds = (
        np.r_[np.zeros(powers), np.full(k - powers, -CAP)],
        np.r_[np.full(powers, MAX_POWER), np.full(k - powers, CAP)],
    )
    free = np.zeros(k, dtype=bool)
    theta, _, ll = fit_conditional_logit(phi, y, rule, free, bounds=bounds)
    while not free.all():
        tries = []
        for j in np.nonzero(~free)[0].tolist():
            trial = free.copy()
            trial[j] = True
            th, _, ll_j = fit_conditional_logit(phi, y, theta, trial, bounds=bounds)
            tries.append((ll_j, j, th))
        ll_best, best, th = max(tries, key=lambda t: t[0])
        if ll_best - ll <= 0.5 * math.log(max(n, 2)):
            break
        free[best], theta, ll = True, th, ll_best
    return theta, free, ll


#: how each coefficient reads in the law's formula, and the rule's value of it
_TERMS = {
    "replacement": ("(p - q)+^{:.2g}", "p^{:.2g}", "q^{:.2g}", "e^{:.2g} where q > 0", "e^{:.2g} where p > q"),
    "bonus": ("p^{:.2g}", "q^{:.2g}", "e^{:.2g} where q > 0", "e^{:.2g} at argmax p", "e^{:.2g} at argmax q"),
}
_RULE = {"replacement": "(p - q)+", "bonus": "p"}


#: what an indicator past ``MASK`` does, in words
_MASKS = {
    "where q > 0": ("only tokens with q > 0", "no token with q > 0"),
    "where p > q": ("only tokens with p > q", "no token with p > q"),
    "at argmax p": ("argmax p wherever it has weight", "never argmax p"),
    "at argmax q": ("argmax q wherever it has weight", "never argmax q"),
}


def law_in_words(part: str, theta: np.ndarray, moved: np.ndarray) -> str:
    """The fitted weights as a formula: the rule's base term (with its power where it moved), times
    each other term that moved (the others are left out: the evidence does not show them); an
    indicator past ``MASK`` says what it does in effect ("in effect: only tokens with q > 0")."""
    base = _TERMS[part][0].format(theta[0]) if moved[0] else _RULE[part]
    rest = []
    for term, v, m in zip(_TERMS[part][1:], theta[1:], moved[1:]):
        if m and "e^" in term and abs(v) >= MASK:
            rest.append(f"{term.format(v)} (in effect: {_MASKS[term.split(' ', 1)[1]][int(v < 0)]})")
        elif m:
            rest.append(term.format(v))
    return " x ".join([base, *rest])


class LogLinear(SelfFitted):
    """A replacement or bonus law whose weights are exp(theta . phi) (module docstring), theta fitted."""

    K = 5

    def __init__(self, part: str) -> None:
        self.part = part
        self.rule = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
        self.theta, self.moved = self.rule.copy(), np.zeros(self.K, dtype=bool)
        self.events = 0
        self._phi: list[np.ndarray] = []
        self._y: list[np.ndarray] = []
        self.check = {
            "replacement": "the replacement draw: its weights are (p - q)+ of the rejected position's rows, nothing "
            "multiplied in, masked or raised to a power",
            "bonus": "the bonus draw: p of the last position's row as it is, no fast path, mask or draft row mixed in",
        }[part]
        self._set_words()

    def collect(self, c: Chunk, y: np.ndarray) -> None:
        """Keep a chunk's events of this part for the fit (``_score.fit_on_grid``)."""
        g = c.X.shape[1]
        rows = np.nonzero(c.k < g if self.part == "replacement" else c.k == g)[0]
        if not len(rows):
            return
        if self.part == "replacement":
            j = c.k[rows]
            p, q = c.P[rows, j], c.Qr[rows, j]
        else:
            p, q = c.Pb[rows], c.Qb[rows]
        self._phi.append(_features(self.part, p, q))
        self._y.append(y[rows])

    def solve(self) -> None:
        """Fit theta on the collected events (the rule's theta when there are none)."""
        self.moved = np.zeros(self.K, dtype=bool)
        if self._phi:
            vocabs = sorted({b.shape[1] for b in self._phi})  # units may differ in vocabulary: a block each
            phi = [np.concatenate([b for b in self._phi if b.shape[1] == v]) for v in vocabs]
            y = [np.concatenate([t for b, t in zip(self._phi, self._y) if b.shape[1] == v]) for v in vocabs]
            self.theta, freed, _ = forward_select(phi, y, self.rule, 3 if self.part == "replacement" else 2)
            self.moved = freed & (self.theta != self.rule)  # a power freed and then held at its bound 0 did not move
            self.events = sum(len(t) for t in y)
        self._phi, self._y = [], []
        self._set_words()

    def _set_words(self) -> None:
        self.name = f"{self.part}_loglinear({', '.join(f'{v:.2g}' for v in self.theta)})"
        self.words = (
            f"the {self.part} is drawn from weights {law_in_words(self.part, self.theta, self.moved)} (a log-linear "
            f"law fitted by maximum likelihood on {self.events:,} events; the rule: {_RULE[self.part]})"
        )

    @property
    def price(self) -> float:
        """(m/2) log(n) nats for the m coefficients freed from the rule (BIC's price)."""
        return 0.5 * max(int(self.moved.sum()), 1) * math.log(max(self.events, 2))

    def _law_of(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        return _law(_features(self.part, p, q), self.theta)


class _LogLinearReplacement(LogLinear):
    def replaced(self, c: Chunk, j: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._law_of(c.P[rows, j], c.Qr[rows, j])


class _LogLinearBonus(LogLinear):
    def bonus(self, c: Chunk, rows: np.ndarray) -> np.ndarray:
        return self._law_of(c.Pb[rows], c.Qb[rows])


def loglinear_family_models() -> list[LogLinear]:
    """Fresh members, before their fit."""
    return [_LogLinearReplacement("replacement"), _LogLinearBonus("bonus")]
