"""Round steps in logits mode: ``step(prefix, draft, target, gamma, rng, settings)``.

``draft(prefix)`` returns raw logits [V]; ``target(prefix, proposed)`` raw logits [n + 1, V]. The
step applies the sampling settings itself (repetition penalty over the row's history, greedy at
temperature 0, temperature, top-k, top-p, min-p, softmax). Only the *target's* processing decides
the output law: a draft processed differently is just another proposal, so several of the
"mismatch" steps below are lossless decoys.
"""

import dataclasses

import numpy as np

from ._choice import choice


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def rep_penalty(logits, history, r):
    if r == 1.0 or len(history) == 0:
        return logits
    seen = np.unique(np.asarray(history, dtype=np.int64))
    out = logits.copy()
    out[seen] = np.where(out[seen] < 0, out[seen] * r, out[seen] / r)
    return out


def presence_frequency(logits, generated, s):
    # OpenAI / vLLM: over the generated tokens only (the prompt does not count)
    pres, freq = getattr(s, "presence_penalty", 0.0), getattr(s, "frequency_penalty", 0.0)
    if (pres == 0 and freq == 0) or len(generated) == 0:
        return logits
    counts = np.bincount(np.asarray(generated, dtype=np.int64), minlength=len(logits))[: len(logits)]
    return logits - pres * (counts > 0) - freq * counts


def top_k(logits, k):
    if k <= 0 or k >= len(logits):
        return logits
    kth = np.sort(logits)[-k]
    return np.where(logits < kth, -np.inf, logits)


def top_p(logits, p):
    # transformers' TopPLogitsWarper: ascending sort, drop what sums to <= 1 - p, keep the last token
    if p >= 1.0:
        return logits
    order = (len(logits) - 1) - np.argsort(logits[::-1], kind="stable")  # ties: higher id goes first
    cum = np.cumsum(softmax(logits[order]))
    drop = cum <= 1.0 - p
    drop[-1] = False
    out = logits.copy()
    out[order[drop]] = -np.inf
    return out


def min_p(logits, m):
    if m <= 0.0:
        return logits
    pr = softmax(logits)
    return np.where(pr < m * pr.max(), -np.inf, logits)


def one_hot_argmax(logits):
    out = np.zeros(len(logits))
    out[int(np.argmax(logits))] = 1.0
    return out


STEPS = ("temperature", "top_k", "top_p", "min_p")


def probs(logits, history, s, steps=STEPS, penalty=True):
    """The sampling pipeline: logit bias, penalty, greedy, then ``steps`` in the given order, then softmax."""
    x = np.array(logits, dtype=np.float64)  # a copy: the rows handed over are read-only
    for token, bias in getattr(s, "logit_bias", ()):  # OpenAI's logit_bias, added to the raw logits first
        x[token] += bias
    if penalty:
        x = rep_penalty(x, history, getattr(s, "repetition_penalty", 1.0))
        x = presence_frequency(x, history[getattr(s, "prompt_len", 0) :], s)
    if s.temperature == 0:
        return one_hot_argmax(x)
    for name in steps:
        if name == "temperature" and s.temperature != 1.0:
            x = x / s.temperature
        elif name == "top_k":
            x = top_k(x, s.top_k)
        elif name == "top_p":
            x = top_p(x, s.top_p)
        elif name == "min_p":
            x = min_p(x, s.min_p)
    return softmax(x)


def _residual(p, q):
    r = np.maximum(p - q, 0.0)
    return r / r.sum() if r.sum() > 0 else p


def speculate(prefix, draft, target, gamma, rng, qfn, pfn):
    """Chain speculative sampling where qfn / pfn turn (logits, history) into the draft / target law."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        qs.append(qfn(draft(h), h))
        xs.append(choice(rng, len(qs[-1]), qs[-1]))
    L = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        p = pfn(L[j], prefix + xs[:j])
        if rng.random() >= p[x] / qs[j][x]:
            return xs[:j] + [choice(rng, len(p), _residual(p, qs[j]))]
    return xs + [choice(rng, L.shape[1], pfn(L[gamma], prefix + xs))]


# ----------------------------------------------------------------------------- correct


def step_logits_correct(prefix, draft, target, gamma, rng, settings):
    """Correct: the full pipeline applied identically to every draft and target row (history = prefix + drafts so
    far).
    """
    f = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, f, f)


def step_logits_gumbel(prefix, draft, target, gamma, rng, settings):
    """Correct: samples with Gumbel-max on the processed logits (log of the processed probabilities)."""
    prefix = list(prefix)

    def pick(w):
        with np.errstate(divide="ignore"):
            return int(np.argmax(np.log(w) + rng.gumbel(size=len(w))))

    xs, qs = [], []
    for _ in range(gamma):
        qs.append(probs(draft(prefix + xs), prefix + xs, settings))
        xs.append(pick(qs[-1]))
    L = np.asarray(target(prefix, xs))
    P = [probs(L[j], prefix + xs[:j], settings) for j in range(gamma + 1)]
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            r = np.maximum(P[j] - qs[j], 0)
            return xs[:j] + [pick(r if r.sum() > 0 else P[j])]
    return xs + [pick(P[gamma])]


def step_logits_topk_target_only(prefix, draft, target, gamma, rng, settings):
    """Correct (decoy): top-k is applied to the target only; the unfiltered draft is just another proposal."""
    qf = lambda logits, h: probs(logits, h, settings, steps=("temperature", "top_p", "min_p"))  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_draft_order_swapped(prefix, draft, target, gamma, rng, settings):
    """Correct (decoy): the draft applies top-p before top-k (target in the right order); draft processing cannot
    bias the output.
    """
    qf = lambda logits, h: probs(logits, h, settings, steps=("temperature", "top_p", "top_k", "min_p"))  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_rep_penalty_target_only(prefix, draft, target, gamma, rng, settings):
    """Correct (decoy): the repetition penalty is applied to the target only; the draft stays unpenalised."""
    qf = lambda logits, h: probs(logits, h, settings, penalty=False)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_temp_target_only(prefix, draft, target, gamma, rng, settings):
    """Correct (decoy): temperature is applied to the target only; the draft samples at temperature 1."""
    qf = lambda logits, h: probs(logits, h, settings, steps=("top_k", "top_p", "min_p"))  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


# ----------------------------------------------------------------------------- buggy


def step_logits_temp_draft_only(prefix, draft, target, gamma, rng, settings):
    """Bug: temperature is applied to the draft only, so the target is sampled at temperature 1."""
    qf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings, steps=("top_k", "top_p", "min_p"))  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_topp_before_temp(prefix, draft, target, gamma, rng, settings):
    """Bug: on the target, top-p is applied before temperature (the nucleus is chosen on untempered probabilities)."""
    qf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings, steps=("top_p", "temperature", "top_k", "min_p"))  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_target_order_swapped(prefix, draft, target, gamma, rng, settings):
    """Bug: the target applies top-p before top-k (the draft uses the right order)."""
    qf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings, steps=("temperature", "top_p", "top_k", "min_p"))  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_temp_in_ratio_only(prefix, draft, target, gamma, rng, settings):
    """Bug: temperature is used only inside the acceptance ratio; drafts, residual and bonus use untempered
    probabilities.
    """
    prefix = list(prefix)
    raw = lambda logits, h: probs(logits, h, settings, steps=("top_k", "top_p", "min_p"))  # noqa: E731
    hot = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    xs, qs, qt = [], [], []
    for _ in range(gamma):
        lg = draft(prefix + xs)
        qs.append(raw(lg, prefix + xs))
        qt.append(hot(lg, prefix + xs))
        xs.append(choice(rng, len(qs[-1]), qs[-1]))
    L = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        pt = hot(L[j], prefix + xs[:j])
        if rng.random() >= pt[x] / qt[j][x]:
            p = raw(L[j], prefix + xs[:j])
            return xs[:j] + [choice(rng, len(p), _residual(p, qs[j]))]
    return xs + [choice(rng, L.shape[1], raw(L[gamma], prefix + xs))]


def step_logits_rep_penalty_draft_only(prefix, draft, target, gamma, rng, settings):
    """Bug: the repetition penalty is applied to the draft only, so the target law ignores it."""
    qf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings, penalty=False)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_min_p_draft_only(prefix, draft, target, gamma, rng, settings):
    """Bug: min-p filtering is applied to the draft only, so the target keeps its low-probability tail."""
    qf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings, steps=("temperature", "top_k", "top_p"))  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_bias_ignored(prefix, draft, target, gamma, rng, settings):
    """Bug (sgl-project/sglang#10617: logit_bias not applied with EAGLE): the speculative path drops
    the request's logit bias, on draft and target alike."""
    s = dataclasses.replace(settings, logit_bias=())
    f = lambda logits, h: probs(logits, h, s)  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, f, f)


def step_logits_bias_after_temperature(prefix, draft, target, gamma, rng, settings):
    """Bug: the logit bias is added after temperature scaling, not to the raw logits first (OpenAI and
    vLLM add it to the raw logits): the same law at temperature 1, a bias of b / T too small below it.
    Only a setting with both a bias and a temperature shows it (the parity grid's combined setting)."""
    s = settings

    def f(logits, h):
        x = rep_penalty(np.array(logits, dtype=np.float64), h, s.repetition_penalty)
        x = presence_frequency(x, h[s.prompt_len :], s)
        if s.temperature == 0:
            return one_hot_argmax(x)
        x = x / s.temperature
        for token, bias in s.logit_bias:  # the bug: after the temperature
            x[token] += bias
        return softmax(min_p(top_p(top_k(x, s.top_k), s.top_p), s.min_p))

    return speculate(prefix, draft, target, gamma, rng, f, f)


def step_logits_rep_penalty_prefix_only(prefix, draft, target, gamma, rng, settings):
    """Bug: the repetition penalty is computed once over the prefix for every row, ignoring the drafts before
    each row.
    """
    prefix = list(prefix)
    f = lambda logits, h: probs(logits, prefix, settings)  # noqa: E731  (history = prefix, always)
    return speculate(prefix, draft, target, gamma, rng, f, f)


def step_logits_top_p_twice(prefix, draft, target, gamma, rng, settings):
    """Bug (sgl-project/sglang#36173: a top-p renormalisation on the verify path besides the
    sampler's own filters): the target's nucleus is cut a second time on its renormalised row."""
    qf = lambda logits, h: probs(logits, h, settings)  # noqa: E731
    pf = lambda logits, h: probs(logits, h, settings, steps=(*STEPS, "top_p"))  # noqa: E731
    return speculate(prefix, draft, target, gamma, rng, qf, pf)


def step_logits_q_reported_before_top_p(prefix, draft, target, gamma, rng, settings):
    """Bug (huggingface/transformers#47932, narrowed to top-p): the drafter samples from its fully processed
    row, but the q it keeps for the ratio and the residual is taken before top-p. Inside the top-p set the kept
    q is smaller than the law the draft came from, so drafts are over-accepted; where draft and target rows are
    equal (the high-overlap pair) the ratio is >= 1 for every draft and the output is exact, so only a
    low-overlap pair under top-p shows it.
    """
    prefix = list(prefix)
    before_top_p = ("temperature", "top_k", "min_p")
    xs, qs = [], []
    for _ in range(gamma):
        h = prefix + xs
        lg = draft(h)
        q_drawn = probs(lg, h, settings)
        xs.append(choice(rng, len(q_drawn), q_drawn))
        qs.append(probs(lg, h, settings, steps=before_top_p))
    L = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        p = probs(L[j], prefix + xs[:j], settings)
        if rng.random() >= p[x] / qs[j][x]:
            return xs[:j] + [choice(rng, len(p), _residual(p, qs[j]))]
    return xs + [choice(rng, L.shape[1], probs(L[gamma], prefix + xs, settings))]
