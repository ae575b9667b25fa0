"""The driver of vectorised table samplers (the catalogue's, and kernels wrapped as samplers).

Kernel-level pairs (:class:`~specverify.lm.synthetic.PositionalPair`) give ``n`` independent rounds
whose rows depend on the position in the round only; order-1 Markov pairs give ``n`` sequences,
the sampler carrying its own context from round to round.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings
from ..lm.synthetic import MarkovPair, TablePair
from ._engine import ChainSampler
from ._records import PAD, Generation, concat_generations

__all__ = ["run_sampler"]


def run_sampler(
    sampler: ChainSampler,
    pair: TablePair,
    *,
    n: int,
    gamma: int,
    rng: np.random.Generator,
    settings: SamplingSettings | None = None,
    length: int | None = None,
    chunk_bytes: int = 1 << 27,
) -> Generation:
    """Run a vectorised ``sampler`` (a :class:`specverify.catalogue.ChainSampler`) on ``pair``.

    PositionalPair: ``n`` independent rounds. MarkovPair: ``n`` sequences of ``length`` tokens
    (default 2 gamma + 2), each from the start context. The law row of every emitted token is
    computed from the emitted tokens themselves (previous token, or position in round), never
    from the sampler's internal state, so a state bug cannot hide itself.
    """
    chunk = max(1, chunk_bytes // (8 * pair.vocab_size * (2 * gamma + 2)))
    parts: list[Generation] = []
    for done in range(0, n, chunk):
        b = min(chunk, n - done)
        if isinstance(pair, MarkovPair):
            parts.append(_markov_sequences(sampler, pair, b, gamma, rng, settings, length or 2 * gamma + 2))
        else:
            parts.append(_positional_rounds(sampler, pair, b, gamma, rng, settings))
    return concat_generations(parts)


def _positional_rounds(
    sampler: ChainSampler,
    pair: TablePair,
    b: int,
    gamma: int,
    rng: np.random.Generator,
    settings: SamplingSettings | None,
) -> Generation:
    """``b`` independent rounds; a token's law row is its position in the round."""
    out = sampler.round(pair, np.zeros(b, dtype=np.int64), gamma, rng, settings)
    r, pos = np.nonzero(out.tokens >= 0)
    return Generation(
        tokens=out.tokens[r, pos],
        row=pos,
        position=pos,
        sequence=r,
        num_accepted=out.num_accepted,
        rounds=b,
        drafts=out.drafts,
        drafts_from_implementation=bool(getattr(sampler, "draws_drafts", True)),
    )


def _markov_sequences(
    sampler: ChainSampler,
    pair: MarkovPair,
    b: int,
    gamma: int,
    rng: np.random.Generator,
    settings: SamplingSettings | None,
    length: int,
) -> Generation:
    """``b`` sequences of ``length`` tokens from the start context; law row = the previous token."""
    ctx = np.full(b, pair.start_context, dtype=np.int64)
    buf = np.full((b, length + gamma + 17), PAD, dtype=np.int64)  # room for a round's overshoot
    posb = np.full_like(buf, PAD)
    fill = np.zeros(b, dtype=np.int64)
    accs: list[npt.NDArray[np.int64]] = []
    rounds = 0
    while (fill < length).any():
        active = np.nonzero(fill < length)[0]
        out = sampler.round(pair, ctx[active], gamma, rng, settings)
        rounds += len(active)
        accs.append(out.num_accepted)
        n_emit = (out.tokens >= 0).sum(1)
        for k in range(out.tokens.shape[1]):
            m = k < n_emit
            buf[active[m], fill[active[m]] + k] = out.tokens[m, k]
            posb[active[m], fill[active[m]] + k] = k
        fill[active] += n_emit
        ctx[active] = out.next_context
    buf, posb = buf[:, :length], posb[:, :length]
    prev = np.concatenate([np.full((b, 1), pair.start_context), buf[:, :-1]], axis=1)
    return Generation(
        tokens=buf.ravel(),
        row=prev.ravel(),
        position=posb.ravel(),
        sequence=np.repeat(np.arange(b), length),
        num_accepted=np.concatenate(accs),
        rounds=rounds,
    )
