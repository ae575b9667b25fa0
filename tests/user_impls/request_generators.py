"""Request-level generators on real transformers models, written as users write them.

Each is a factory ``make(target, draft) -> generate(prompt, max_new_tokens, seed, settings)`` for
``specverify.audit.audit_lm_pairs``: a chain speculative loop in plain torch (the target scores
the drafts in one pass; the whole sequence is recomputed each round: no cache to get wrong unless
the case is about one). ``settings.stop_token_ids`` ends a request at its first stop id. Penalties
are declined (NotImplementedError). The buggy ones are each modelled on one public report, cited
in their docstring; the correct ones do something unusual, correctly.
"""

import math

import numpy as np
import torch

from specverify.dists import probs_from_logits

GAMMA = 4


def _rows(model, ids, k, s):
    """The processed laws [k, V] of the last k positions of ``ids`` (one forward pass)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -k:].double().numpy()
    return np.stack([probs_from_logits(x, s) for x in logits])


def _decline_penalties(s):
    if s.uses_history:
        raise NotImplementedError("this loop has no penalties")


def _decline_stops(s):
    _decline_penalties(s)
    if s.stop_token_ids:
        raise NotImplementedError("this loop has no stop tokens")


def _round(target, draft, ctx, s, rng, gamma=GAMMA):
    """One verified round from ``ctx``: (emitted tokens, drafts, their draft rows, target rows)."""
    drafts, qs = [], []
    for _ in range(gamma):
        q = _rows(draft, ctx + drafts, 1, s)[0]
        drafts.append(int(rng.choice(len(q), p=q)))
        qs.append(q)
    ps = _rows(target, ctx + drafts, gamma + 1, s)
    for j, x in enumerate(drafts):
        if rng.random() * qs[j][x] >= ps[j][x]:
            r = np.maximum(ps[j] - qs[j], 0.0)
            return drafts[:j] + [int(rng.choice(len(r), p=r / r.sum()))], drafts, qs, ps
    return drafts + [int(rng.choice(len(ps[-1]), p=ps[-1]))], drafts, qs, ps


def _cut_at_stop(out, s):
    at = next((i for i, t in enumerate(out) if t in s.stop_token_ids), None)
    return out if at is None else out[: at + 1]


# -- correct, unusual -------------------------------------------------------------------------------


def eos_mid_round_correct(target, draft):
    """Correct: scans every token a round commits for a stop (a stop accepted mid-round included)
    and cuts there; the round that crosses max_new_tokens is cut at the cap after the stop check."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            new, *_ = _round(target, draft, list(prompt) + out, s, rng)
            stopped = _cut_at_stop(new, s)
            out += stopped
            if len(stopped) < len(new) or (out and out[-1] in s.stop_token_ids):
                break
        return _cut_at_stop(out, s)[:n]

    return generate


def logprobs_correct(target, draft):
    """Correct: returns each token's logprob under the target's processed law at its true prefix
    (vLLM's processed_logprobs), with the two most likely ids as top_logprobs."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out, lps, tops = np.random.default_rng(seed), [], [], []
        while len(out) < n:
            new, _, _, ps = _round(target, draft, list(prompt) + out, s, rng)
            new = _cut_at_stop(new, s)
            for j, t in enumerate(new):  # the target row of position j is ps[j] (drafts[:j] accepted)
                lps.append(math.log(ps[j][t]))
                top = np.argsort(-ps[j])[:2]
                tops.append({int(i): math.log(ps[j][i]) for i in top if ps[j][i] > 0})
            out += new
            if out[-1] in s.stop_token_ids:
                break
        return {"ids": out[:n], "logprobs": lps[:n], "top_logprobs": tops[:n]}

    return generate


def cache_window_correct(target, draft):
    """Correct: keeps a cache window of the last 256 tokens of the target's context for its own
    bookkeeping, but verifies on the whole context (the window is trimmed on rejection)."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out, window = np.random.default_rng(seed), [], []
        while len(out) < n:
            new, drafts, *_ = _round(target, draft, list(prompt) + out, s, rng)
            window = (window + drafts)[-256:]
            del window[len(window) - (len(drafts) - (len(new) - 1)) :]  # trim the rejected drafts
            window = (window + new[-1:])[-256:]
            out += _cut_at_stop(new, s)
            if out[-1] in s.stop_token_ids:
                break
        return out[:n]

    return generate


def per_request_rng_correct(target, draft):
    """Correct: one torch.Generator per request, seeded from the request's seed (declares seeded)."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        g = torch.Generator().manual_seed(int(seed))
        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=g)))
        out = []
        while len(out) < n:
            new, *_ = _round(target, draft, list(prompt) + out, s, rng)
            out += _cut_at_stop(new, s)
            if out[-1] in s.stop_token_ids:
                break
        return out[:n]

    generate.seeded = True
    return generate


def persistent_schedule_correct(target, draft):
    """Correct, with a state across requests: the number of drafts per round follows transformers'
    "heuristic" schedule (+2 after a round with every draft accepted, -1 after one with a rejection,
    at least 1) and carries over from one request to the next, as transformers' num_assistant_tokens
    does when the assistant's generation config names that schedule (5, 88, 171 over three calls,
    transformers 5.25). Here it decides which random draws make the tokens."""
    gamma = [GAMMA]

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            new, drafts, *_ = _round(target, draft, list(prompt) + out, s, rng, gamma=gamma[0])
            gamma[0] = gamma[0] + 2 if len(new) > len(drafts) else max(1, gamma[0] - 1)
            out += _cut_at_stop(new, s)
            if out[-1] in s.stop_token_ids:
                break
        return out[:n]

    return generate


# -- buggy, each after one report -------------------------------------------------------------------


def eos_checked_on_last_token(target, draft):
    """huggingface/transformers#47912: the round's n_matches + 1 tokens are committed and the stop
    check looks at the last committed token only, so a stop accepted mid-round is emitted and
    generation continues past it."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            new, *_ = _round(target, draft, list(prompt) + out, s, rng)
            out += new
            if out[-1] in s.stop_token_ids:
                break
        return out[:n]

    return generate


def length_before_stop(target, draft):
    """sgl-project/sglang#31599: the max_new_tokens check runs before the stop check; a round that
    crosses the cap finishes by length, cut at the cap, and tokens after an in-budget stop leak."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out = np.random.default_rng(seed), []
        while True:
            new, *_ = _round(target, draft, list(prompt) + out, s, rng)
            out += new
            if len(out) >= n:  # FINISH_LENGTH first
                return out[:n]
            if any(t in s.stop_token_ids for t in new):
                return _cut_at_stop(out, s)

    return generate


def stops_on_a_drafted_stop(target, draft):
    """Candidate cropping at a drafted EOS (huggingface/transformers#31301 crops prompt-lookup
    candidates there) done as a finish: the request ends when the drafter proposes a stop, before
    the target verified it, so requests end early (on a rejected stop draft: not at a stop)."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            new, drafts, *_ = _round(target, draft, list(prompt) + out, s, rng)
            if any(t in s.stop_token_ids for t in drafts):
                at = next(i for i, t in enumerate(drafts) if t in s.stop_token_ids)
                return (out + new[: at + 1])[:n]
            out += _cut_at_stop(new, s)
            if out[-1] in s.stop_token_ids:
                break
        return out[:n]

    return generate


def rotating_cache_keeps_rejected(target, draft):
    """ml-explore/mlx-lm#846: a cache that cannot be trimmed keeps the rejected drafts in the
    target's context. Here the target's cache turns into a rotating (non-trimmable) one once it
    holds 256 tokens, as a max-kv-size cache does: exact for the first ~250 tokens, wrong after."""

    def generate(prompt, n, seed, s):
        _decline_stops(s)
        rng, out, ctx = np.random.default_rng(seed), [], list(prompt)  # ctx: what the target's cache holds
        while len(out) < n:
            new, drafts, *_ = _round(target, draft, ctx, s, rng)
            out += new
            if len(ctx) + len(drafts) <= 256:
                ctx = list(prompt) + out  # trimmable: the rejected drafts are dropped
            else:
                ctx = ctx + drafts + new[-1:] if len(new) <= len(drafts) else ctx + new
        return out[:n]

    return generate


def draft_buffer_of_one_block(target, draft):
    """Written for this suite (no report): the draft rows are kept in a buffer sized for one
    256-token block; past it the kernel reads the target's rows in their place, so every draft is
    accepted (p / q = 1) from offset 256 on. Exact on any output shorter than a block."""

    def generate(prompt, n, seed, s):
        _decline_stops(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            if len(out) < 256:
                out += _round(target, draft, list(prompt) + out, s, rng)[0]
                continue
            drafts = []
            for _ in range(GAMMA):
                q = _rows(draft, list(prompt) + out + drafts, 1, s)[0]
                drafts.append(int(rng.choice(len(q), p=q)))
            p = _rows(target, list(prompt) + out + drafts, 1, s)[0]
            out += drafts + [int(rng.choice(len(p), p=p))]
        return out[:n]

    return generate


def logprobs_all_zero(target, draft):
    """ggml-org/llama.cpp#27972: under speculation the server reports logprob 0.0 (p = 1) for every
    token."""

    def generate(prompt, n, seed, s):
        _decline_stops(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            out += _round(target, draft, list(prompt) + out, s, rng)[0]
        return {"ids": out[:n], "logprobs": [0.0] * min(n, len(out))}

    return generate


def logprobs_of_the_draft(target, draft):
    """vllm-project/vllm#34497 (logprobs broken once speculation serves requests with logprobs):
    the logprob of an accepted draft token is taken from the draft's row, not the target's."""

    def generate(prompt, n, seed, s):
        _decline_stops(s)
        rng, out, lps = np.random.default_rng(seed), [], []
        while len(out) < n:
            new, drafts, qs, ps = _round(target, draft, list(prompt) + out, s, rng)
            k = len(new) - 1  # accepted drafts
            lps += [math.log(qs[j][t]) for j, t in enumerate(new[:k])] + [math.log(ps[k][new[k]])]
            out += new
        return {"ids": out[:n], "logprobs": lps[:n]}

    return generate


def padded_vocab_recovery(target, draft):
    """vllm-project/vllm#44744 (a security advisory): the recovered token is sampled over the
    vocabulary padded to the kernel's tile (64), and the padding holds stale nonzero values, so a
    recovered id can be >= the vocabulary size when it is not a multiple of the tile."""

    def generate(prompt, n, seed, s):
        _decline_stops(s)
        rng, out = np.random.default_rng(seed), []
        while len(out) < n:
            new, drafts, qs, ps = _round(target, draft, list(prompt) + out, s, rng)
            k = len(new) - 1
            if k < len(drafts):  # a rejection: redo the recovery over the padded tile
                v = len(ps[k])
                tile = -(-v // 64) * 64
                r = np.concatenate([np.maximum(ps[k] - qs[k], 0.0), np.full(tile - v, 1e-3)])
                new = new[:k] + [int(rng.choice(tile, p=r / r.sum()))]
                if new[-1] >= v:  # returned as is; the next round's forward pass would fail on it
                    return (out + new)[:n]
            out += new
        return out[:n]

    return generate


def one_stream_for_every_request(target, draft):
    """NVIDIA/TensorRT-LLM#19487: the sampler's RNG is created once with a fixed seed and the
    request's seed is never applied, so requests of one prompt give identical samples."""

    def generate(prompt, n, seed, s):
        _decline_penalties(s)
        rng, out = np.random.default_rng(0), []  # the request's seed is dropped on the way
        while len(out) < n:
            new, *_ = _round(target, draft, list(prompt) + out, s, rng)
            out += _cut_at_stop(new, s)
            if out[-1] in s.stop_token_ids:
                break
        return out[:n]

    return generate


CORRECT = (
    eos_mid_round_correct,
    logprobs_correct,
    cache_window_correct,
    per_request_rng_correct,
    persistent_schedule_correct,
)
BUGGY = (
    eos_checked_on_last_token,
    length_before_stop,
    stops_on_a_drafted_stop,
    rotating_cache_keeps_rejected,
    draft_buffer_of_one_block,
    logprobs_all_zero,
    logprobs_of_the_draft,
    padded_vocab_recovery,
    one_stream_for_every_request,
)
