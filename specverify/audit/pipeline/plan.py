"""Plan: which units an audit samples, and the test family (rates, strata, sample size) of each.

A unit is one (sampling setting, model pair) cell. The family-wise false-fail rate alpha is split
by Bonferroni across units; inside a unit, half goes to the sequential e-process (which may stop
sampling early on gross bugs) and half to the fixed-n family, where Holm runs across the stream
strata (positions in the round, and pooled) and the white-box strata. A unit's plan is met when
its smallest stratum holds the tokens that detect a deviation of TV >= eps with probability
>= 1 - beta at the first Holm step (:func:`specverify.stats.min_samples_for_tv`).

Pairs per setting (``Adapter.pair_kinds``): implementations written by users get a low-overlap
pair (mean acceptance about 0.3, with zero-heavy and disjoint rows) and a high-overlap pair (about
0.95, with draft == target rows), because bugs of the rejection path hide under high overlap and
bugs of the all-accepted path under low overlap. The parity grid (``--logits``) runs every setting
after the first on one pair, the kinds in turn, unless ``parity_pairs='both'``. Round steps and
generators see whole prefixes on order-2, position-dependent context pairs
(:mod:`specverify.harness`); kernels see positional rows; the catalogue keeps its one tuned pair
per setting.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...dists import SamplingSettings
from ...errors import SpecVerifyError
from ...harness import make_context_pair, make_model_pair
from ...lm.synthetic import make_markov_pair, make_positional_pair
from ...stats import (
    WHITEBOX_CONTEXT_STRATA,
    WHITEBOX_STRATA_WITH_DRAFTS,
)
from ...stats._block import WHITEBOX_BLOCK_STRATA
from .config import Harness, PairKind, ParityPairs, StrataRule, TestFamily

if TYPE_CHECKING:
    from ..sources.adapters import Adapter
    from .config import AuditConfig

__all__ = [
    "DEFAULT_SETTINGS",
    "PARITY_GRID",
    "TestFamily",
    "AuditUnit",
    "AuditPlan",
    "plan_audit",
    "KIND_ALPHA",
    "strata_of",
    "smallest_stratum",
    "offset_buckets",
    "offsets_in_sequence",
]

DEFAULT_SETTINGS = (
    SamplingSettings(),
    SamplingSettings(temperature=0.7, top_p=0.9),
    SamplingSettings(temperature=0.9, top_k=12, top_p=0.85, min_p=0.08),
)

#: Settings audited for implementations that apply the settings themselves (--logits): each knob
#: alone, so that a FAIL names the knob, then all of them together.
PARITY_GRID = (
    SamplingSettings(temperature=1.0),
    SamplingSettings(temperature=0.6),
    SamplingSettings(temperature=1.5),
    SamplingSettings(top_p=0.8),
    SamplingSettings(top_k=2),
    SamplingSettings(top_k=5),
    SamplingSettings(min_p=0.1),
    SamplingSettings(repetition_penalty=1.3),
    # presence and frequency count the generated tokens only (a round step reads settings.prompt_len)
    SamplingSettings(presence_penalty=1.5),
    SamplingSettings(frequency_penalty=1.0),
    # a logit bias (OpenAI / vLLM: added to the raw logits first) that puts real mass on id 0
    SamplingSettings(logit_bias=((0, 3.0), (1, -3.0))),
    SamplingSettings(
        temperature=0.8,
        top_k=5,
        top_p=0.8,
        min_p=0.1,
        repetition_penalty=1.3,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        # together with temperature 0.8 and the truncations: where the bias goes in the order shows
        logit_bias=((0, 3.0), (1, -3.0)),
    ),
)

#: tokens per sequence that a long unit's batches and ``--rounds`` are scaled against
LONG_UNIT_BASE = 32

#: a stop unit's requests per ``--rounds`` sequence: at ``STOP_MASS`` per token a request of at most
#: ``LONG_UNIT_BASE`` tokens ends after (1 - 0.95^32) / 0.05 = 16 on average, half a sequence
STOP_UNIT_SEQUENCES = 2

#: mean mass the stop unit's stop ids carry under the target (an EOS that ends about one request in
#: twenty tokens: many requests end mid-round, and the ids are drafted and accepted mid-block)
STOP_MASS = 0.05


def offset_buckets(length: int) -> tuple[tuple[int, int], ...]:
    """Offset ranges of a long unit tested on their own (FAIL only): block boundaries at 64, 128,
    256 and 512 fall between them, so a bug from some offset on shows in its bucket undiluted."""
    edges = [e for e in (0, 64, 128, 256, 512, 1024, 2048) if e < length] + [length]
    return tuple(zip(edges, edges[1:]))


def offsets_in_sequence(sequence: np.ndarray) -> np.ndarray:
    """[N] offset of each token within its sequence (0 = first generated), for tokens stored in
    order with each sequence's tokens contiguous (as the drivers record them)."""
    sequence = np.asarray(sequence)
    n = len(sequence)
    if not n:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.nonzero(np.diff(sequence))[0] + 1])
    out: np.ndarray = np.arange(n) - np.repeat(starts, np.diff(np.concatenate([starts, [n]])))
    return out


#: mean acceptance of the kernel-level pairs of each kind
KIND_ALPHA = {"low": 0.3, "high": 0.95}


@dataclasses.dataclass(frozen=True)
class AuditUnit:
    index: int
    setting_index: int
    settings: SamplingSettings
    pair_kind: PairKind  # 'default' (the catalogue's tuned pair), 'low', 'high'
    family: TestFamily
    strata_rule: StrataRule  # 'positions' (tail under 5% pooled), 'first-later', 'pooled'
    batch: int  # rounds (kernel, catalogue) or sequences (round steps, generators) per batch
    length: int | None = None  # tokens per sequence of a long unit (round steps, generators); None: the adapter's
    vocab: int | None = None  # a kernel unit's own vocabulary (the tail of a tile, heavy edge ids); None: cfg.vocab

    def rounds_cap(self, rounds: int | None) -> int | None:
        """``--rounds`` as this unit's sequences: a long unit draws the tokens of ``rounds`` sequences of
        ``LONG_UNIT_BASE`` tokens in fewer, longer ones, a stop unit in more, shorter ones (its requests
        end at a stop after about 16 tokens), so a fixed size costs every unit alike."""
        if not rounds:
            return rounds
        if self.settings.stop_token_ids and not self.length:
            return rounds * STOP_UNIT_SEQUENCES
        if not self.length:
            return rounds
        return max(1, math.ceil(rounds * LONG_UNIT_BASE / self.length))

    def as_rounds(self, sequences: int) -> int:
        """The ``--rounds`` that give this unit ``sequences`` sequences (the inverse of :meth:`rounds_cap`)."""
        if self.settings.stop_token_ids and not self.length:
            return math.ceil(sequences / STOP_UNIT_SEQUENCES)
        return math.ceil(sequences * self.length / LONG_UNIT_BASE) if self.length else sequences

    @property
    def is_stop_unit(self) -> bool:
        """A round step's stop unit: stop ids, and its stop count sized into the family (``TestFamily.extra``)."""
        return bool(self.settings.stop_token_ids and self.family.extra)

    @property
    def label(self) -> str:
        pair = "" if self.pair_kind == "default" else f" / {self.pair_kind}-overlap pair"
        long = f" / {self.length} tokens" if self.length else ""
        vocab = f" / vocabulary {self.vocab}, ids 0 and {self.vocab - 1} heavy" if self.vocab else ""
        return f"settings[{self.setting_index}] {self.settings.short()}{long}{vocab}{pair}"

    def make_pair(self, harness: Harness, cfg: AuditConfig) -> Any:
        """The unit's model pair (pairs of several kinds share one duck-typed interface)."""
        seed = cfg.seed * 1000 + self.setting_index
        s = self.settings
        if harness == "context" and cfg.context == "transformers":
            return make_model_pair(cfg.vocab, self.pair_kind, seed=seed)
        if harness == "context" and s.stop_token_ids:  # the stop unit: its stop ids carry real mass
            return stop_heavy(make_context_pair(cfg.vocab, self.pair_kind, seed=seed, settings=s), s.stop_token_ids)
        if harness == "context":
            return make_context_pair(cfg.vocab, self.pair_kind, seed=seed, settings=s)
        alpha = KIND_ALPHA.get(self.pair_kind, cfg.target_alpha)
        if harness == "sequence":
            return make_markov_pair(cfg.vocab, alpha=alpha, seed=seed, settings=s)
        if self.vocab:
            return _edge_heavy(make_positional_pair(self.vocab, cfg.gamma, alpha=alpha, seed=seed, settings=s))
        return make_positional_pair(cfg.vocab, cfg.gamma, alpha=alpha, seed=seed, settings=s)


#: logit added to ids 0 and V - 1 of the odd-vocabulary kernel unit (draft and target alike): a
#: shortcut keyed on an edge id (a padding or EOS id treated specially) meets a token with real mass
EDGE_LOGIT = 2.5


def odd_vocab(vocab: int) -> int:
    """The odd-vocabulary unit's size: about 1.5 x ``vocab`` and never a multiple of 8 (so never of
    64 or 8192), so a kernel that pads the vocabulary to a tile has a tail (vllm#44744)."""
    v = vocab + vocab // 2 + 5
    return v + 1 if v % 8 == 0 else v


def _edge_heavy(pair: Any) -> Any:
    for table in (pair.target_logits, pair.draft_logits):
        table[:, [0, -1]] += EDGE_LOGIT
    return pair


def stop_heavy(pair: Any, stops: tuple[int, ...], mass: float = STOP_MASS) -> Any:
    """``pair`` with one logit added to the ``stops`` ids of every target and draft row, chosen so that
    they carry ``mass`` of the target's probability on average (draft and target move together, so
    the stops are drafted, accepted and rejected like any token)."""
    ids = list(stops)

    def mean_mass(shift: float) -> float:
        z = pair.target_logits.copy()
        z[:, ids] += shift
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return float((e[:, ids].sum(1) / e.sum(1)).mean())

    lo, hi = -20.0, 20.0
    for _ in range(50):  # bisection: the mean mass grows with the shift
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_mass(mid) < mass else (lo, mid)
    target, draft = pair.target_logits.copy(), pair.draft_logits.copy()
    target[:, ids] += lo
    draft[:, ids] += lo
    return dataclasses.replace(pair, target_logits=target, draft_logits=draft)


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A setting (or a whole audit, ``settings`` None) the plan leaves out, and why."""

    settings: SamplingSettings | None
    why: str

    @property
    def what(self) -> str:
        return self.settings.short() if self.settings is not None else "every sampling setting"

    def __str__(self) -> str:
        return f"{self.what}: {self.why}"


@dataclasses.dataclass(frozen=True)
class AuditPlan:
    units: tuple[AuditUnit, ...]
    settings: tuple[SamplingSettings, ...]
    skipped: tuple[Skipped, ...] = ()  # settings left out, with the reason

    def need(self, unit: AuditUnit) -> int:
        return unit.family.tokens_per_stratum()


#: stream strata (pooled included) of each rule, None: positions 0..gamma plus pooled
_STRATA = {"positions": None, "first-later": 3, "pooled": 1}


def plan_audit(adapter: Adapter, cfg: AuditConfig) -> AuditPlan:
    """The units and their families for ``adapter`` under ``cfg`` (see the module docstring)."""
    if cfg.parity_pairs not in ("alternate", "both"):
        raise SpecVerifyError(f"parity_pairs={cfg.parity_pairs!r}: pass 'alternate' (the default) or 'both'")
    settings = tuple(cfg.settings) if cfg.settings else (PARITY_GRID if adapter.logits else DEFAULT_SETTINGS)
    skipped = []
    if adapter.greedy:  # a greedy implementation is audited by the exact greedy check only
        return AuditPlan((), settings, (Skipped(None, "the implementation decodes greedily (exact check only)"),))
    keep = []
    told = adapter.harness != "context" or adapter.takes_settings or adapter.greedy
    if not told and all(s.is_greedy for s in settings):
        raise SpecVerifyError(
            "temperature 0 only: a round step or generator that is not handed the settings cannot be told to decode "
            "greedily, so nothing would be audited; give the step a `settings` parameter, audit a greedy "
            "implementation with --greedy (greedy=True), or audit a temperature > 0"
        )
    for s in settings:
        if s.is_greedy and not told:
            skipped.append(Skipped(s, "greedy, but the implementation is not handed the settings (no greedy check)"))
        elif s.is_greedy:
            skipped.append(Skipped(s, "greedy, covered by the exact greedy check"))
        elif s.uses_history and adapter.harness != "context":
            skipped.append(Skipped(s, "penalties need a history; kernels and the catalogue see none"))
        else:
            keep.append(s)
    rule = adapter.strata_rule
    strata = _STRATA[rule] or cfg.gamma + 2
    # White-box strata for a declared full rule: on positional rows (kernels, the catalogue's kernel
    # samplers) and on context rows (round steps); the catalogue's order-1 sequence samplers carry
    # their own context and are tested on their output stream only.
    whitebox = 0
    if getattr(adapter, "rule", None) == "full" and adapter.harness != "sequence":
        whitebox = WHITEBOX_CONTEXT_STRATA if adapter.harness == "context" else WHITEBOX_STRATA_WITH_DRAFTS
    if getattr(adapter, "rule", None) == "block" and adapter.harness != "sequence":
        whitebox = WHITEBOX_BLOCK_STRATA  # block verification's strata (specverify.stats._block)
    kinds = adapter.pair_kinds
    cells: list[tuple[int, SamplingSettings, PairKind, int | None]] = [
        (i, s, k, None)
        for i, s in enumerate(settings)
        if s in keep
        for k in _kinds_for(adapter, kinds, i, cfg.parity_pairs)
    ]
    if adapter.harness == "context" and cfg.long_length and cells:  # long outputs: block boundaries crossed
        i, s = cells[0][0], cells[0][1]
        cells.append((i, s, "low" if "low" in kinds else kinds[0], cfg.long_length))
    stop_cell = _stop_cell(adapter, cfg, cells, kinds)
    cells += stop_cell
    vocab_units = adapter.harness == "kernel" and "low" in kinds and cells  # kernels only: tiles live there
    fam = TestFamily(cfg.alpha / max(len(cells) + bool(vocab_units), 1), cfg.beta, cfg.eps, strata, whitebox, serial=1)
    batch = cfg.batch if adapter.harness != "context" else max(1, cfg.batch // 16)
    units = [
        AuditUnit(u, i, s, k, _family_of(fam, s, n, adapter), rule, _batch_of(batch, n, s, adapter), length=n)
        for u, (i, s, k, n) in enumerate(cells)
    ]
    if vocab_units:
        units.append(
            AuditUnit(len(units), cells[0][0], cells[0][1], "low", fam, rule, batch, vocab=odd_vocab(cfg.vocab))
        )
    return AuditPlan(tuple(units), settings, tuple(skipped))


def _stop_cell(
    adapter: Adapter, cfg: AuditConfig, cells: list[Any], kinds: tuple[PairKind, ...]
) -> list[tuple[int, SamplingSettings, PairKind, int | None]]:
    """The stop unit of a round step (none for other shapes, or with ``stop_token_ids=()``): the first
    setting with stop ids that carry real mass; requests end at the first stop (the driver cuts the
    round there, as an engine's stop check does), and where they end is counted against the law."""
    if not (cells and getattr(adapter, "request_stops", False) and cfg.stop_token_ids != ()):
        return []
    stops = cfg.stop_token_ids or (cfg.vocab - 1,)
    if max(stops) >= cfg.vocab:
        raise SpecVerifyError(
            f"stop_token_ids={list(stops)}: ids must be below the vocabulary of {cfg.vocab}; pick ids in "
            f"[0, {cfg.vocab}) or () for no stop unit"
        )
    i, s = cells[0][0], cells[0][1]
    # the low-overlap pair: a stop drafted there is rejected as often as the law says, so a step that
    # takes a drafted stop without the test (openvino.genai#3293) moves the law of where requests end
    return [(i, dataclasses.replace(s, stop_token_ids=tuple(stops)), "low" if "low" in kinds else kinds[0], None)]


def _batch_of(batch: int, length: int | None, s: SamplingSettings, adapter: Adapter) -> int:
    """Sequences per batch: a long unit's hold the tokens of ``batch`` sequences of ``LONG_UNIT_BASE``,
    and a stop unit's too (its requests are about half as long)."""
    if length:
        return max(1, batch * LONG_UNIT_BASE // length)
    return batch * STOP_UNIT_SEQUENCES if s.stop_token_ids and getattr(adapter, "request_stops", False) else batch


def _family_of(fam: TestFamily, s: SamplingSettings, length: int | None, adapter: Adapter) -> TestFamily:
    """A long unit's family holds its offset buckets; a stop unit's holds the count of where requests
    end and no white-box strata (a round cut at a stop is not a round of the rule)."""
    if length:
        return dataclasses.replace(fam, extra=len(offset_buckets(length)))
    if s.stop_token_ids and getattr(adapter, "request_stops", False):
        return dataclasses.replace(fam, whitebox=0, extra=1)
    return fam


def _kinds_for(
    adapter: Adapter, kinds: tuple[PairKind, ...], setting_index: int, parity_pairs: ParityPairs
) -> tuple[PairKind, ...]:
    """Parity grids are long: unless ``parity_pairs`` is 'both', each setting after the first runs on
    one pair, alternating the kinds (so a knob is shown rejections or full acceptances, not both)."""
    if adapter.logits and len(kinds) > 1 and setting_index > 0 and parity_pairs == "alternate":
        return (kinds[setting_index % len(kinds)],)
    return kinds


def strata_of(position: np.ndarray, rule: StrataRule) -> np.ndarray:
    """Stream stratum of every token from its position in the round (never from its value)."""
    position = np.asarray(position)
    if rule == "pooled":
        return np.zeros_like(position)
    if rule == "first-later":
        return np.asarray(np.minimum(position, 1))
    counts = np.bincount(position) if len(position) else np.zeros(1, int)
    share = counts / max(counts.sum(), 1)
    ok = np.nonzero(share >= 0.05)[0]
    return np.asarray(np.minimum(position, int(ok.max()) if len(ok) else 0))


def smallest_stratum(position: np.ndarray, rule: StrataRule) -> int:
    """Tokens in the thinnest stream stratum: a unit's plan is met when it reaches the plan's need."""
    if not len(position):
        return 0
    return int(np.bincount(strata_of(position, rule)).min())
