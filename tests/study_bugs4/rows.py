"""Round steps whose target rows or draft rows are not the ones the drafted tokens need."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, residual, sample, sample_or, target_rows


def _verify(xs, ps, qs, rng, *, q_ratio=None):
    """The standard chain rule on the given rows; ``q_ratio(i, x)`` overrides q_i(x) in the ratio."""
    out = []
    for i, x in enumerate(xs):
        qx = qs[i][x] if q_ratio is None else q_ratio(i, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ps[i][x] / qx
        if rng.random() < min(1.0, ratio):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[len(xs)], rng))
    return out


def verify_chunks_lose_earlier_chunk(prefix, draft, target, gamma, rng, chunk=2):
    """The verification pass is split into chunks of two drafts, and every chunk is scored on the
    committed prefix alone: target row j for j >= 2 is p(. | prefix + xs[2:j]) instead of
    p(. | prefix + xs[:j]), the bonus row included; rows 0 and 1 are right.

    Written for the study, modelled on vllm-project/vllm#53488 (MTP + chunked prefill corrupted the
    verify-side outputs) and huggingface/text-generation-inference#2711 (B39: speculation assumed
    contiguous KV slots): the second chunk's attention does not see the first chunk's KV.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    rows = []
    for start in range(0, gamma, chunk):
        part = xs[start : start + chunk]
        r = np.asarray(target(list(prefix), part), dtype=np.float64)  # BUG: context lacks xs[:start]
        rows.extend(r[: len(part)])
        if start + chunk >= gamma:
            rows.append(r[len(part)])
    return _verify(xs, np.asarray(rows), qs, rng)


def target_retokenisation_merges_repeats(prefix, draft, target, gamma, rng):
    """Before the verification pass the drafts are re-encoded for the target, which merges a run of
    equal adjacent drafts into one token; the pass returns fewer rows than drafts, the step pads
    with the last row and keeps indexing rows by draft position. After the first repeated draft,
    draft i is verified against p(. | prefix + merged drafts before it), a row one or more positions
    short, and the bonus row too.

    huggingface/transformers#46124 (universal assisted generation re-tokenises the draft text for
    the target, and the target's tokens need not align one-to-one with the draft's), reduced to a
    merge of repeated ids.
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    merged = [x for j, x in enumerate(xs) if j == 0 or x != xs[j - 1]]
    rows = list(np.asarray(target(list(prefix), merged), dtype=np.float64))
    while len(rows) < gamma + 1:  # BUG: rows no longer align with draft positions after a merge
        rows.append(rows[-1])
    return _verify(xs, np.asarray(rows), qs, rng)


def q_gather_with_unpadded_stride(prefix, draft, target, gamma, rng):
    """The draft rows are stored in a flat buffer with a stride of V + 1 (one padding column kept
    for the placeholder id -1), but q_i(x) for the ratio is gathered at flat index i * V + x: for
    i >= 1 the ratio reads q_i(x - i) when x >= i, the padding 0 when x = i - 1 (accepted outright),
    and q_{i-1}(V + 1 + x - i) when x < i - 1, while the residual uses the right row.

    Written for the study from flashinfer-ai/flashinfer#879 / #3551 (B19: placeholder draft ids and
    the probability layout mis-indexed) and vLLM's padded-vocab advisory (GHSA-8wr5-jm2h-8r4f).
    """
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    v = len(qs[0])
    stride = v + 1
    flat = np.zeros(gamma * stride)
    for i, q in enumerate(qs):
        flat[i * stride : i * stride + v] = q
    return _verify(xs, ps, qs, rng, q_ratio=lambda i, x: flat[i * v + x])  # BUG: stride v, not v + 1


def ngram_hit_overrides_draft_sample(prefix, draft, target, gamma, rng):
    """A hybrid drafter: when the last token of the context occurred earlier in it, the token that
    followed its latest earlier occurrence is proposed (a prompt-lookup hit, deterministic), and
    otherwise the draft model samples; the verifier always divides by the draft model's q_i, though
    a hit's proposal is a point mass, not q_i.

    Written for the study from prompt-lookup drafting (transformers' PromptLookupCandidateGenerator;
    the seed article's "prompt lookup") bolted onto a draft-model path whose draft probabilities
    stay the model's; statistics notes 7b: deterministic candidates with the ratio p / q_draft are
    not exact.
    """
    xs, qs = [], []
    for _ in range(gamma):
        ctx = list(prefix) + xs
        q = np.asarray(draft(ctx), dtype=np.float64)
        hits = [j for j in range(len(ctx) - 1) if ctx[j] == ctx[-1]]
        x = ctx[hits[-1] + 1] if hits else sample(q, rng)  # BUG: a hit is a point mass, not q
        xs.append(int(x))
        qs.append(q)
    ps = target_rows(prefix, target, xs)
    return _verify(xs, ps, qs, rng)
