"""Round steps that do not stop where the chain must stop."""

from __future__ import annotations

from ._util import draft_chain, residual, sample, sample_or, target_rows


def no_break_after_rejection(prefix, draft, target, gamma, rng):
    """Keeps verifying after a rejection: the replacement is emitted and the loop goes on.

    The ``break`` after the replacement is missing, so later drafts are tested against rows that
    condition on the rejected draft, not on the replacement. antonellof/ferrox#307: removing the
    ``break`` after a mismatch turned only one of two tests red (engines notes, section 5).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    rejected = False
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        rejected = True  # BUG: no break
    if not rejected:
        out.append(sample(ps[gamma], rng))
    return out


def bonus_after_break(prefix, draft, target, gamma, rng):
    """Appends the bonus token after the loop unconditionally (the ``for ... else`` is missing).

    On a rejection the loop breaks with the replacement emitted, and the bonus from row gamma is
    appended anyway: a token whose row conditions on drafts that were not emitted. Written for the
    study: Python's ``for``/``else`` is the article's structure (the bonus only "if all gamma are
    accepted"), and losing the ``else`` is a common refactoring slip; openvino.genai#4190's late
    rejection (B38) is the same class (tokens kept past the rejection).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        break
    out.append(sample(ps[gamma], rng))  # BUG: should run only when no draft was rejected
    return out


def replacement_only_at_first_position(prefix, draft, target, gamma, rng):
    """At a rejection after some accepted drafts, emits only the accepted ones (no replacement).

    The user thought the replacement is only needed "so that a round makes progress": when
    drafts were accepted the round ends at them and the next round drafts again from there. The
    next round's first token is then a fresh draft tested again: the position is resampled until
    something is accepted. Modelled on openvino.genai#4190 (B38: the rejection handled one step
    late, a word dropped).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        if not out:  # BUG: the replacement is dropped when something was accepted
            out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out
