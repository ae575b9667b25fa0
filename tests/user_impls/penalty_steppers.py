"""Round steps in logits mode that apply presence and frequency penalties themselves, written as
users write them: ``step(prefix, draft, target, gamma, rng, settings)``, where ``settings`` is a
``RequestSettings`` (``settings.prompt_len``: how many tokens of ``prefix`` are the prompt).

OpenAI / vLLM semantics: presence subtracts ``presence_penalty`` from the logit of every token that
was generated at least once, frequency subtracts ``frequency_penalty`` times its count; both over
the generated tokens only (the prompt does not count). The bugs are modelled on real reports
(cited per step); the correct steps include two unusual ones (incremental counts kept across
rounds, penalties on the target only).
"""

import dataclasses

import numpy as np

from specverify import SamplingSettings

from ._choice import choice
from .logits_steppers import _residual, one_hot_argmax, softmax


def penalised(logits, generated, s):
    """Presence and frequency penalties over ``generated``, then temperature and softmax (argmax at 0)."""
    x = np.asarray(logits, dtype=np.float64).copy()
    if len(generated):
        counts = np.bincount(np.asarray(generated, dtype=np.int64), minlength=len(x))[: len(x)]
        x -= s.presence_penalty * (counts > 0) + s.frequency_penalty * counts
    return one_hot_argmax(x) if s.temperature == 0 else softmax(x / s.temperature)


def chain(prefix, draft, target, gamma, rng, qfn, pfn, *, extra=0):
    """Chain speculative sampling; qfn / pfn: (logits, history) -> law of the draft / target row.
    ``extra``: drafts beyond its own position in a verified row's history (0 is right)."""
    xs, qs = [], []
    for _ in range(gamma):
        h = list(prefix) + xs
        qs.append(qfn(draft(h), h))
        xs.append(choice(rng, len(qs[-1]), qs[-1]))
    L = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        p = pfn(L[j], list(prefix) + xs[: j + extra])
        if rng.random() >= p[x] / qs[j][x]:
            return xs[:j] + [choice(rng, len(p), _residual(p, qs[j]))]
    return xs + [choice(rng, L.shape[1], pfn(L[gamma], list(prefix) + xs))]


# ----------------------------------------------------------------------------- correct


def step_penalties_correct(prefix, draft, target, gamma, rng, settings):
    """Correct: every row penalised over the generated tokens before it (prompt excluded, drafts included)."""
    f = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f)


def step_penalties_windowed(prefix, draft, target, gamma, rng, settings):
    """Correct, llama.cpp's way: the penalties count the last ``settings.penalty_window`` generated
    tokens (``repeat_last_n``; 0: all of them)."""
    w = settings.penalty_window

    def f(logits, h):
        gen = h[settings.prompt_len :]
        return penalised(logits, gen[-w:] if w else gen, settings)

    return chain(prefix, draft, target, gamma, rng, f, f)


def step_penalties_target_only(prefix, draft, target, gamma, rng, settings):
    """Correct (decoy): the draft is not penalised; only the target's law decides the output."""
    q = lambda logits, h: penalised(logits, [], settings)  # noqa: E731
    p = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


class IncrementalCounts:
    """Correct (unusual): counts kept across the rounds of a request, updated with exactly the tokens
    each round emitted (never the rejected drafts), reset when a new request starts."""

    def __init__(self, *, feed="emitted"):
        self.feed, self.counts, self.asked = feed, [], []

    def __call__(self, prefix, draft, target, gamma, rng, settings):
        if len(prefix) == settings.prompt_len:  # a new request
            self.counts = []
        base = list(self.counts)
        f = lambda logits, h: penalised(logits, base + h[len(prefix) :], settings)  # noqa: E731
        self.asked = []
        out = chain(prefix, draft, _Spy(target, self), gamma, rng, f, f)
        if self.feed == "emitted":
            self.counts += out
        elif self.feed == "last":  # sglang#33643
            self.counts += out[-1:]
        else:  # every draft proposed, rejected ones too, then the emitted token (vmlx-swift#357)
            self.counts += self.asked[len(prefix) :] + out[-1:]
        return out


class _Spy:
    """Remembers what the step proposed to the target (its drafts)."""

    def __init__(self, target, owner):
        self.target, self.owner = target, owner

    def __call__(self, prefix, proposed):
        self.owner.asked = list(prefix) + list(proposed)
        return self.target(prefix, proposed)


step_incremental_correct = IncrementalCounts(feed="emitted")


# ----------------------------------------------------------------------------- buggy


def step_frequency_ignored(prefix, draft, target, gamma, rng, settings):
    """Bug (vllm-project/vllm#18902: frequency penalty has no effect under speculative decoding;
    NVIDIA/TensorRT-LLM#17701: penalties dropped by one-model speculation): the speculative path
    applies the presence penalty but never the frequency penalty."""
    no_frequency = SamplingSettings(**{**_knobs(settings), "frequency_penalty": 0.0})
    f = lambda logits, h: penalised(logits, h[settings.prompt_len :], no_frequency)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f)


def step_penalties_ignored(prefix, draft, target, gamma, rng, settings):
    """Bug (NVIDIA/TensorRT-LLM#17701: penalties silently dropped by one-model speculation): the
    speculative path applies temperature and the truncations but neither penalty."""
    none = SamplingSettings(**{**_knobs(settings), "presence_penalty": 0.0, "frequency_penalty": 0.0})
    f = lambda logits, h: penalised(logits, h[settings.prompt_len :], none)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f)


def step_penalties_count_the_prompt(prefix, draft, target, gamma, rng, settings):
    """Bug: presence and frequency counted over the whole prefix, prompt included (the repetition
    penalty's convention applied to penalties that count generated tokens only)."""
    f = lambda logits, h: penalised(logits, h, settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f)


def repetition_penalised(logits, history, s):
    """The repetition penalty (HF / vLLM: each token seen in ``history`` once, a positive logit
    divided by the penalty, a negative one multiplied), then temperature and softmax."""
    x = np.asarray(logits, dtype=np.float64).copy()
    seen = np.zeros(len(x), dtype=bool)
    seen[np.asarray(history, dtype=np.int64)] = True
    x = np.where(seen, np.where(x < 0, x * s.repetition_penalty, x / s.repetition_penalty), x)
    return one_hot_argmax(x) if s.temperature == 0 else softmax(x / s.temperature)


def step_repetition_correct(prefix, draft, target, gamma, rng, settings):
    """Correct: the repetition penalty over the whole prefix before each row, the prompt included."""
    f = lambda logits, h: repetition_penalised(logits, h, settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f)


def step_repetition_skips_the_prompt(prefix, draft, target, gamma, rng, settings):
    """Bug (vllm-project/vllm-metal#69: the repetition penalty did not see the prompt): the
    repetition penalty counts the generated tokens only."""
    f = lambda logits, h: repetition_penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f)


def step_repetition_inverted(prefix, draft, target, gamma, rng, settings):
    """Bug (a convention converted twice: values below 1 penalise): the target applies 1 / theta, so
    seen tokens are favoured; the drafter is right."""
    inverted = dataclasses.replace(settings, repetition_penalty=1.0 / settings.repetition_penalty)
    q = lambda logits, h: repetition_penalised(logits, h, settings)  # noqa: E731
    p = lambda logits, h: repetition_penalised(logits, h, inverted)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


def step_penalties_count_the_scored_draft(prefix, draft, target, gamma, rng, settings):
    """Bug (sgl-project/sglang#40244: penalty state across the positions of a verify block): each
    verified row's penalties count the draft that row scores (a history slice one too long), so
    a repeated draft is tested against a row that already penalises it; the bonus row is right."""
    f = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, f, f, extra=1)


def step_frequency_follows_logit_sign(prefix, draft, target, gamma, rng, settings):
    """Bug (the frequency penalty on the speculative path, vllm-project/vllm#18902): the target's
    frequency penalty copies the repetition penalty's sign branch, so a negative logit gets
    + frequency * count; the drafter is right."""

    def signed(logits, h):
        x = np.asarray(logits, dtype=np.float64)
        gen = np.asarray(h[settings.prompt_len :], dtype=np.int64)
        counts = np.bincount(gen, minlength=len(x))[: len(x)] if len(gen) else np.zeros(len(x))
        sign = np.where(x < 0, -1.0, 1.0)  # BUG: the repetition penalty's branch
        x = x - settings.presence_penalty * (counts > 0) - sign * settings.frequency_penalty * counts
        return one_hot_argmax(x) if settings.temperature == 0 else softmax(x / settings.temperature)

    q = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, signed)


def _row(h, prefix):
    """The index of the verify row whose history is ``h`` (row j sees the prefix and j drafts)."""
    return len(h) - len(prefix)


def step_penalties_over_a_window(prefix, draft, target, gamma, rng, settings):
    """Bug (ggml-org/llama.cpp's repeat_last_n convention where the request sets no window): the
    target's penalties count only the last 8 generated tokens (a ring buffer); the drafter is right."""
    q = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    p = lambda logits, h: penalised(logits, h[settings.prompt_len :][-8:], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


def step_penalties_compound_along_the_block(prefix, draft, target, gamma, rng, settings):
    """Bug (sgl-project/sglang#40244: penalty state shared by the positions of a verify block): the
    penalties are subtracted in place from a buffer every row reuses, so row j gets them j + 1 times."""

    def p(logits, h):
        j = _row(h, prefix)
        s = dataclasses.replace(
            settings,
            presence_penalty=settings.presence_penalty * (j + 1),
            frequency_penalty=settings.frequency_penalty * (j + 1),
        )
        return penalised(logits, h[settings.prompt_len :], s)

    q = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


def step_bonus_without_penalties(prefix, draft, target, gamma, rng, settings):
    """Bug (vllm-project/vllm#42744: processors applied differently to the verified rows and the
    bonus): the bonus after a full acceptance is sampled from the unpenalised row."""

    def p(logits, h):
        counted = h[settings.prompt_len :] if _row(h, prefix) < gamma else []  # BUG: the bonus row counts none
        return penalised(logits, counted, settings)

    q = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


def step_presence_as_a_factor(prefix, draft, target, gamma, rng, settings):
    """Bug (a backend with multiplicative penalties only, NVIDIA/TensorRT-LLM#17701's path): the
    target's presence penalty divides a positive logit by 1 + presence (multiplies a negative one)."""
    f = 1.0 + settings.presence_penalty

    def p(logits, h):
        x = np.asarray(logits, dtype=np.float64)
        gen = np.asarray(h[settings.prompt_len :], dtype=np.int64)
        counts = np.bincount(gen, minlength=len(x))[: len(x)] if len(gen) else np.zeros(len(x))
        x = np.where(counts > 0, np.where(x < 0, x * f, x / f), x) - settings.frequency_penalty * counts
        return softmax(x / settings.temperature)

    q = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


def step_penalties_count_the_prompt_only(prefix, draft, target, gamma, rng, settings):
    """Bug (a history slice taken the wrong way, vllm-project/vllm#18902's path): the target's
    presence and frequency penalties count the prompt instead of the generated tokens."""
    q = lambda logits, h: penalised(logits, h[settings.prompt_len :], settings)  # noqa: E731
    p = lambda logits, h: penalised(logits, h[: settings.prompt_len], settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


def step_repetition_on_probabilities(prefix, draft, target, gamma, rng, settings):
    """Bug (sgl-project/sglang#21258: a repetition penalty on the wrong tensor): the target divides
    the seen tokens' probabilities by the penalty instead of the logits' sign rule."""

    def p(logits, h):
        x = np.asarray(logits, dtype=np.float64)
        seen = np.zeros(len(x), dtype=bool)
        seen[np.asarray(h, dtype=np.int64)] = True
        w = softmax(x) / np.where(seen, settings.repetition_penalty, 1.0)  # then the log goes on to temperature
        with np.errstate(divide="ignore"):  # a masked (-inf) logit stays masked
            return softmax(np.log(w / w.sum()) / settings.temperature)

    q = lambda logits, h: repetition_penalised(logits, h, settings)  # noqa: E731
    return chain(prefix, draft, target, gamma, rng, q, p)


#: Bug (sgl-project/sglang#33643): the penalizer is fed only the last token of each verification
#: step, so the accepted drafts never enter the counts (a frequency penalty acts as about
#: penalty / accepted length).
step_penalty_fed_last_token_only = IncrementalCounts(feed="last")

#: Bug (vmlx-swift#357): the penalty history records every proposed draft, the rejected ones too.
step_history_keeps_rejected_drafts = IncrementalCounts(feed="proposed")


def _knobs(s):
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(SamplingSettings)}


# ----------------------------------------------------------------------------- generators


def _target_only(prompt, n, seed, model, count_prompt):
    rng, out = np.random.default_rng(seed), []
    for _ in range(n):
        p = penalised(
            model.target_logits(list(prompt) + out), (list(prompt) if count_prompt else []) + out, model.settings
        )
        out.append(choice(rng, len(p), p))
    return out


def generate_penalties_correct(prompt, n, seed, model):
    """Correct: target-only sampling, penalties over the generated tokens (the generator knows its prompt)."""
    return _target_only(prompt, n, seed, model, count_prompt=False)


def generate_penalties_count_the_prompt(prompt, n, seed, model):
    """Bug: presence and frequency penalties count the prompt's tokens too."""
    return _target_only(prompt, n, seed, model, count_prompt=True)
