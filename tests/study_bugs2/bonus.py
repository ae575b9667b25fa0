"""Round steps whose bonus token (every draft accepted) is drawn from the wrong law."""

from __future__ import annotations

from study_bugs._util import draft_chain, residual, sample_or, target_rows


def _with_bonus(prefix, draft, target, gamma, rng, bonus):
    """The standard round with ``bonus(ps, qs)`` as the weights of the bonus token."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample_or(bonus(ps, qs), ps[gamma], rng))
    return out


def bonus_from_residual_of_last_position(prefix, draft, target, gamma, rng):
    """The bonus is drawn like a replacement at one past the last position: from
    (p_gamma - q_{gamma-1})+, reusing the last draft row since there is no draft row gamma.

    Written for the study: bonus and recovery share one code path (vLLM's rejection sampler
    writes both into the same output slot) and the bonus position is not exempted from the
    residual; q is read at the clamped index.
    """
    return _with_bonus(prefix, draft, target, gamma, rng, lambda ps, qs: residual(ps[len(qs)], qs[-1]))


def bonus_from_first_row(prefix, draft, target, gamma, rng):
    """The bonus is sampled from target row 0 (the row that scored the first draft) instead of
    row gamma.

    Modelled on vllm-project/vllm#13933's bonus path (the bonus is sampled from
    ``logits[recover_logits_idx]``, a per-request offset); here the offset is the request's start,
    not its end. The class of huggingface/transformers#30042 (B05, logits slicing).
    """
    return _with_bonus(prefix, draft, target, gamma, rng, lambda ps, qs: ps[0])
