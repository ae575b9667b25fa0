"""Exact round steps written in unusual ways; several look like bugs (some are twins of buggy
steps of this set)."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows
from study_bugs10._common import (
    RequestTracker,
    chain,
    draft_chain_logits,
    histories,
    icdf,
    probs,
    ratio,
    target_logits,
)

from specverify.dists import process_logits, softmax

from ._common import bias_stage, count_vector, emit, last_id, leading_accepts, repetition_stage, tail_knobs


def residual_as_maximum_minus_draft(prefix, draft, target, gamma, rng):
    """Exact: the replacement is drawn from np.maximum(p, q) - q, which is (p - q)+ written another
    way (the twin of an earlier set's residual np.maximum(p, q))."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def replace(i, p, q):
        return sample_or(np.maximum(p, q) - q, p, rng)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, replace=replace)


def round_cut_after_emitted_stop_id(prefix, draft, target, gamma, rng):
    """Exact: a round's output is cut right after its first EOS (the last id), the EOS kept; the
    cut depends only on tokens already emitted, and the next round draws the next position from
    the same law (the twin of counting:stop_token_stripped_from_round_output, which drops the
    EOS)."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    out = chain(xs, qs, target_rows(prefix, target, xs), rng)
    eos = last_id(qs[0])
    return out[: out.index(eos) + 1] if eos in out else out


class _BonusCarriedAsOneHotDraftIntoNextRound:
    """Exact (stateful, resets per request): a fully accepted round ends with its drafts; its bonus
    b ~ p_gamma is kept and proposed as the next round's first draft with a one-hot draft row, so it
    is accepted with probability p(b) and otherwise replaced from p without b: the token emitted
    there follows p (p(v)^2 + p(v)(1 - p(v)) = p(v)), as a one-hot proposal does."""

    def __init__(self):
        self.track = RequestTracker()
        self.carry = None

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix):
            self.carry = None
        carry, self.carry = self.carry, None
        xs, qs = [], []
        while len(xs) < gamma:
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            if not xs and carry is not None:
                q = np.zeros_like(q)
                q[carry] = 1.0
                xs.append(int(carry))
            else:
                xs.append(sample(q, rng))
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        n, _ = leading_accepts(xs, qs, ps, rng)
        if n == gamma:
            out = list(xs)
            self.carry = sample(ps[gamma], rng)
        else:
            out = emit(xs, qs, ps, n, rng)
        self.track.done(prefix, out)
        return out


bonus_carried_as_one_hot_draft_into_next_round = _BonusCarriedAsOneHotDraftIntoNextRound()


def target_temperature_first_with_penalties_scaled(prefix, draft, target, gamma, rng, settings):
    """Exact: the verifier divides the biased logits by the temperature first, then applies the
    repetition penalty (a positive scaling keeps every sign, so the sign rule commutes with it) and
    subtracts the presence and frequency penalties divided by the temperature, then top-k, top-p
    and min-p at temperature 1: (rep(z + b) - a) / T in another order. Greedy and temperature-last
    settings take the library's pipeline."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    t = settings.temperature
    filters = dataclasses.replace(tail_knobs(settings), temperature=1.0)

    def row(zi, h):
        if settings.is_greedy or settings.temperature_last:
            return probs(zi, settings, h)
        seen, generated = histories(settings, h)
        v = len(zi)
        x = bias_stage(np.asarray(zi, dtype=np.float64), settings) / t
        x = repetition_stage(x, count_vector(seen, v), settings.repetition_penalty)
        c = count_vector(generated, v)
        x = x - (settings.presence_penalty * (c > 0) + settings.frequency_penalty * c) / t
        return softmax(process_logits(x, filters))

    ps = [row(z[i], prefix + xs[:i]) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


def target_min_p_mask_taken_before_top_k_top_p(prefix, draft, target, gamma, rng, settings):
    """Exact: the verifier's min-p mask is computed on the row before top-k and top-p (after
    temperature, or before it with temperature last) and applied after them; min-p compares each
    probability with the largest, a ratio that renormalising over the kept tokens does not change,
    and top-k and top-p always keep the largest token (and the min_tokens_to_keep most likely)."""
    prefix = list(prefix)
    xs, qs = draft_chain_logits(prefix, draft, gamma, rng, settings)
    z = target_logits(prefix, target, xs)
    keep = settings.min_tokens_to_keep
    pre = dataclasses.replace(settings, top_k=0, top_p=1.0, min_p=0.0)
    if settings.temperature_last:
        pre = dataclasses.replace(pre, temperature=1.0)
    filters = dataclasses.replace(tail_knobs(settings), min_p=0.0)
    if not settings.temperature_last:
        filters = dataclasses.replace(filters, temperature=1.0)

    def row(zi, h):
        if settings.is_greedy or settings.min_p <= 0.0:
            return probs(zi, settings, h)
        seen, generated = histories(settings, h)
        v = len(zi)
        x = process_logits(zi, pre, seen_counts=count_vector(seen, v), output_counts=count_vector(generated, v))
        p = softmax(x)
        drop = p < settings.min_p * np.max(p)
        if keep > 1:
            drop[np.argsort(-p, kind="stable")[:keep]] = False
        y = process_logits(x, filters)
        return softmax(np.where(drop, -np.inf, y))

    ps = [row(z[i], prefix + xs[:i]) for i in range(gamma + 1)]
    return chain(xs, qs, ps, rng)


class _CoinOffsetAdvancesPastBonusCoin:
    """Exact (stateful, resets per request): the round's uniforms come from one request stream read
    at an offset (coins at off .. off + gamma - 1, the bonus's inverse-CDF uniform at off + gamma),
    and the offset advances by gamma + 1 every round, so no uniform is read twice (those a round
    does not read are skipped); the twin of state:coin_offset_advances_by_gamma_bonus_coin_reused."""

    def __init__(self):
        self.track = RequestTracker()
        self.stream = None
        self.off = 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.track.is_new(prefix) or self.stream is None:
            self.stream, self.off = rng.random(256), 0
        while len(self.stream) < self.off + gamma + 1:
            self.stream = np.concatenate([self.stream, rng.random(256)])
        u = self.stream[self.off : self.off + gamma + 1]
        xs, qs = draft_chain(prefix, draft, gamma, rng)
        ps = target_rows(prefix, target, xs)
        n = next((i for i, x in enumerate(xs) if not u[i] < ratio(ps[i], qs[i], x)), gamma)
        if n < gamma:
            out = list(xs[:n]) + [sample_or(residual(ps[n], qs[n]), ps[n], rng)]
        else:
            out = list(xs) + [icdf(ps[gamma], u[gamma])]
        self.off += gamma + 1
        self.track.done(prefix, out)
        return out


coin_offset_advances_past_bonus_coin = _CoinOffsetAdvancesPastBonusCoin()
