"""Context models: seeded draft/target pairs whose law depends on more than the last token.

A :class:`ContextPair` keys its rows on the last ``order`` tokens of the whole prefix and, when
``positional``, on the prefix's length (so KV-block or position logic that hands the model a wrong
prefix changes the law); the key is hashed to one of ``M`` rows of a logits table. The rows are
LLM-like (:func:`specverify.lm.synthetic.llm_like_logits`) and the draft is the target plus tuned
noise, so the mean acceptance is controlled. Kinds (``PAIR_KINDS``):

* ``low``: mean acceptance about 0.3; a quarter of the rows are zero-heavy (target and draft each
  mask a different 40% of the vocabulary) and one row in sixteen has disjoint supports, so
  rejections, replacements and p(x) = 0 drafts are frequent;
* ``high``: mean acceptance about 0.95 and a quarter of the rows with draft == target, so every
  position of a round, the bonus included, is reached often;
* ``greedy``: raw rows built for greedy audits: exact ties on the top (the draft favours the
  higher-id tied token), near ties (top-two logit margin 1e-6), and rows whose draft argmax
  differs from the target's; the draft agrees with the target's argmax on about 82% of rows, so
  the bonus position is reached in about 45% of the rounds at gamma 4.

Row of a prefix (shapes: V vocabulary, M rows, k = order):
    window = prefix[-k:] left-padded with V (start symbol); key = (len(prefix) if positional, window)
    row = exact index when the key space fits M, else splitmix64(key) mod M.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..dists import GREEDY, SamplingSettings, probs_from_logits, token_counts
from ..lm.synthetic import TablePair, llm_like_logits, tune_draft_noise
from ._records import Generation

__all__ = ["ContextPair", "PAIR_KINDS", "make_context_pair", "greedy_raw_run", "history_counts"]

PAIR_KINDS = ("low", "high", "greedy")
_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


@dataclasses.dataclass(eq=False)
class ContextPair(TablePair):
    """Target and draft tables [M, V] keyed on (position, last ``order`` tokens)."""

    order: int = 2
    positional: bool = True
    kind: str = "custom"
    salt: int = 0
    _order2_dense = False  # (not a field) set in __post_init__; a pair pickled before it reads the general path

    def __post_init__(self) -> None:
        for t in (self.target_logits, self.draft_logits):
            t.flags.writeable = False
        self._rows: dict[
            tuple[int, tuple[int, ...]], int
        ] = {}  # (length, window) -> row: the hash is the driver's hot spot
        self._v = self.vocab_size  # the start symbol (a property read on the hot path otherwise)
        # small key spaces: every window's row of one length, hashed at once (row_of's fast path)
        dense = (self._v + 1) ** self.order <= _DENSE_WINDOWS
        self._dense: dict[int, list[int]] | None = {} if dense else None
        self._order2_dense = dense and self.order == 2  # the default pairs: row_of's inline path

    # the base methods are lru_cache wrappers, which mypy cannot match a plain method against
    def target_table(  # type: ignore[override]
        self, settings: SamplingSettings | None = None
    ) -> npt.NDArray[np.float64]:
        """[M, V] processed target probabilities, read-only (rows handed over are views of it)."""
        return _frozen(super().target_table(settings))

    def draft_table(  # type: ignore[override]
        self, settings: SamplingSettings | None = None
    ) -> npt.NDArray[np.float64]:
        return _frozen(super().draft_table(settings))

    @property
    def n_rows(self) -> int:
        return int(self.target_logits.shape[0])

    @property
    def start_context(self) -> int:
        return self.vocab_size

    def label(self) -> str:
        pos = "+position" if self.positional else ""
        return f"{self.kind} (order {self.order}{pos}, mean acceptance {self.mean_acceptance():.2f})"

    def row_of(self, prefix: Sequence[int]) -> int:
        """Row of the law of the token that follows ``prefix`` (a sequence of ids)."""
        n = len(prefix)
        if self._order2_dense and n >= 2:  # the hot path, inline (a call per token costs as much)
            a, b, v = prefix[n - 2], prefix[n - 1], self._v
            table = self._dense.get(n if self.positional else 0)  # type: ignore[union-attr]
            if table is not None and type(a) is int and type(b) is int and 0 <= a < v and 0 <= b < v:
                return table[a * (v + 1) + b]
        return self._row_at(prefix, n)

    def rows_at(self, lengths: npt.ArrayLike, windows: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """[N] rows of N prefixes known only by their lengths [N] and last ``order`` ids [N, order]
        (the start symbol, ``vocab_size``, before a prefix's first token): :meth:`row_of` vectorised
        for callers that build contexts from tails (the diagnosis's wrong-context rows)."""
        v, k = self._v, self.order
        w = np.asarray(windows, dtype=np.int64).reshape(-1, k)
        if not self.positional and (v + 1) ** k <= self.n_rows:
            idx = np.zeros(len(w), dtype=np.int64)
            for j in range(k):
                idx = idx * (v + 1) + w[:, j]
            return idx
        n = np.asarray(lengths, dtype=np.int64) if self.positional else np.zeros(len(w), dtype=np.int64)
        h = n.astype(np.uint64) ^ np.uint64(self.salt)
        for j in range(k):
            h = _splitmix64_array(h ^ (w[:, j].astype(np.uint64) + np.uint64(1)))
        out: npt.NDArray[np.int64] = (_splitmix64_array(h) % np.uint64(self.n_rows)).astype(np.int64)
        return out

    def rows_along(self, seq: Sequence[int], start: int, stop: int) -> list[int]:
        """Rows of the prefixes ``seq[:t]`` for t in [start, stop)."""
        out: list[int] = []
        fast, dense, v, positional = self._order2_dense, self._dense, self._v, self.positional
        for t in range(start, stop):
            if fast and t >= 2:  # row_of's hot path, inline
                a, b = seq[t - 2], seq[t - 1]
                table = dense.get(t if positional else 0)  # type: ignore[union-attr]
                if table is not None and type(a) is int and type(b) is int and 0 <= a < v and 0 <= b < v:
                    out.append(table[a * (v + 1) + b])
                    continue
            out.append(self._row_at(seq, t))
        return out

    def _row_at(self, seq: Sequence[int], n: int) -> int:
        """Row of ``seq[:n]``: from the dense table of its length where the window's ids allow,
        else hashed (and remembered)."""
        if self._dense is not None:
            row = self._dense_row(seq, n)
            if row is not None:
                return row
        k = self.order
        key = (n, tuple(seq[max(0, n - k) : n]) if k else ())
        row = self._rows.get(key)
        if row is None:
            if len(self._rows) > 1_000_000:
                self._rows.clear()
            row = self._rows[key] = self._row_of(key[0], key[1])
        return row

    def _dense_row(self, seq: Sequence[int], n: int) -> int | None:
        """Row of ``seq[:n]`` from the dense table of its length; None when a window id is not a
        vocabulary id (an implementation's own prefix): the hash path then gives the same row."""
        v, k = self._v, self.order
        idx = 0
        for i in range(n - k, n):
            t = seq[i] if i >= 0 else v  # before the prefix: the start symbol
            if type(t) is not int:
                if not isinstance(t, np.integer):
                    return None
                t = int(t)  # numpy's small integer types would overflow in idx
            if not 0 <= t <= v or (t == v and i >= 0):
                return None
            idx = idx * (v + 1) + t
        rows = self._dense.get(n if self.positional else 0)  # type: ignore[union-attr]
        if rows is None:
            length = n if self.positional else 0
            rows = self._dense[length] = _dense_rows(self, length)  # type: ignore[index]
        return rows[idx]

    def _row_of(self, length: int, last: tuple[int, ...]) -> int:
        v, k = self.vocab_size, self.order
        window = [v] * (k - len(last)) + [int(t) for t in last]
        if not self.positional and (v + 1) ** k <= self.n_rows:
            idx = 0
            for t in window:
                idx = idx * (v + 1) + t
            return idx
        h = self.salt ^ (length if self.positional else 0)
        for t in window:
            h = _splitmix64(h ^ (t + 1))
        return _splitmix64(h) % self.n_rows

    def law_logits(self, prefix: Sequence[int], *, draft: bool = False) -> npt.NDArray[np.float64]:
        """Raw logits [V] (read-only) for the token after ``prefix``."""
        row: npt.NDArray[np.float64] = (self.draft_logits if draft else self.target_logits)[self.row_of(prefix)]
        return row

    def law_probs(
        self, prefix: Sequence[int], settings: SamplingSettings | None, *, draft: bool = False, n_prompt: int = 0
    ) -> npt.NDArray[np.float64]:
        """Processed probabilities [V] for the token after ``prefix`` under ``settings``; laws that
        depend on the history are computed from ``prefix``, whose first ``n_prompt`` tokens are the
        prompt (:func:`history_counts`)."""
        if settings is not None and settings.uses_history:
            seen, out = history_counts(prefix, n_prompt, settings, self.vocab_size)
            return probs_from_logits(
                self.law_logits(prefix, draft=draft), settings, seen_counts=seen, output_counts=out
            )
        table = self.draft_table(settings) if draft else self.target_table(settings)
        row: npt.NDArray[np.float64] = table[self.row_of(prefix)]
        return row


#: key spaces (vocab + 1) ** order up to this size get a dense row table per length
_DENSE_WINDOWS = 1 << 16


def _splitmix64_array(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`_splitmix64` on uint64 arrays (numpy's unsigned arithmetic wraps mod 2**64 alike)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: npt.NDArray[np.uint64] = x ^ (x >> np.uint64(31))
    return out


def _dense_rows(pair: ContextPair, length: int) -> list[int]:
    """Row of every window (base vocab + 1 digits, the start symbol = vocab) at one prefix length,
    exactly as :meth:`ContextPair._row_of` hashes them one at a time."""
    v, k = pair.vocab_size, pair.order
    idx = np.arange((v + 1) ** k, dtype=np.int64)
    if not pair.positional and (v + 1) ** k <= pair.n_rows:
        return idx.tolist()  # type: ignore[no-any-return]
    digits = [(idx // (v + 1) ** (k - 1 - j)) % (v + 1) for j in range(k)]  # most significant first
    h = np.full(idx.shape, pair.salt ^ length, dtype=np.uint64)
    for d in digits:
        h = _splitmix64_array(h ^ (d.astype(np.uint64) + np.uint64(1)))
    return (_splitmix64_array(h) % np.uint64(pair.n_rows)).astype(np.int64).tolist()  # type: ignore[no-any-return]


def _frozen(a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    a.flags.writeable = False
    return a


def _mask_rows(
    rng: np.random.Generator,
    target: npt.NDArray[np.float64],
    draft: npt.NDArray[np.float64],
    rows: npt.NDArray[np.int64],
    frac: float,
) -> None:
    """Target and draft each lose a different ``frac`` of the vocabulary on ``rows``."""
    v = target.shape[1]
    for r in rows:
        target[r, rng.choice(v, int(frac * v), replace=False)] = -np.inf
        draft[r, rng.choice(v, int(frac * v), replace=False)] = -np.inf


def _disjoint_rows(
    rng: np.random.Generator,
    target: npt.NDArray[np.float64],
    draft: npt.NDArray[np.float64],
    rows: npt.NDArray[np.int64],
) -> None:
    v = target.shape[1]
    for r in rows:
        half = rng.permutation(v)
        target[r, half[: v // 2]] = -np.inf
        draft[r, half[v // 2 :]] = -np.inf


def _greedy_rows(rng: np.random.Generator, target: npt.NDArray[np.float64], draft: npt.NDArray[np.float64]) -> None:
    """Exact ties, near ties and argmax disagreements on raw rows (see the module docstring)."""
    m, v = target.shape
    kind = rng.choice(4, (m,), p=[0.8, 0.08, 0.04, 0.08])  # plain, exact tie, near tie, draft disagrees
    for r in range(m):
        order = np.argsort(-target[r], kind="stable")
        a, b = sorted(order[:2].tolist())
        if kind[r] == 1:  # exact tie: target-only greedy takes a (lowest id); the draft prefers b
            target[r, b] = target[r, a]
            draft[r] = target[r] - 0.5 * rng.random(v)
            draft[r, b] = target[r, a] + 0.2
        elif kind[r] == 2:  # near tie: margin 1e-6, in either direction
            top = target[r, order[0]]
            target[r, order[1]] = top - 1e-6
            draft[r] = target[r] + rng.normal(0, 0.05, v)
            draft[r, order[0]] = draft[r, order[1]] = top
        elif kind[r] == 3:  # the draft's argmax differs; the target's top keeps a large draft mass
            draft[r] = target[r] + rng.normal(0, 0.1, v)
            draft[r, order[1]] = target[r, order[0]] + 0.3
        else:
            draft[r] = target[r] + rng.normal(0, 0.1, v)
            draft[r, order[0]] = draft[r].max() + 0.1


def make_context_pair(
    vocab: int,
    kind: str = "high",
    *,
    order: int = 2,
    positional: bool = True,
    rows: int | None = None,
    seed: int = 0,
    settings: SamplingSettings | None = None,
) -> ContextPair:
    """A seeded :class:`ContextPair` of one of ``PAIR_KINDS`` (see the module docstring)."""
    if kind not in PAIR_KINDS:
        raise ValueError(f"kind={kind!r} is not a pair kind; use one of {PAIR_KINDS}")
    if vocab < 2:
        raise ValueError(f"vocab={vocab} is too small; use vocab >= 2")
    m = rows or int(min(512, max(16, (1 << 24) // vocab)))
    rng = np.random.default_rng([seed, PAIR_KINDS.index(kind)])
    target = llm_like_logits(rng, m, vocab)
    if kind == "greedy":
        draft = target.copy()
        _greedy_rows(rng, target, draft)
    else:
        draft = tune_draft_noise(rng, target, 0.3 if kind == "low" else 0.95, settings).copy()
        special = rng.permutation(m)[: m // 4]
        if kind == "low":
            _mask_rows(rng, target, draft, special[m // 16 :], 0.4)
            _disjoint_rows(rng, target, draft, special[: m // 16])
        else:
            draft[special] = target[special]
    return ContextPair(target, draft, order=order, positional=positional, kind=kind, salt=int(rng.integers(2**62)))


#: the greedy check's run on raw rows: sequences, and the seed's salt (the diagnosis repeats the run exactly)
GREEDY_RUN_SEQUENCES, GREEDY_RUN_SALT = 200, 99


def greedy_raw_run(
    generate: Callable[[ContextPair, int, int, np.random.Generator, SamplingSettings], Generation],
    vocab: int,
    gamma: int,
    seed: int,
) -> tuple[ContextPair, Generation]:
    """(pair, Generation) of the exact greedy check on raw rows (ties, near ties, draft disagreements),
    seeded: ``generate(pair, n, gamma, rng, settings)`` is an adapter's; the audit and its diagnosis
    both call this, so the diagnosis scores the very run that failed."""
    pair = make_context_pair(vocab, "greedy", seed=seed + GREEDY_RUN_SALT)
    rng = np.random.default_rng([seed, GREEDY_RUN_SALT])
    return pair, generate(pair, GREEDY_RUN_SEQUENCES, gamma, rng, GREEDY)


def history_counts(
    prefix: Sequence[int], n_prompt: int, settings: SamplingSettings, vocab: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(counts the repetition penalty sees, counts presence and frequency penalties see) [V] of a
    prefix whose first ``n_prompt`` tokens are the prompt: the repetition penalty counts the prompt
    too (unless ``penalize_prompt`` is False), presence and frequency the generated tokens only,
    each its last ``penalty_window`` tokens (:meth:`SamplingSettings.penalty_history`)."""
    seen, generated = settings.penalty_history(prefix, n_prompt)
    return token_counts(seen, vocab), token_counts(generated, vocab)
