"""Exact round steps written in unusual ways; several look like bugs and are not."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def last_draft_treated_as_one_hot(prefix, draft, target, gamma, rng):
    """Exact: the drafter's last step keeps no probability row, so the verifier treats the last
    draft as a one-hot proposal: it is accepted with probability p(x) and, if rejected, replaced
    from (p - onehot(x))+ = p with x removed. The one-hot rule is exact for any proposal, so mixing
    it with the full rule position by position is exact too.

    vllm-project/vllm#40149 / #40651 (treating an argmax or otherwise unrecorded draft as one-hot is
    lossless; a false-positive trap).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    onehot = np.zeros_like(qs[-1])
    onehot[xs[-1]] = 1.0
    qs = qs[:-1] + [onehot]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def accept_on_complement_coin(prefix, draft, target, gamma, rng):
    """Exact: a draft is accepted iff u > 1 - min(1, p/q), which has probability min(1, p/q) for a
    uniform u (1 - u is uniform too); written the way a "reject iff u <= 1 - ratio" test reads.

    Written for the study.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() > 1.0 - min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


class LeftoverDraftsProposedNextRound:
    """Exact: a pipelined drafter keeps drafting past the verified block, and after a rejection at
    position n the drafts after it (x_{n+1}, ...) are not thrown away: they open the next round's
    block with the draft rows they were drawn from, though those rows were conditioned on the
    rejected x_n. The next round's target rows are computed on the true prefix, and each leftover
    was drawn from exactly the row the verifier divides by, independently of the verifier's coins,
    so the rule stays exact (the rejected x_n acts as auxiliary randomness).

    Written for the study (looks like a missing flush; pipelined drafting as in PEARL-style
    parallel speculative decoding).
    """

    def __init__(self):
        self.expect = None
        self.left = []
        self.left_q = []

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if prefix != self.expect:
            self.left, self.left_q = [], []
        xs, qs = self.left[:gamma], self.left_q[:gamma]
        while len(xs) < gamma:
            q = np.asarray(draft(prefix + xs), dtype=np.float64)
            xs.append(sample(q, rng))
            qs.append(q)
        ps = target_rows(prefix, target, xs)
        out = []
        self.left, self.left_q = [], []
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
                out.append(x)
                continue
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
            self.left, self.left_q = xs[i + 1 :], qs[i + 1 :]
            break
        else:
            out.append(sample(ps[gamma], rng))
        self.expect = prefix + out
        return out


leftover_drafts_proposed_next_round = LeftoverDraftsProposedNextRound()


def draft_stop_keeps_triggering_token(prefix, draft, target, gamma, rng, threshold=0.4):
    """Exact: the drafter stops at its first draft with q(x) < 0.4, but keeps that draft in the
    block (transformers' assistant_confidence_threshold): the block length depends on draft-side
    randomness only, and every kept draft is verified against the row it was drawn from.

    Engines notes, section 2 (transformers' confidence threshold; the exact counterpart of
    study_bugs4.counting:draft_stop_drops_triggering_token).
    """
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q)
        if q[xs[-1]] < threshold:
            break
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


def bonus_drawn_eagerly(prefix, draft, target, gamma, rng):
    """Exact: the bonus token is drawn from p_gamma right after the verification pass, before any
    acceptance coin, and thrown away unless every draft is accepted; its randomness is independent
    of the coins, so conditioning on a full acceptance leaves it p_gamma-distributed.

    Written for the study (looks like RNG coupling between the bonus and the coins).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    bonus = sample(ps[gamma], rng)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(bonus)
    return out


def draft_feeds_itself_a_second_sample(prefix, draft, target, gamma, rng):
    """Exact: at each step the drafter draws two tokens from its row, continues its own chain with
    the first and reports the second as the draft; the next draft row is conditioned on tokens the
    target never sees. Each reported draft is still drawn from the row the verifier divides by,
    independently of the coins, and the target rows are computed on the reported drafts.

    Written for the study (looks like the draft chain and the verified drafts diverging, as in
    llama.cpp examples/speculative's B32).
    """
    xs, qs, own = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + own), dtype=np.float64)
        own.append(sample(q, rng))
        xs.append(sample(q, rng))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
