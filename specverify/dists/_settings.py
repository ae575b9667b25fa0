"""Sampling settings shared by draft and target (the parity contract)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import numpy as np

from ..errors import InvalidSettingsError, UnsupportedSettingError

__all__ = ["SamplingSettings", "RequestSettings", "GREEDY"]


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """The request's sampling settings, applied identically to draft and target.

    ``temperature == 0`` means greedy decoding (one-hot at the lowest-id argmax). ``top_k == 0``,
    ``top_p == 1``, ``min_p == 0``, ``repetition_penalty == 1`` and zero presence/frequency penalties
    switch the corresponding step off. The order of application is transformers' default:
    repetition penalty, presence/frequency penalty, temperature, top-k, top-p, min-p.
    Presence and frequency penalties (OpenAI/vLLM semantics, counted over generated tokens only)
    are not part of transformers; specverify applies them right after the repetition penalty.
    ``temperature_last=True`` is llama.cpp's order instead: the filters (top-k, top-p, min-p) act on
    the penalised logits and temperature divides what they kept; it changes the law only when
    temperature != 1 meets top-p or min-p (:attr:`temperature_order_matters`).
    ``penalize_prompt=False`` makes the repetition penalty count generated tokens only, as
    llama-cpp-python's ``Llama.generate`` does (its sampler never sees the prompt); transformers,
    vLLM and llama.cpp's own server count the prompt too. It is honoured where a law is computed
    from a prompt and a continuation (audits of language models).
    ``penalty_window=n`` makes every penalty count only the last ``n`` of the tokens it counts
    (llama.cpp's ``repeat_last_n`` / llama-cpp-python's ``last_n_tokens_size``, 64 by default
    there); 0 (the default) counts them all, as transformers, vLLM and the OpenAI API do.
    ``stop_token_ids`` (OpenAI/vLLM ``stop_token_ids``) end a request at the first of them it
    emits, that token included: they change where a sequence ends, never the law of a token.
    ``logit_bias`` ((id, bias) pairs; a mapping {id: bias} is accepted, its keys ints or digit
    strings as in the OpenAI API) is added to the raw logits before every other step (vLLM's order:
    bias, then penalties, temperature and filters).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    min_tokens_to_keep: int = 1
    temperature_last: bool = False
    penalize_prompt: bool = True
    penalty_window: int = 0
    stop_token_ids: tuple[int, ...] = ()
    logit_bias: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        def bad(field: str, what: str, fix: str) -> NoReturn:
            raise InvalidSettingsError(f"{field} {what}; {fix}", field=field)

        t = self.temperature
        if not (isinstance(t, (int, float)) and math.isfinite(t) and t >= 0):
            bad("temperature", f"must be a finite number >= 0, got {t!r}", "use 0 for greedy decoding")
        if not (isinstance(self.top_k, int) and self.top_k >= 0):
            bad("top_k", f"must be an int >= 0, got {self.top_k!r}", "use 0 to switch top-k off")
        if not (0.0 < self.top_p <= 1.0):
            bad("top_p", f"must lie in (0, 1], got {self.top_p!r}", "use 1.0 to switch top-p off")
        if not (0.0 <= self.min_p <= 1.0):
            bad("min_p", f"must lie in [0, 1], got {self.min_p!r}", "use 0.0 to switch min-p off")
        if not (self.repetition_penalty > 0 and math.isfinite(self.repetition_penalty)):
            bad(
                "repetition_penalty",
                f"must be finite and > 0, got {self.repetition_penalty!r}",
                "use 1.0 to switch it off",
            )
        for f in ("presence_penalty", "frequency_penalty"):
            if not math.isfinite(getattr(self, f)):
                bad(f, f"must be finite, got {getattr(self, f)!r}", "use 0.0 to switch it off")
        if not (isinstance(self.min_tokens_to_keep, int) and self.min_tokens_to_keep >= 1):
            bad("min_tokens_to_keep", f"must be an int >= 1, got {self.min_tokens_to_keep!r}", "use 1")
        if not isinstance(self.temperature_last, bool):
            bad("temperature_last", f"must be True or False, got {self.temperature_last!r}", "use False (transformers)")
        if not isinstance(self.penalize_prompt, bool):
            bad("penalize_prompt", f"must be True or False, got {self.penalize_prompt!r}", "use True (transformers)")
        w = self.penalty_window
        if isinstance(w, bool) or not (isinstance(w, (int, np.integer)) and w >= 0):
            bad("penalty_window", f"must be an int >= 0, got {w!r}", "use 0 to count every token (transformers, vLLM)")
        stops = _ids_or_none(self.stop_token_ids)
        if stops is None:
            bad("stop_token_ids", f"must be token ids (ints >= 0), got {self.stop_token_ids!r}", "use () for none")
        object.__setattr__(self, "stop_token_ids", stops)  # a list (from JSON) becomes a tuple
        bias = _bias_or_none(self.logit_bias)
        if bias is None:
            bad("logit_bias", f"must map token ids to finite biases, got {self.logit_bias!r}", "use () for none")
        object.__setattr__(self, "logit_bias", bias)

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0

    @property
    def uses_history(self) -> bool:
        """Whether the processed distribution depends on previously seen tokens (penalties)."""
        return self.repetition_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0

    @property
    def temperature_order_matters(self) -> bool:
        """Whether applying temperature before or after the filters gives different laws (top-k
        keeps the same tokens either way; top-p and min-p do not)."""
        return not self.is_greedy and self.temperature != 1.0 and (self.top_p < 1.0 or self.min_p > 0.0)

    def penalty_history(self, prefix: Sequence[int], n_prompt: int) -> tuple[Sequence[int], Sequence[int]]:
        """(the tokens the repetition penalty counts, those presence and frequency penalties count)
        before the next position of ``prefix``, whose first ``n_prompt`` tokens are the prompt:
        the repetition penalty counts the prompt too unless ``penalize_prompt`` is False, and each
        keeps its last ``penalty_window`` tokens (0: all)."""
        generated = prefix[n_prompt:]
        seen = prefix if self.penalize_prompt else generated
        w = self.penalty_window
        return (seen[-w:], generated[-w:]) if w else (seen, generated)

    def require_conventions(
        self, *, who: str, temperature_last: bool = False, penalize_prompt: bool = True, penalty_window: int | None = 0
    ) -> None:
        """Raise :class:`~specverify.errors.UnsupportedSettingError` when ``who`` follows other
        conventions (temperature after the filters; a repetition penalty that skips the prompt;
        penalties over a window of tokens) where they change the law: the engine cannot sample the
        law these settings define, which is not a bug of its speculation. ``penalty_window=None``
        leaves the window to the caller (whether it matters depends on the request's length)."""
        if self.temperature_order_matters and self.temperature_last != temperature_last:
            theirs, fix = (
                ("after", "temperature_last=True") if temperature_last else ("before", "temperature_last=False")
            )
            raise UnsupportedSettingError(
                f"{who} applies temperature {theirs} top-p/min-p, so it cannot sample {self.short()}; "
                f"audit it with {fix}"
            )
        if self.repetition_penalty != 1.0 and self.penalize_prompt != penalize_prompt:
            theirs = "counts the prompt" if penalize_prompt else "counts generated tokens only"
            raise UnsupportedSettingError(
                f"{who}'s repetition penalty {theirs}, so it cannot sample {self.short()}; "
                f"audit it with penalize_prompt={penalize_prompt}"
            )
        if penalty_window is not None and self.uses_history and self.penalty_window != penalty_window:
            theirs = f"the last {penalty_window} tokens" if penalty_window else "every token"
            raise UnsupportedSettingError(
                f"{who}'s penalties count {theirs}, so it cannot sample {self.short()}; "
                f"audit it with penalty_window={penalty_window}"
            )

    def bias_vector(self, vocab: int) -> np.ndarray | None:
        """The logit bias as a [vocab] vector (None without a bias); an id outside the vocabulary is an error."""
        if not self.logit_bias:
            return None
        out = np.zeros(vocab)
        for t, b in self.logit_bias:
            if t >= vocab:
                raise InvalidSettingsError(
                    f"logit_bias names id {t}, outside a vocabulary of {vocab}; bias ids below {vocab}",
                    field="logit_bias",
                )
            out[t] += b
        return out

    def stop_at(self, ids: Sequence[int]) -> int | None:
        """The index of the first stop token in ``ids``, or None."""
        return next((i for i, t in enumerate(ids) if t in self.stop_token_ids), None)

    def short(self) -> str:
        """Compact label listing only the non-default sampling settings, for reports (a request's
        context, such as RequestSettings.prompt_len, is not a setting)."""
        default = SamplingSettings()
        parts = [
            f"{f.name}={getattr(self, f.name)}"
            for f in dataclasses.fields(SamplingSettings)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(parts) or "default"

    def to_dict(self) -> dict[str, Any]:
        """Every field; ``temperature_last``, ``penalize_prompt``, ``penalty_window``,
        ``stop_token_ids`` (a list) and ``logit_bias`` only when not at their defaults (files and
        protocols written before they existed read the same)."""
        d: dict[str, Any] = dataclasses.asdict(self)
        defaults = (
            ("temperature_last", False),
            ("penalize_prompt", True),
            ("penalty_window", 0),
            ("stop_token_ids", ()),
            ("logit_bias", ()),
        )
        for f, default in defaults:
            if d[f] == default:
                del d[f]
        if "stop_token_ids" in d:
            d["stop_token_ids"] = list(self.stop_token_ids)
        if "logit_bias" in d:  # the OpenAI form: {"id": bias}
            d["logit_bias"] = {str(t): b for t, b in self.logit_bias}
        return d


def _bias_or_none(x: object) -> tuple[tuple[int, float], ...] | None:
    """``x`` ((id, bias) pairs, or a mapping {id: bias}) as sorted pairs, or None when malformed."""
    items = list(x.items()) if isinstance(x, dict) else x
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        return None
    out: dict[int, float] = {}
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            return None
        t, b = item
        if isinstance(t, str) and t.strip().isdigit():
            t = int(t)
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            return None
        if isinstance(b, bool) or not isinstance(b, (int, float, np.floating)) or not math.isfinite(b):
            return None
        out[int(t)] = out.get(int(t), 0.0) + float(b)
    return tuple(sorted(out.items()))


def _ids_or_none(x: object) -> tuple[int, ...] | None:
    """``x`` as a tuple of token ids, or None when it is not a sequence of ints >= 0."""
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        return None
    ids: tuple[object, ...] = tuple(x)
    ok = all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 0 for t in ids)
    return tuple(int(t) for t in ids) if ok else None  # type: ignore[call-overload]


GREEDY = SamplingSettings(temperature=0.0)


@dataclasses.dataclass(frozen=True)
class RequestSettings(SamplingSettings):
    """The settings of one request as a round step receives them: the sampling knobs and
    ``prompt_len``, how many tokens at the start of every prefix of the request are its prompt.
    Presence and frequency penalties count the generated tokens only (``prefix[prompt_len:]``, as
    the OpenAI API and vLLM define them); the repetition penalty counts the prompt too, unless
    ``penalize_prompt`` is False."""

    prompt_len: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.prompt_len, int) and self.prompt_len >= 0):
            raise InvalidSettingsError(
                f"prompt_len must be an int >= 0, got {self.prompt_len!r}; pass the prompt's length", field="prompt_len"
            )

    @classmethod
    def of(cls, settings: SamplingSettings, *, prompt_len: int) -> RequestSettings:
        """``settings`` for a request whose prompt is the first ``prompt_len`` tokens."""
        knobs = {f.name: getattr(settings, f.name) for f in dataclasses.fields(SamplingSettings)}
        return cls(**knobs, prompt_len=prompt_len)

    def generated(self, prefix: Sequence[int]) -> Sequence[int]:
        """The tokens of ``prefix`` the request generated (what presence and frequency penalties count)."""
        return prefix[self.prompt_len :]
