"""Round steps that read the wrong target row or the wrong draft row for a position."""

from __future__ import annotations

from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _verify(xs, p_of, q_of, bonus, rng, *, q_res_of=None):
    """The chain rule where ``p_of(i)`` / ``q_of(i)`` give the rows position i uses (``q_res_of``
    the draft row of its residual, default ``q_of``)."""
    q_res_of = q_res_of or q_of
    out = []
    for i, x in enumerate(xs):
        p, q = p_of(i), q_of(i)
        if rng.random() < min(1.0, p[x] / q[x]):
            out.append(x)
            continue
        out.append(sample_or(residual(p, q_res_of(i)), p, rng))
        return out
    out.append(sample(bonus, rng))
    return out


def target_row_plus_two(prefix, draft, target, gamma, rng):
    """Draft i is verified (ratio and residual) against target row i + 2, clipped to the last row.

    The target pass was fed [last committed token, previous round's bonus, drafts...] with the
    bonus counted twice when the offset into the logits was computed, so the slice starts two rows
    late. Written for the study after vllm-project/vllm#51812 (logit rows misaligned with the
    spec-token indices), with an offset of two instead of one.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    return _verify(xs, lambda i: ps[min(i + 2, gamma)], lambda i: qs[i], ps[gamma], rng)


def last_position_shifted(prefix, draft, target, gamma, rng):
    """Only the last draft is scored with the wrong row: it uses ``logits[-1]`` (row gamma, which
    already conditions on it) instead of row gamma - 1; the other positions are right.

    The verifier special-cases the last position because "the last logit row is the one the
    sampler normally uses"; huggingface/transformers#30042 (B05: logits slicing off by one at the
    end of the candidate block).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    return _verify(xs, lambda i: ps[gamma] if i == gamma - 1 else ps[i], lambda i: qs[i], ps[gamma], rng)


def residual_q_next_row(prefix, draft, target, gamma, rng):
    """The ratio uses the right draft row, but the replacement at position i is drawn from
    (p_i - q_{i+1})+, the draft row one position later (the last position keeps its own row).

    Written for the study: the ratio and the recovery read draft_probs through separate index
    expressions (vLLM's rejection sampler computes them in separate kernels), and the recovery's
    carries the ``+ 1`` of the target rows' bonus offset, clamped to stay in bounds.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    return _verify(xs, lambda i: ps[i], lambda i: qs[i], ps[gamma], rng, q_res_of=lambda i: qs[min(i + 1, gamma - 1)])


def q_rows_reversed(prefix, draft, target, gamma, rng):
    """The draft rows are pushed on a stack while drafting and popped while verifying, so draft i
    is tested with the row of draft gamma - 1 - i (ratio and residual).

    Written for the study: a list used as a stack (``qs.pop()``) where a queue was meant; with
    gamma = 1 it is harmless, which is why a gamma-1 unit test would not catch it.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    stack = list(qs)
    popped = [stack.pop() for _ in range(gamma)]
    return _verify(xs, lambda i: ps[i], lambda i: popped[i], ps[gamma], rng)
