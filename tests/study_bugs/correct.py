"""Correct round steps written in unusual ways (each exactly lossless): the study's decoys."""

from __future__ import annotations

import numpy as np

from ._util import draft_chain, residual, sample, target_rows


def residual_by_rejection(prefix, draft, target, gamma, rng):
    """Draws the replacement by rejection sampling: y ~ p, kept with probability (p(y) - q(y))+ / p(y).

    Exact: the kept y has law proportional to p(y) * (p - q)+(y) / p(y) = (p - q)+(y). A rejection
    only happens when (p - q)+ has mass, so the loop ends (with probability 1).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        p, q = ps[i], qs[i]
        if rng.random() * q[x] < p[x]:
            out.append(x)
            continue
        while True:
            y = sample(p, rng)
            if rng.random() * p[y] < p[y] - q[y]:
                out.append(y)
                return out
    out.append(sample(ps[gamma], rng))
    return out


def _icdf(w, u):
    c = np.cumsum(w)
    return int(min(np.searchsorted(c, u * c[-1], side="right"), len(w) - 1))


def inverse_cdf_everywhere(prefix, draft, target, gamma, rng):
    """Every draw by inverse CDF on unnormalised cumulative sums, one fresh uniform per use.

    Drafts, coins, the replacement and the bonus each take their own uniform; the walk scales u by
    the total instead of normalising the weights. Exact.
    """
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        xs.append(_icdf(q, rng.random()))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(_icdf(residual(ps[i], qs[i]), rng.random()))
        return out
    out.append(_icdf(ps[gamma], rng.random()))
    return out


def gumbel_and_exponential_race(prefix, draft, target, gamma, rng):
    """Drafts and the bonus by Gumbel-max on log-probabilities, the replacement by an exponential
    race argmax((p - q)+ / E), E ~ Exp(1) (vLLM's recovered-token form; no normalisation needed).

    Exact: Gumbel-max and the exponential race both sample their weights' normalised law.
    """
    prefix = list(prefix)

    def gumbel(w):
        with np.errstate(divide="ignore"):
            return int(np.argmax(np.log(w) + rng.gumbel(size=len(w))))

    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        xs.append(gumbel(q))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        e = rng.exponential(size=len(ps[i]))
        out.append(int(np.argmax(residual(ps[i], qs[i]) / e)))
        return out
    out.append(gumbel(ps[gamma]))
    return out


def cumprod_verification(prefix, draft, target, gamma, rng):
    """All coins drawn up front; the accepted prefix is the cumulative product of the accept mask.

    n = cumprod(u < min(1, p/q)).sum() is the index of the first rejection. Exact: the coins
    after the first rejection are drawn but never read.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    idx = np.arange(gamma)
    px = ps[idx, xs]
    qx = np.array([qs[i][x] for i, x in enumerate(xs)])
    acc = rng.random(gamma) < np.minimum(1.0, px / qx)
    n = int(np.cumprod(acc).sum())
    out = list(xs[:n])
    if n < gamma:
        out.append(sample(residual(ps[n], qs[n]), rng))
    else:
        out.append(sample(ps[gamma], rng))
    return out


def one_hot_rule(prefix, draft, target, gamma, rng):
    """Ignores q: accepts x with probability p(x), otherwise samples p with x removed.

    Exact for any proposal (engines notes, [derived]; vllm-project/vllm#40149: the one-hot rule is
    lossless), at a lower acceptance than min(1, p/q). P(y) = q(y) p(y) + sum_{x != y} q(x) p(y) = p(y).
    """
    xs, _qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < ps[i][x]:
            out.append(x)
            continue
        w = np.array(ps[i])
        w[x] = 0.0
        out.append(sample(w, rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def sample_and_match(prefix, draft, target, gamma, rng):
    """Samples the target at every position and keeps drafts while they match (MLX-LM, llama.cpp).

    At the first mismatch the target's own sample is emitted; if all match, a bonus from the last
    row. Exact: each emitted token is the target's sample at its position.
    """
    xs, _qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        t = sample(ps[i], rng)
        out.append(t)
        if t != x:
            return out
    out.append(sample(ps[gamma], rng))
    return out


class _Sequential:
    def __init__(self):
        self.expect = None

    def new_sequence(self, prefix):
        return self.expect is None or list(prefix) != self.expect

    def done(self, prefix, out):
        self.expect = list(prefix) + list(out)
        return out


class RecycledDraftsWithTheirRows(_Sequential):
    """Reuses the drafts left after a rejection as the next round's first proposals, WITH the rows
    they were drawn from.

    Exact: conditional on the (hidden) rejected draft, each recycled token's law is exactly the row
    kept with it, and it is independent of the verifier's coins, so the ratio test with that row
    samples the target's law; the target rows come from the true prefix. Only acceptance suffers.
    The lossless twin of ``state:recycled_drafts_rescored``.
    """

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.new_sequence(prefix):
            self.left_x, self.left_q = [], []
        xs, qs = list(self.left_x[:gamma]), list(self.left_q[:gamma])
        while len(xs) < gamma:
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        self.left_x, self.left_q = [], []
        out = []
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample(residual(ps[i], qs[i]), rng))
            self.left_x, self.left_q = xs[i + 1 :], qs[i + 1 :]
            return self.done(prefix, out)
        out.append(sample(ps[gamma], rng))
        return self.done(prefix, out)


recycled_drafts_with_their_rows = RecycledDraftsWithTheirRows()


class DraftCacheNotRolledBack(_Sequential):
    """The DRAFT's cache keeps rejected drafts (never trimmed); the target's is exact.

    The draft then proposes from a polluted context, but each token is verified against the row it
    was drawn from, so the output law is the target's: a draft only changes speed. The lossless
    twin of ``state:target_cache_not_rolled_back`` (mlx-lm#846 on the draft side).
    """

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.new_sequence(prefix):
            self.cache, pending = prefix[:-1], prefix[-1:]
        else:
            pending = self.pending
        ctx = self.cache + pending
        xs, qs = [], []
        for _ in range(gamma):
            q = np.asarray(draft(ctx + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        out = []
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample(residual(ps[i], qs[i]), rng))
            break
        else:
            out.append(sample(ps[gamma], rng))
        self.cache = ctx + xs  # never trimmed: harmless on the draft side
        self.pending = [out[-1]]
        return self.done(prefix, out)


draft_cache_not_rolled_back = DraftCacheNotRolledBack()
