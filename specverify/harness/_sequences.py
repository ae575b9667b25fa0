"""Drivers for implementations that see whole sequences: round steps and generators.

Each sequence starts from a random prompt (2 to 5 tokens) and grows by the tokens the
implementation emits; every call receives the whole prefix so far, and the rounds of one
sequence are consecutive calls, so state an implementation keeps between calls (a KV cache) is
exercised as in production. The law of every emitted token is taken from the true prefix, never
from what the implementation asked the model, so a wrong prefix (a stale cache, a position bug)
cannot hide itself.

Modes (what the rows handed over are):
    'probs'   q(.|prefix), p(.|prefix) processed by the audit's settings
    'logits'  raw logits; the implementation applies the settings (passed as ``settings``)
    'greedy'  raw probabilities (temperature 1); the expected output is target-only greedy
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..dists import RequestSettings, SamplingSettings
from ..errors import MalformedOutputError
from ._contexts import ContextPair
from ._ids import as_token_ids
from ._records import PAD, Generation
from ._watchdog import Ticker, run_guarded

__all__ = ["SequenceView", "settings_arguments", "run_round_step", "run_generator", "MODES", "PROMPT_LENGTHS"]

MODES = ("probs", "logits", "greedy")
PROMPT_LENGTHS = (2, 6)  # [low, high) prompt tokens per sequence
#: prompts of requests whose law depends on the history: long enough that what a penalty counts
#: (prompt and generated tokens, or generated ones only) changes the law of most tokens
HISTORY_PROMPT_LENGTHS = (12, 25)


def _readonly(a: npt.ArrayLike) -> npt.NDArray[np.float64]:
    arr = np.asarray(a, dtype=np.float64)
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


@dataclasses.dataclass
class SequenceView:
    """The model as an implementation under audit sees it (one mode, one setting).

    ``draft(prefix) -> [V]`` and ``target(prefix, proposed) -> [len(proposed) + 1, V]`` are the
    round-step callables; ``target_probs`` / ``draft_probs`` / ``*_logits`` are the generator's.
    Every array is read-only float64."""

    pair: ContextPair
    settings: SamplingSettings
    mode: str = "probs"
    asked: list[int] = dataclasses.field(default_factory=list)  # prefix + proposed of the last target() call
    passes: list[list[int]] = dataclasses.field(default_factory=list)  # every target() call of the round
    # the last table pass's rows: those of asked[:t] for t from pass_start on (the recorder reuses them)
    pass_rows: list[int] = dataclasses.field(default_factory=list)
    pass_start: int = -1
    prompt_len: int = 0  # the current request's prompt: the first prompt_len tokens of every prefix

    @property
    def vocab_size(self) -> int:
        return self.pair.vocab_size

    def __post_init__(self) -> None:
        # the processed tables, looked up once (rows handed over are read-only views of them)
        s = None if self.mode == "greedy" else self.settings
        tabled = getattr(self.pair, "tabled", True) and self.mode != "logits" and not (s is not None and s.uses_history)
        self._tables: dict[bool, npt.NDArray[np.float64]] | None = (
            {False: self.pair.target_table(s), True: self.pair.draft_table(s)} if tabled else None
        )
        # raw logits of a tabled pair (--logits): a pass is one gather too
        self._logits = getattr(self.pair, "target_logits", None) if self.mode == "logits" else None

    def _row(self, prefix: list[int], *, draft: bool) -> npt.NDArray[np.float64]:
        if self._tables is not None:
            row: npt.NDArray[np.float64] = self._tables[draft][self.pair.row_of(prefix)]
            return row
        if self.mode == "logits":
            return self.pair.law_logits(prefix, draft=draft)
        s = None if self.mode == "greedy" else self.settings
        return _readonly(self.pair.law_probs(prefix, s, draft=draft, n_prompt=self.prompt_len))

    def draft(self, prefix: Iterable[int]) -> npt.NDArray[np.float64]:
        # a list is read at once and not kept: no copy (a long prefix costs one per draft otherwise)
        return self._row(prefix if type(prefix) is list else list(prefix), draft=True)

    def target(self, prefix: Iterable[int], proposed: Iterable[int]) -> npt.NDArray[np.float64]:
        prop = [int(t) for t in proposed]
        self.asked = full = [*prefix, *prop]  # the view's own copy: the step may mutate its lists
        n_pre = len(full) - len(prop)
        self.passes.append(full)
        table = self._tables[False] if self._tables is not None else self._logits
        if table is not None:  # one gather of the pass's rows
            self.pass_rows, self.pass_start = self.pair.rows_along(full, n_pre, len(full) + 1), n_pre
            rows = table[self.pass_rows]
            rows.flags.writeable = False
            return rows
        # longest prefix first: an untabled model's one pass over it caches every shorter prefix's row
        rows = np.stack([self._row(full[: n_pre + j], draft=False) for j in range(len(prop), -1, -1)][::-1])
        rows.flags.writeable = False
        return rows

    # the generator's view
    def target_probs(self, prefix: Iterable[int]) -> npt.NDArray[np.float64]:
        return self._probs_only(prefix, draft=False)

    def draft_probs(self, prefix: Iterable[int]) -> npt.NDArray[np.float64]:
        return self._probs_only(prefix, draft=True)

    def target_logits(self, prefix: Iterable[int]) -> npt.NDArray[np.float64]:
        return self.pair.law_logits(list(prefix))

    def draft_logits(self, prefix: Iterable[int]) -> npt.NDArray[np.float64]:
        return self.pair.law_logits(list(prefix), draft=True)

    def _probs_only(self, prefix: Iterable[int], *, draft: bool) -> npt.NDArray[np.float64]:
        if self.mode == "logits":
            raise MalformedOutputError(
                "this audit runs with --logits: read target_logits / draft_logits and apply "
                "model.settings yourself (probabilities are not handed over in this mode)"
            )
        return self._row(list(prefix), draft=draft)


class _Recorder:
    """Accumulates emitted tokens with their law rows (from the true prefix)."""

    def __init__(self, view: SequenceView) -> None:
        self.view = view
        # what the rounds emitted, one entry per token or round; generation() makes the arrays
        self.tokens: list[Any] = []
        self.rows: list[Any] = []
        self.pos: list[Any] = []
        self.seq: list[Any] = []
        self.n_acc: list[Any] = []
        self.laws: list[Any] = []
        self.drafts: list[Any] = []
        self.draft_rows: list[Any] = []
        self.bonus_rows: list[int] = []  # the row after every draft: where a bonus or a next-row read lands
        self.round_id: list[Any] = []
        self.paths: list[int] = []  # per round: leaves of its target passes (> 1: a tree)
        self.prompts: dict[int, list[int]] = {}  # each sequence's prompt (the diagnosis rebuilds prefixes)
        s = view.settings
        # laws that a table cannot hold: penalties (history) and untabled models (whole prefix)
        self.per_token_law = view.mode != "greedy" and (s.uses_history or not getattr(view.pair, "tabled", True))

    def emit(self, seq: list[int], out: list[int], seq_id: int, gamma: int, limit: int) -> None:
        self.record(seq, out, seq_id, limit)
        self.n_acc.append(len(out) - 1)
        nb = len(seq) - len(out)  # the true prefix before the round
        # The round's drafts: what the last verification pass held beyond the true prefix (a step
        # may re-send context tokens as part of the proposal, e.g. at a KV block boundary).
        asked = self.view.asked
        d = asked[nb : nb + gamma] if asked[:nb] == seq[:nb] else []
        pad = [PAD] * (gamma - len(d))
        self.drafts.append(d + pad)
        self.paths.append(_leaves(self.view.passes))
        # rows of base + d[:j] (and of base + d: the bonus row); asked begins with base + d, and
        # without drafts base is seq[:nb]
        rows = self._rows_along(asked if d else seq, nb, nb + len(d) + (len(d) == gamma))
        self.draft_rows.append(rows[: len(d)] + pad)
        self.bonus_rows.append(rows[gamma] if len(d) == gamma else PAD)

    def record(self, seq: list[int], out: list[int], seq_id: int, limit: int, *, positions: bool = True) -> None:
        """Tokens ``out`` that follow ``seq`` (extended in place); those before ``limit`` are recorded,
        at their round positions (``positions``) or all at position 0 (a black box's one stratum)."""
        if not self.per_token_law:
            self._record_rows(seq, out, seq_id, limit, positions)
            return
        for j, t in enumerate(out):
            if len(seq) < limit:
                self._record_law(seq, t, j if positions else 0, seq_id)
            seq.append(t)

    def _record_law(self, seq: list[int], t: int, j: int, seq_id: int) -> None:
        """One token whose law is computed from its whole prefix (penalties, untabled models)."""
        s = self.view.settings
        if seq_id not in self.prompts:
            self.prompts[seq_id] = list(seq)
        self.rows.append(len(self.laws))
        n_prompt = len(self.prompts[seq_id])
        law = self.view.pair.law_probs(seq, None if self.view.mode == "greedy" else s, n_prompt=n_prompt)
        self.laws.append(law)
        self._note(t, j, seq_id)

    def _record_rows(self, seq: list[int], out: list[int], seq_id: int, limit: int, positions: bool) -> None:
        """Tokens of a tabled law: their rows read along the sequence at once."""
        if seq_id not in self.prompts and out and len(seq) < limit:
            self.prompts[seq_id] = list(seq)
        n0, kept = len(seq), max(0, min(len(out), limit - len(seq)))
        seq.extend(out)
        self.rows.extend(self._rows_along(seq, n0, n0 + kept))
        # _note's four columns, a round's tokens at once
        self.tokens.extend(out[:kept])
        self.pos.extend(range(kept) if positions else [0] * kept)
        self.seq.extend([seq_id] * kept)
        self.round_id.extend([len(self.n_acc)] * kept)

    def _rows_along(self, seq: list[int], start: int, stop: int) -> list[int]:
        """Rows of ``seq[:t]`` for t in [start, stop): the last verification pass's where it read
        the same prefixes (a chain's emitted tokens and drafts always), else read again."""
        v = self.view
        if v.pass_start == start and stop - start <= len(v.pass_rows) and v.asked[: stop - 1] == seq[: stop - 1]:
            return v.pass_rows[: stop - start]
        return v.pair.rows_along(seq, start, stop)

    def _note(self, t: int, j: int, seq_id: int) -> None:
        self.tokens.append(t)
        self.pos.append(j)
        self.seq.append(seq_id)
        self.round_id.append(len(self.n_acc))

    def generation(self, rounds: int) -> Generation:

        def a(x: list[Any]) -> npt.NDArray[np.int64]:
            return np.asarray(x, dtype=np.int64).reshape(-1)

        law = np.stack(self.laws) if self.per_token_law and self.laws else None
        drafts = np.asarray(self.drafts, dtype=np.int64).reshape(len(self.drafts), -1) if self.drafts else None
        draft_rows = np.asarray(self.draft_rows, dtype=np.int64).reshape(len(self.drafts), -1) if self.drafts else None
        return Generation(
            tokens=a(self.tokens),
            row=a(self.rows),
            position=a(self.pos),
            sequence=a(self.seq),
            num_accepted=a(self.n_acc),
            rounds=rounds,
            drafts=drafts,
            drafts_from_implementation=drafts is not None,
            law=law,
            draft_rows=draft_rows,
            round_id=a(self.round_id),
            prompts=self._prompt_array(),
            paths=a(self.paths) if self.paths else None,
            bonus_rows=a(self.bonus_rows) if self.drafts else None,
        )

    def _prompt_array(self) -> npt.NDArray[np.int64] | None:
        if not self.prompts:
            return None
        n, width = max(self.prompts) + 1, max(len(p) for p in self.prompts.values())
        out = np.full((n, width), PAD, dtype=np.int64)
        for i, p in self.prompts.items():
            out[i, : len(p)] = p
        return out


def _leaves(passes: list[list[int]]) -> int:
    """How many of a round's target passes extend no other: 1 for a chain, the leaves for a tree."""
    if len(passes) <= 1:
        return len(passes)  # a chain's one pass (the common case, without hashing the prefix)
    distinct = {tuple(p) for p in passes}
    return sum(not any(len(o) > len(p) and o[: len(p)] == p for o in distinct) for p in distinct)


def _check_step_output(out: Any, gamma: int, v: int, name: str) -> list[int]:
    if type(out) is list and 1 <= len(out) <= gamma + 1 and all(type(t) is int and 0 <= t < v for t in out):
        return list(out)  # the common case, valid as it is (the checks below name what is wrong)
    ids: list[int] = as_token_ids(out, name).tolist()
    if not 1 <= len(ids) <= gamma + 1:
        raise MalformedOutputError(f"{name} returned {len(ids)} tokens {ids}; a round emits 1..gamma + 1 = {gamma + 1}")
    if any(t < 0 or t >= v for t in ids):
        raise MalformedOutputError(f"{name} returned ids {ids} outside [0, {v})")
    return ids


def _prompt(rng: np.random.Generator, v: int, settings: SamplingSettings) -> list[int]:
    lengths = HISTORY_PROMPT_LENGTHS if settings.uses_history else PROMPT_LENGTHS
    prompt: list[int] = rng.integers(0, v, int(rng.integers(*lengths))).tolist()
    return prompt


def settings_arguments(param: inspect.Parameter | None, settings: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The (extra positional, keyword) arguments that hand ``settings`` to a round step's settings
    parameter: by keyword, or as the sixth positional when it is positional-only; none without one."""
    if param is None:
        return (), {}
    if param.kind is param.POSITIONAL_ONLY:
        return (settings,), {}
    return (), {param.name: settings}


def run_round_step(
    step: Callable[..., Any],
    view: SequenceView,
    *,
    n: int,
    length: int,
    gamma: int,
    rng: np.random.Generator,
    settings_param: inspect.Parameter | None,
    timeout: float | None,
    name: str,
) -> Generation:
    """``n`` sequences of ``length`` emitted tokens from ``step(prefix, draft, target, gamma, rng[, settings])``;
    the settings go to ``settings_param`` (by keyword, or sixth when positional-only), never elsewhere."""
    rec = _Recorder(view)
    v = view.vocab_size

    def body(tick: Ticker) -> int:
        rounds = 0
        for i in range(n):
            seq = _prompt(rng, v, view.settings)
            view.prompt_len, limit = len(seq), len(seq) + length
            extra, kw = settings_arguments(settings_param, RequestSettings.of(view.settings, prompt_len=len(seq)))
            step_rng = np.random.default_rng(rng.integers(2**63))
            while len(seq) < limit:
                view.asked, view.passes, view.pass_start = [], [], -1
                tick()
                out = _check_step_output(
                    step(list(seq), view.draft, view.target, gamma, step_rng, *extra, **kw), gamma, v, name
                )
                stop = view.settings.stop_at(out)  # the request ends at its first stop (an engine's stop check)
                rec.emit(seq, out if stop is None else out[: stop + 1], i, gamma, limit)
                rounds += 1
                if stop is not None:
                    break
        return rounds

    return rec.generation(run_guarded(body, timeout=timeout, what=name))


def run_generator(
    generate: Callable[..., Any],
    view: SequenceView,
    *,
    n: int,
    length: int,
    rng: np.random.Generator,
    timeout: float | None,
    name: str,
) -> Generation:
    """``n`` sequences from ``generate(prompt, max_new_tokens, seed, model)`` (one 'round' each)."""
    rec = _Recorder(view)
    v = view.vocab_size

    def body(tick: Ticker) -> int:
        for i in range(n):
            prompt = _prompt(rng, v, view.settings)
            view.prompt_len = len(prompt)
            tick()
            ids = as_token_ids(generate(list(prompt), length, int(rng.integers(2**31)), view), name)
            out: list[int] = ids[:length].tolist()
            if len(out) < length or any(t < 0 or t >= v for t in out):
                raise MalformedOutputError(f"{name} returned {out}; expected {length} ids in [0, {v})")
            # a black box shows no round positions: one stratum
            rec.record(list(prompt), out, i, len(prompt) + len(out), positions=False)
            rec.n_acc.append(0)
        return n

    g = rec.generation(run_guarded(body, timeout=timeout, what=name))
    g.drafts, g.drafts_from_implementation = None, False
    return g
