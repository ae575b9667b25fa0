"""Exact round steps written in unusual ways, several of which look like bugs."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def accept_p_over_max_p_q(prefix, draft, target, gamma, rng):
    """Exact: the draft is accepted with p(x) / max(p(x), q(x)) (equal to min(1, p(x) / q(x))
    when q(x) > 0, which a drafted x has) and the replacement is drawn from p - min(p, q)
    (equal to (p - q)+). Looks like a normaliser by the wrong maximum.

    Written for the study.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p, q = ps[i], qs[i]
        if rng.random() < p[x] / max(p[x], q[x]):
            out.append(x)
            continue
        out.append(sample_or(p - np.minimum(p, q), p, rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def bonus_skipped_when_last_ratio_below_one(prefix, draft, target, gamma, rng):
    """Exact: after a full acceptance the bonus is emitted only if the last draft's ratio
    p_{gamma-1}(x) / q_{gamma-1}(x) was at least 1; otherwise the round ends after the drafts. The
    decision depends only on tokens already emitted, and the next round draws that position
    from the target's law anyway. Looks like a target-dependent early stop.

    Written for the study (a "confidence-gated" bonus).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    last = gamma - 1
    if ps[last][xs[last]] >= qs[last][xs[last]]:
        out.append(sample(ps[gamma], rng))
    return out


class SpeculationPausedByAcceptanceEMA:
    """Exact: an exponential moving average of the per-round acceptance fraction switches
    speculation off (plain decoding: one token from p(. | prefix)) for the next 3 calls when it
    drops below 0.4, then back on. Every decision depends on the past only. The state is reset at
    each new request. Looks like a mode switch that changes the law.

    Written for the study from TensorRT-LLM's acceptance_rate_threshold auto-disable (engines
    notes, Table A).
    """

    def __init__(self, threshold=0.4, pause=3, decay=0.7):
        self.threshold, self.pause, self.decay = threshold, pause, decay
        self.expect = None
        self.ema, self.paused = 1.0, 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:  # a new request
            self.ema, self.paused = 1.0, 0
        if self.paused:
            self.paused -= 1
            out = [sample(target_rows(prefix, target, [])[0], rng)]
            self.expect = prefix + out
            return out
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        out, n = [], gamma
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            n = i
            break
        else:
            out.append(sample(ps[gamma], rng))
        self.ema = self.decay * self.ema + (1 - self.decay) * n / gamma
        if self.ema < self.threshold:
            self.paused, self.ema = self.pause, 1.0
        self.expect = prefix + out
        return out


speculation_paused_by_acceptance_ema = SpeculationPausedByAcceptanceEMA()


class UnusedCoinsCarriedOver:
    """Exact: acceptance coins come from a buffer refilled gamma at a time; a round consumes the
    coins it compares (the one that rejects included) and leaves the rest for the next round,
    where they are used first. A coin never compared is independent of everything so far. The
    buffer is emptied at each new request. Looks like stale random numbers carried across rounds.

    Written for the study (next to vllm-project/vllm-ascend#13608, B17, where the offset advanced
    wrongly).
    """

    def __init__(self):
        self.expect = None
        self.coins = []

    def _coin(self, rng, gamma):
        if not self.coins:
            self.coins = list(rng.random(gamma))
        return self.coins.pop(0)

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:  # a new request
            self.coins = []
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        out = []
        for i, x in enumerate(xs):
            if self._coin(rng, gamma) < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            break
        else:
            out.append(sample(ps[gamma], rng))
        self.expect = prefix + out
        return out


unused_coins_carried_over = UnusedCoinsCarriedOver()


def coins_and_race_noise_from_one_uniform_table(prefix, draft, target, gamma, rng):
    """Exact: one [gamma, V] table of uniforms serves every position: the coin of draft i is
    U[i, x_i] and the replacement at a rejection is argmax_v w(v) / E_v with w = (p_i - q_i)+ and
    E = -log U[i]. The coin is read at the one id whose residual weight is 0 whenever a rejection
    is possible (p_i(x_i) < q_i(x_i)), so the race never uses it; the bonus has its own draw.
    Looks like the coin and the recovery noise are coupled.

    Written for the study (next to vllm-project/vllm#47386 / #54282, B08, where shared noise was
    a real bug).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    u = rng.random((gamma, ps.shape[1]))
    out = []
    for i, x in enumerate(xs):
        if u[i, x] < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        w = residual(ps[i], qs[i])
        if w.sum() <= 0:
            out.append(sample(ps[i], rng))
        else:
            with np.errstate(divide="ignore"):
                out.append(int(np.argmax(w / -np.log(u[i]))))
        return out
    out.append(sample(ps[gamma], rng))
    return out
