"""Round steps that take raw logits and the request's settings (``--logits``) and process the
draft and the target differently, or the target wrongly."""

from __future__ import annotations

import dataclasses

import numpy as np

from specverify.dists import process_logits, softmax

from ._util import counts, probs, residual, sample, sample_or


def _chain(prefix, draft, target, gamma, rng, settings, *, q_law=None, p_law=None):
    """The standard round on logits; ``q_law(logits, history)`` is the q the ratio uses (default:
    the law the draft token was drawn from) and ``p_law(logits, history)`` the target's law."""
    prefix = list(prefix)
    p_law = p_law or (lambda z, h: probs(z, settings, h))
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        z = np.asarray(draft(h), dtype=np.float64)
        q_sampled = probs(z, settings, h)
        xs.append(sample(q_sampled, rng))
        qs.append(q_sampled if q_law is None else q_law(z, h))
    zs = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [p_law(zs[j], prefix + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ps[i][x] / qs[i][x]
        if rng.random() < min(1.0, ratio):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def q_from_raw_logits(prefix, draft, target, gamma, rng, settings):
    """Draws drafts from the processed draft law but uses softmax(raw draft logits) as q.

    The drafter samples with the request's settings (temperature, filters, penalties), while the
    verifier recomputes q from the logits it cached, before any processing. transformers#32867 /
    PR #33534 (the assistant sampled one way while q stayed its plain softmax) and
    transformers#47932 (candidate generators return raw logits as q but sample from processed ones).
    """
    return _chain(prefix, draft, target, gamma, rng, settings, q_law=lambda z, h: softmax(z))


def target_top_p_before_temperature(prefix, draft, target, gamma, rng, settings):
    """The verifier's target processing runs the filters (top-k, top-p, min-p) before temperature.

    The draft uses the request's pipeline (temperature, then filters); the target-side kernel was
    ported from llama.cpp's sampler chain, where temperature comes last. The two agree unless
    temperature != 1 meets top-p or min-p. Modelled on the order-of-knobs parity notes (engines
    notes, section 4 and implication 6: "applied in a different order than in the normal sampler")
    and docs/findings/llama-cpp-python-conventions.md (temperature last).
    """
    s_last = dataclasses.replace(settings, temperature_last=True)
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, s_last, h))


def target_skips_bias_and_min_p(prefix, draft, target, gamma, rng, settings):
    """The target rows of the verification pass ignore the logit bias and min-p.

    The draft applies every knob; the verification pass goes through a fused kernel that only
    knows temperature, top-k, top-p and the penalties. sgl-project/sglang#10617: logit_bias and
    min_p not applied with EAGLE (and vLLM B11: argmax-invariant processors skipped on the
    speculative path).
    """
    s_t = dataclasses.replace(settings, logit_bias=(), min_p=0.0)
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, s_t, h))


def bias_after_temperature(prefix, draft, target, gamma, rng, settings):
    """Adds the logit bias after temperature (and penalties) on both sides, not to the raw logits.

    The bias was bolted on as the last logits processor, after the temperature warper; it is the
    same on draft and target, so only the law is wrong, and only when temperature != 1 meets a
    bias. vLLM adds the bias to the raw logits first (docs/adapters.md, the parity grid's combined
    cell; sglang#10617 for a bias missing from a spec path).
    """
    plain = dataclasses.replace(settings, logit_bias=())

    def law(z, h):
        v = len(z)
        pen = process_logits(
            z,
            dataclasses.replace(plain, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
            seen_counts=counts(h, v),
            output_counts=counts(h[settings.prompt_len :], v),
        )
        bias = settings.bias_vector(v)
        if settings.temperature == 0:
            y = pen + (0 if bias is None else bias)
            return softmax(
                process_logits(
                    y, dataclasses.replace(plain, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0)
                )
            )
        y = pen / settings.temperature
        if bias is not None:
            y = y + bias  # BUG: after temperature
        rest = dataclasses.replace(
            plain, temperature=1.0, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0
        )
        return softmax(process_logits(y, rest))

    return _both(prefix, draft, target, gamma, rng, law)


def _both(prefix, draft, target, gamma, rng, law):
    """The standard round where draft and target share one (user-written) law(logits, history)."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        q = law(np.asarray(draft(h), dtype=np.float64), h)
        xs.append(sample(q, rng))
        qs.append(q)
    zs = np.asarray(target(prefix, xs), dtype=np.float64)
    ps = [law(zs[j], prefix + xs[:j]) for j in range(gamma + 1)]
    out = []
    for i, x in enumerate(xs):
        if rng.random() < min(1.0, ps[i][x] / qs[i][x]):
            out.append(x)
            continue
        out.append(sample_or(residual(ps[i], qs[i]), ps[i], rng))
        return out
    out.append(sample(ps[gamma], rng))
    return out


def penalties_block_shares_history(prefix, draft, target, gamma, rng, settings):
    """Penalises every target row of the verification pass with the history before the drafts.

    The penalty state is computed once per verify block and applied identically to all its
    positions, so row j does not count drafts 0..j-1. The draft, which runs token by token, counts
    them. sgl-project/sglang#40244: "penalty state applied identically across the positions of a
    verify block".
    """
    prefix = list(prefix)
    return _chain(prefix, draft, target, gamma, rng, settings, p_law=lambda z, h: probs(z, settings, prefix))


def penalties_count_prompt(prefix, draft, target, gamma, rng, settings):
    """Presence and frequency penalties count the prompt as well as the generated tokens.

    The step passes the whole prefix as the penalties' output history on both sides (it ignores
    ``settings.prompt_len``), the transformers-style "everything seen" history applied to
    OpenAI-style penalties that count generated tokens only. Written for the study from the
    prompt-vs-output convention in docs/adapters.md and llama-cpp-python's conventions
    (docs/findings/llama-cpp-python-conventions.md: which tokens a penalty counts).
    """
    law = lambda z, h: probs(z, settings, h, generated=h)  # BUG: the prompt is counted
    return _both(prefix, draft, target, gamma, rng, law)


def penalties_dropped(prefix, draft, target, gamma, rng, settings):
    """The speculative path applies no repetition, presence or frequency penalty, on either side.

    NVIDIA/TensorRT-LLM#17701: one-model speculation ignores repetition / presence / frequency
    penalties (also sgl-project/sglang#22049, #28242: penalties silently dropped by spec-v2).
    """
    bare = dataclasses.replace(settings, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0)
    return _both(prefix, draft, target, gamma, rng, lambda z, h: probs(z, bare, h))


def target_temperature_twice(prefix, draft, target, gamma, rng, settings):
    """Divides the target's logits by the temperature before the pipeline divides them again.

    The verification kernel received logits the model runner had already scaled and scaled them
    again (the draft, sampled in its own loop, is scaled once). vllm-project/vllm-ascend#6685: the
    plugin kept probabilities when upstream moved to logits, so temperature was misapplied.
    """

    def p_law(z, h):
        if settings.temperature > 0:
            z = z / settings.temperature  # BUG: the pipeline divides again
        return probs(z, settings, h)

    return _chain(prefix, draft, target, gamma, rng, settings, p_law=p_law)
