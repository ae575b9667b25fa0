"""Round steps that take raw logits and the request's settings (``--logits``) and process the
target's rows differently from the draft's, or from the request's law."""

from __future__ import annotations

import dataclasses

import numpy as np
from study_bugs._util import counts, probs, residual, sample, sample_or

from specverify.dists import SamplingSettings, process_logits, softmax


def _chain(prefix, draft, target, gamma, rng, settings, *, p_law=None, history=None):
    """The standard chain rule on processed rows. The draft's law is the request's law
    (``probs``); the target's rows go through ``p_law(logits, settings, history)`` (default the
    same). ``history`` replaces ``prefix`` as the tokens the penalties count."""
    prefix = list(prefix)
    hist = prefix if history is None else list(history)
    p_law = probs if p_law is None else p_law
    xs, qs = [], []
    for _ in range(gamma):
        q = probs(draft(prefix + xs), settings, hist + xs)
        xs.append(sample(q, rng))
        qs.append(q)
    logits = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [p_law(logits[j], settings, hist + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def target_top_p_excludes_crossing_token(prefix, draft, target, gamma, rng, settings):
    """The verifier's own top-p keeps the tokens, by decreasing probability, while the cumulative
    mass including the token stays below top_p: the token that crosses top_p is dropped, though the
    nucleus is the smallest set whose mass reaches top_p (the draft uses the library's top-p). The
    target rows, replacements and bonus included, are truncated one token short.

    sgl-project/sglang#36173 (B23: the speculative verifier's top-k/top-p differed from the normal
    sampler's), here at top-p's boundary.
    """

    def p_law(logits, s, history):
        base = dataclasses.replace(s, top_p=1.0, min_p=0.0)
        x = process_logits(
            logits,
            base,
            seen_counts=counts(history, len(logits)),
            output_counts=counts(list(history)[s.prompt_len :], len(logits)),
        )
        if not s.is_greedy and s.top_p < 1.0:
            pr = softmax(x)
            order = np.argsort(-pr, kind="stable")
            keep_sorted = np.cumsum(pr[order]) < s.top_p  # BUG: drops the token that crosses top_p
            keep_sorted[0] = True
            keep = np.empty_like(keep_sorted)
            keep[order] = keep_sorted
            x = np.where(keep, x, -np.inf)
        if not s.is_greedy and s.min_p > 0.0:
            x = process_logits(x, SamplingSettings(min_p=s.min_p))
        return softmax(x)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)


class PenaltyHistoryLastTokenPerRound:
    """The penalty state of a request is updated once per verification step with the step's last
    token only, so the accepted drafts of a round never enter it: draft and target both penalise
    with a history holding the prompt and one token per round (plus the round's drafts), and the
    repetition, presence and frequency penalties act on too few tokens.

    sgl-project/sglang#33643 (penalties fed only the last token of each verification step: a
    frequency penalty acts as about nominal / mean accepted length).
    """

    def __init__(self):
        self.expect = None
        self.history = None

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        prefix = list(prefix)
        if prefix != self.expect:
            self.history = list(prefix)
        out = _chain(prefix, draft, target, gamma, rng, settings, history=self.history)
        self.history.append(out[-1])  # BUG: the round's accepted drafts are not recorded
        self.expect = prefix + out
        return out


penalty_history_last_token_per_round = PenaltyHistoryLastTokenPerRound()


def target_repetition_penalty_always_divides(prefix, draft, target, gamma, rng, settings):
    """The verifier's repetition penalty divides every seen token's logit by the penalty, so a
    negative logit moves up instead of down (the library multiplies negative logits); the draft
    uses the library's penalty. The rest of the target pipeline is the request's.

    Written for the study: the CTRL-paper penalty as first implemented (divide by theta), a mistake
    transformers' RepetitionPenaltyLogitsProcessor fixed for negative logits; here re-made in a
    hand-written verify path (the class of B24, sgl-project/sglang#21258, a repetition penalty
    mis-applied on the speculative path).
    """

    def p_law(logits, s, history):
        v = len(logits)
        x = np.asarray(logits, dtype=np.float64)
        if (bias := s.bias_vector(v)) is not None:
            x = x + bias
        if s.repetition_penalty != 1.0:
            seen = counts(history, v) > 0
            x = np.where(seen, x / s.repetition_penalty, x)  # BUG: negative logits need * penalty
        rest = dataclasses.replace(s, repetition_penalty=1.0, logit_bias=())
        x = process_logits(x, rest, output_counts=counts(list(history)[s.prompt_len :], v))
        return softmax(x)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)


def target_presence_penalty_per_occurrence(prefix, draft, target, gamma, rng, settings):
    """The verifier's presence penalty is subtracted once per occurrence of a generated token
    (presence * count, the frequency penalty's form) instead of once per token present; the draft
    uses the library's presence penalty.

    Written for the study: the two OpenAI penalties share one counts tensor on the verify path and
    the indicator [count > 0] of the presence term is lost (sgl-project/sglang#40244 is the
    neighbouring report of penalty state mis-applied across a verify block).
    """

    def p_law(logits, s, history):
        v = len(logits)
        fused = dataclasses.replace(
            s, presence_penalty=0.0, frequency_penalty=s.frequency_penalty + s.presence_penalty
        )  # BUG: presence * count, not presence * [count > 0]
        x = process_logits(
            logits, fused, seen_counts=counts(history, v), output_counts=counts(list(history)[s.prompt_len :], v)
        )
        return softmax(x)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)
