"""The bug classes a diagnosis can name: one :class:`BugClass` record per class, in :data:`RECORDS`.

A record is everything the suite knows about a class: its mechanism, what to check in the code, the
real reports it was modelled on, its kind, the scorers (and exact-check signatures) that can name
it, the catalogue sampler that reproduces it (if any), and the law model the round scorer uses
(``model``), or, for a class with no round model, why not (``no_model_because``: another scorer, the
greedy, penalty or stream scorer or an exact check, names it). A catalogue class takes its name,
mechanism (the first paragraph of the sampler's docstring) and source from its sampler, so that the
sampler stays the one statement of its root cause. Adding a class is adding one record (and, for a
catalogue class, its sampler in :mod:`specverify.catalogue.bugs`).

Contracts: :data:`CLASSES` maps every name to its record; :func:`round_models` is the round
scorer's candidate list, the reference first and then the records' models in record order (the
order is the ranking's tie-break, so records with a model keep it); ``tests/test_bug_records.py``
checks that every record is complete and that every class any scorer can name has one.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Literal

from ..algorithms.block_verification import BlockVariant
from ..catalogue import block as blk
from ..catalogue import bugs as cat
from ..harness import ChainSampler
from . import _bug_models as law
from ._block_models import BlockVariantModel
from ._models import EPS, RoundModel

__all__ = ["BugClass", "Kind", "Scorer", "RECORDS", "CLASSES", "bug_class", "round_models"]

#: what part of an implementation a class gets wrong
Kind = Literal["rule", "settings", "state", "greedy", "structure"]
#: who can name a class: the round scorer (``_diagnose``), the token scorers (``_greedy``,
#: ``_penalty``, ``_stream``, ``_tree``) or the signature of an exact check (``_audit``)
Scorer = Literal[
    "rounds",
    "greedy",
    "penalty",
    "stream",
    "tree",
    "lm",
    "exact/boundary",
    "exact/reproducibility",
    "exact/seeds",
    "exact/request",
    "stop",
    "serial",
]
#: builds a fresh round model (models carry fitted parameters, so each diagnosis gets its own)
ModelFactory = Callable[[], RoundModel]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BugClass:
    """One bug class (module docstring)."""

    name: str
    mechanism: str  # what goes wrong, in one paragraph
    check: str  # what to look at in the code
    sources: tuple[str, ...]  # the real reports (or "structural mutant ...")
    kind: Kind
    named_by: tuple[Scorer, ...]  # the scorers and exact-check signatures that can name it
    model: ModelFactory | None  # the round scorer's law model; None when only another scorer names it
    no_model_because: str = ""  # why there is no round model (required when model is None)
    sampler: type[ChainSampler] | None = None  # the catalogue sampler that reproduces it


_ROUNDS: tuple[Scorer, ...] = ("rounds",)
_GREEDY_ONLY = "a greedy run is deterministic: the greedy scorer gives each token's law (_greedy.greedy_laws)"
_PENALTY_ONLY = "a penalised unit has no table of laws: the penalty scorer rebuilds each token's (_penalty)"
_LM_PENALTY = (
    "a request-level class: the LM scorer recomputes each token's law from its prefix (_lm), and the penalty scorer "
    "rebuilds it on round steps' penalised units (_penalty)"
)
_BOUNDARY_ONLY = "invisible to sampling (P(u = 0) is 2^-53): named by the exact boundary check's signature (_audit)"
_LM_ONLY = "a request-level class of LM audits: the LM scorer recomputes each token's law from its prefix (_lm)"
_REQUEST_ONLY = "an exact request-level finding of LM audits: named by its signature (_lm.REQUEST_SIGNATURES)"
_STOP_ONLY = "a round cut at a stop is no round of the rule: the stop scorer scores the stop unit's cut rounds (_stop)"
#: request classes the stop scorer also names on a round step's stop unit
_STOP_TOO = frozenset({"request_ended_early"})
_TREE_ONLY = "a tree round shows no chain of drafts: the tree scorer gives each round's first token its law (_tree)"
_STREAM_ONLY = "a black-box generator shows no rounds: the stream scorer rebuilds each token's law (_stream)"
#: block-rule mutants the tree scorer also names: traversal's wrong parent update, on a chain by its
#: round model and on the catalogue step's 2 x 2 tree from the first token of each round (_tree)
_ALSO_ON_TREES = frozenset({"traversal_remaining_mass_weight"})


#: request-level classes (name, mechanism, what to check, sources): tokens a request must not return
_REQUEST_CLASSES = (
    (
        "stop_missed_mid_round",
        "A round commits several tokens at once and the stop check looks at only part of them (the last committed "
        "token; or the length cap is checked first and a round that crosses it is cut there), so a stop accepted "
        "mid-round is emitted and generation goes on past it.",
        "the finish check after a round: scan every token the round committed, stops before the length cap",
        ("huggingface/transformers#47912", "sgl-project/sglang#31599"),
    ),
    (
        "request_ended_early",
        "A request finishes on a token the target did not emit as a stop: a stop proposed by the drafter is taken "
        "as the end before verification, or the finish check reads the draft block instead of the accepted tokens.",
        "which tokens the stop check reads: the accepted ones, after verification",
        ("huggingface/transformers#31301 (candidates cropped at a drafted EOS; a crop taken as the end)",),
    ),
    (
        "over_max_tokens",
        "The last round is not cut at max_new_tokens: a request returns more tokens than it asked for.",
        "the cut of the last round at the request's remaining budget",
        ("sgl-project/sglang#33758 (an accepted run that crosses max_new_tokens)",),
    ),
    (
        "id_outside_vocab",
        "A recovered or bonus token is drawn over the vocabulary padded to a kernel tile (or from an uninitialised "
        "buffer), so an id >= the vocabulary size comes back when the vocabulary is not a multiple of the tile.",
        "the residual / bonus sampling kernel: mask the padded tail of the last tile",
        ("vllm-project/vllm#44744",),
    ),
    (
        "logprobs_not_target",
        "The logprobs returned beside the ids are not the target's law of the true prefix: 0.0 for every token, "
        "the draft's row for accepted drafts, or the row of another position.",
        "where the logprobs of accepted drafts are gathered: the target's rows of the verification pass",
        ("ggml-org/llama.cpp#27972", "vllm-project/vllm#34497"),
    ),
)


def _first_paragraph(doc: str | None) -> str:
    return " ".join((inspect.cleandoc(doc or "").split("\n\n")[0]).split())


def _catalogue(
    sampler: type[ChainSampler],
    *,
    check: str,
    kind: Kind,
    model: ModelFactory | None,
    named_by: tuple[Scorer, ...] = _ROUNDS,
    no_model_because: str = "",
) -> BugClass:
    """The record of a catalogue class: name, mechanism and source read from its sampler."""
    return BugClass(
        name=sampler.name,
        mechanism=_first_paragraph(sampler.__doc__),
        check=check,
        sources=(sampler.source,),
        kind=kind,
        named_by=named_by,
        model=model,
        no_model_because=no_model_because,
        sampler=sampler,
    )


def _tables(sampler: type[ChainSampler], *, keeps_bias: bool = False) -> ModelFactory:
    """The model of a settings/dtype catalogue class: the full rule on the rows its hooks compute
    (``keeps_bias``: on the logits with the request's bias added; :class:`law.CatalogueTables`)."""
    return lambda: law.CatalogueTables(sampler, keeps_bias=keeps_bias)


def _knob_missing(knob: str) -> ModelFactory:
    return lambda: law.TargetKnobMissing(knob)


def _replacement(name: str, rows: law.RowLaw) -> ModelFactory:
    return lambda: law.Replacement(name, rows)


def _switch(name: str, fallback: Literal["p", "q"], *, below: bool) -> ModelFactory:
    return lambda: law.ResidualSwitch(name, fallback, below=below)


def _block(name: str, variant: BlockVariant) -> ModelFactory:
    return lambda: BlockVariantModel(name, variant)


def _order(name: str, steps: tuple[str, ...]) -> ModelFactory:
    return lambda: law.TargetOrder(name, steps)


def _ignored(knob: str, name: str) -> ModelFactory:
    return lambda: law.KnobIgnored(knob, name)


def _state(
    name: str, when: Literal["after_rejection", "flat"], *, lo: float = EPS, hi: float = 1 - EPS
) -> ModelFactory:
    return lambda: law.StateMismatch(name, when, lo=lo, hi=hi)


RECORDS: tuple[BugClass, ...] = (
    # -- settings and dtype: the rows a round uses are not the law the request asks for
    _catalogue(
        cat.RawQReported,
        check="the q handed to the verifier: it must be the processed (top-k/top-p) law drafts came from",
        kind="settings",
        model=_tables(cat.RawQReported),
    ),
    _catalogue(
        cat.TargetDefaultParams,
        check="the target's sampling settings: they are not the request's",
        kind="settings",
        model=_tables(cat.TargetDefaultParams),
    ),
    _catalogue(
        cat.MinPBonusOnly,
        check="min-p / logit bias: applied to the bonus row only, not to verified positions",
        kind="settings",
        model=_tables(cat.MinPBonusOnly),
    ),
    _catalogue(
        cat.TopKTopPOrder,
        check="the order of top-k and top-p in the speculative path (draft and target)",
        kind="settings",
        model=_tables(cat.TopKTopPOrder, keeps_bias=True),
    ),
    _catalogue(
        cat.Bf16Draft,
        check="the dtype drafts are sampled in versus the dtype of q in the ratio",
        kind="settings",
        model=_tables(cat.Bf16Draft),
    ),
    _catalogue(
        cat.TemperatureTwice,
        check="temperature: applied twice to the rows (sampler and verifier)",
        kind="settings",
        model=_tables(cat.TemperatureTwice, keeps_bias=True),
        named_by=("rounds", "lm"),
    ),
    _catalogue(
        cat.DraftSettingsNotForwarded,
        check="the draft's settings: it samples with defaults but reports q at the request's",
        kind="settings",
        model=_tables(cat.DraftSettingsNotForwarded),
    ),
    BugClass(
        name="target_missing_temperature",
        mechanism="Temperature is applied to the draft only; the target is sampled at temperature 1.",
        check="the target's sampling pipeline: apply the request's temperature",
        sources=("vllm-project/vllm#9834",),
        kind="settings",
        named_by=_ROUNDS,
        model=_knob_missing("temperature"),
    ),
    BugClass(
        name="target_missing_top_k",
        mechanism="top-k is applied to the draft only; the target keeps its whole vocabulary.",
        check="the target's sampling pipeline: apply top-k",
        sources=("vllm-project/vllm#15063",),
        kind="settings",
        named_by=_ROUNDS,
        model=_knob_missing("top_k"),
    ),
    BugClass(
        name="target_missing_top_p",
        mechanism="top-p is applied to the draft only; the target keeps its tail.",
        check="the target's sampling pipeline: apply top-p",
        sources=("vllm-project/vllm#15063",),
        kind="settings",
        named_by=_ROUNDS,
        model=_knob_missing("top_p"),
    ),
    BugClass(
        name="target_missing_min_p",
        mechanism="min-p is applied to the draft only; the target keeps its low-probability tail.",
        check="the target's sampling pipeline: apply min-p",
        sources=("vllm-project/vllm#42744",),
        kind="settings",
        named_by=_ROUNDS,
        model=_knob_missing("min_p"),
    ),
    BugClass(
        name="target_missing_knobs",
        mechanism=(
            "Two sampling knobs of the request (its parameter names them) are applied to the draft only; the "
            "target's law is computed without them."
        ),
        check="the target's sampling pipeline: every knob of the request, as the draft applies it",
        sources=("vllm-project/vllm#15063 (top-k / top-p on the draft only)", "vllm-project/vllm#42744 (min-p)"),
        kind="settings",
        named_by=_ROUNDS,
        model=law.TargetKnobsMissing,  # expanded to every pair of knobs by the round scorer (_diagnose._variants)
    ),
    BugClass(
        name="probabilities_as_logits",
        mechanism=(
            "Rows that are already probabilities go through the sampling pipeline as if they were logits: a softmax "
            "of probabilities, nearly uniform, with mass on tokens the request's law forbids. A round step that "
            "applies the settings to raw logits itself does this when it is audited without --logits."
        ),
        check=(
            "whether the step applies the sampling settings to raw logits itself: then audit it with --logits "
            "(logits=True); if not, the softmax or sampling pipeline run on rows that are already probabilities"
        ),
        sources=("structural: a --logits round step audited on probability rows (docs/examples/round_step_logits.py)",),
        kind="settings",
        named_by=_ROUNDS,
        model=law.ProbabilitiesAsLogits,
    ),
    BugClass(
        name="target_knob_value",
        mechanism=(
            "One sampling knob reaches the target (or the whole speculative path) at another value than the "
            "request's: a convention read differently (top_k = 0 as a count, a bias added by the caller and again "
            "by the pipeline), an off-by-one, a default that overrides the request. Its parameter names the knob, "
            "the value that fits and the side."
        ),
        check="the value each knob has where the target's (and the draft's) pipeline reads it, against the request",
        sources=(
            "structural family; met in the issue 25 study (tests/study_bugs9/parity.py: the bias added twice, "
            "top_k = 0 read as a count)",
        ),
        kind="settings",
        named_by=_ROUNDS,
        model=law.TargetKnobValue,  # expanded to every side, knob and value by the round scorer (_diagnose._variants)
    ),
    BugClass(
        name="top_p_before_temperature",
        mechanism="The target chooses the top-p nucleus before applying temperature.",
        check="the order of the target's sampling steps: temperature, then top-k, top-p, min-p",
        sources=("sgl-project/sglang#36173",),
        kind="settings",
        named_by=("rounds", "penalty"),
        model=_order("top_p_before_temperature", ("top_p", "temperature", "top_k", "min_p")),
    ),
    BugClass(
        name="target_temperature_twice",
        mechanism=(
            "The target's logits are divided by the temperature before its whole sampling pipeline runs (which "
            "divides again); the draft's are divided once, so the verified law is sharper than the request's."
        ),
        check="where the target's logits are scaled: once, in the sampling pipeline (not also by the model runner)",
        sources=("vllm-project/vllm-ascend#6685 (temperature misapplied when logits replaced probabilities)",),
        kind="settings",
        named_by=("rounds", "penalty"),
        model=law.TargetTemperatureTwice,
    ),
    BugClass(
        name="truncation_before_temperature",
        mechanism="The target applies top-k, top-p and min-p before temperature (the draft after it).",
        check="the order of the target's sampling steps: temperature first, then top-k, top-p, min-p",
        sources=("sgl-project/sglang#36173 (the order family)", "huggingface/transformers#26403 (warpers' order)"),
        kind="settings",
        named_by=("rounds", "penalty"),
        model=_order("truncation_before_temperature", ("top_k", "top_p", "min_p", "temperature")),
    ),
    BugClass(
        name="q_from_raw_logits",
        mechanism=(
            "Drafts are drawn from the processed draft law (temperature, truncation, bias, penalties), but the q "
            "of the ratio and the residual is the softmax of the draft's raw logits."
        ),
        check="the q handed to the verifier: the law the draft sampled from, after every processing step",
        sources=("huggingface/transformers#47932 (q not the law drafts were drawn from)",),
        kind="settings",
        named_by=("rounds",),
        model=law.DraftQFromRawLogits,
    ),
    BugClass(
        name="top_p_before_top_k_target",
        mechanism="The target applies top-p before top-k (the draft in the right order).",
        check="the order of the target's sampling steps: top-k before top-p",
        sources=("sgl-project/sglang#36173",),
        kind="settings",
        named_by=("rounds", "penalty"),
        model=_order("top_p_before_top_k_target", ("temperature", "top_p", "top_k", "min_p")),
    ),
    BugClass(
        name="temperature_in_ratio_only",
        mechanism=(
            "Temperature is used only inside the acceptance ratio; drafts, residual and bonus use untempered rows."
        ),
        check="every row of the round (drafts, ratio, residual, bonus) must use the tempered law",
        sources=("ohdearquant/lattice#388",),
        kind="settings",
        named_by=_ROUNDS,
        model=law.TemperatureInRatioOnly,
    ),
    # -- acceptance: the test that keeps a draft
    _catalogue(
        cat.AlwaysAccept,
        check="the acceptance count / mask: every draft is kept",
        kind="rule",
        model=law.AlwaysAccept,
        named_by=("rounds", "lm"),
    ),
    _catalogue(
        cat.UniformZero,
        check="the acceptance uniform: it is constant (0), not drawn",
        kind="rule",
        model=law.UniformZero,
    ),
    BugClass(
        name="zero_guard_accepts",
        mechanism="A division guard reads p(x) = 0 as ratio 1, so drafts the target forbids are kept.",
        check="the guard around p/q: a draft with p(x) = 0 must be rejected",
        sources=("sgl-project/sglang#35771 (same boundary)",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.ZeroGuard,
    ),
    BugClass(
        name="inverted_ratio",
        mechanism="Drafts are kept with probability min(1, q(x)/p(x)): the ratio is inverted.",
        check="the acceptance ratio: p(x) / q(x), target over draft",
        sources=("structural mutant (user-style suite)",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.InvertedRatio,
    ),
    _catalogue(
        cat.OrAccept,
        check="the acceptance condition: an exact-match fast path OR-ed with the ratio test",
        kind="rule",
        model=law.OrAccept,
    ),
    _catalogue(
        cat.OffByOneTargetRow,
        check="the target row the ratio reads: row j for draft j, not row j + 1",
        kind="rule",
        model=law.OffByOneTargetRow,
    ),
    _catalogue(
        cat.SameUniformAllPositions,
        check="the acceptance uniforms: one per position, not one per round",
        kind="rule",
        model=law.SameUniform,
    ),
    BugClass(
        name="draft_uniform_reused_for_acceptance",
        mechanism=(
            "The uniform that drew the draft by inverse CDF is reused in the acceptance test, so acceptance "
            "depends on where x fell in q's CDF."
        ),
        check="the random draws: the acceptance uniform must be fresh, not the draft's",
        sources=("vllm-project/vllm#47386",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.DraftUniformForAcceptance,
    ),
    _catalogue(
        cat.SharedNoise,
        check="the random streams: draft, acceptance and recovery share one noise source",
        kind="rule",
        model=law.SharedNoise,
    ),
    _catalogue(
        cat.ReuseAcceptUniform,
        check="the uniform of the residual draw: it reuses the acceptance uniform",
        kind="rule",
        model=law.ReuseAcceptUniform,
    ),
    # -- replacement and drafts: the law of the token after a rejection, and of the drafts
    _catalogue(
        cat.ResidualSoftmax,
        check="the renormalisation of max(0, p - q): divide by its sum, never softmax it",
        kind="rule",
        model=_replacement("residual_softmax", law.softmaxed_residual),
    ),
    _catalogue(
        cat.ReplacementFromP,
        check="the replacement after a rejection: it must come from (p - q)+, not p",
        kind="rule",
        model=_replacement("replacement_from_p", law.target_row),
    ),
    _catalogue(
        cat.ReplacementFromQ,
        check="the replacement after a rejection: it must come from (p - q)+, not q",
        kind="rule",
        model=_replacement("replacement_from_q", law.draft_row),
    ),
    _catalogue(
        cat.ResidualWrongSign,
        check="the residual: max(0, p - q), operands swapped",
        kind="rule",
        model=_replacement("residual_wrong_sign", law.swapped_residual),
    ),
    BugClass(
        name="residual_unclipped",
        mechanism=(
            "The residual is |p - q| instead of max(0, p - q): tokens the draft over-weights get replacement mass."
        ),
        check="the residual: clip at zero, max(0, p - q), never abs",
        sources=("structural mutant (user-style suite)",),
        kind="rule",
        named_by=_ROUNDS,
        model=_replacement("residual_unclipped", law.unclipped_residual),
    ),
    _catalogue(
        cat.ResidualNotNormalised,
        check="the residual draw: (p - q)+ must be normalised (or u scaled by its mass)",
        kind="rule",
        model=_replacement("residual_not_normalised", law.unnormalised_residual),
    ),
    BugClass(
        name="replacement_from_q_when_close",
        mechanism="A fallback draws the replacement from q when the residual mass is small ('draft ~ target').",
        check="the fallback of the residual: when (p - q)+ is tiny it must still be used (or p when it is exactly 0)",
        sources=("structural mutant (user-style suite)",),
        kind="rule",
        named_by=_ROUNDS,
        model=_switch("replacement_from_q_when_close", "q", below=True),
    ),
    BugClass(
        name="replacement_from_p_when_far",
        mechanism="A shortcut draws the replacement from p when the residual mass is large ('draft useless').",
        check="the shortcut in the residual: it is only exact when q = 0 on the residual's support",
        sources=("ShopeeLLM/Spec-RL#14",),
        kind="rule",
        named_by=_ROUNDS,
        model=_switch("replacement_from_p_when_far", "p", below=False),
    ),
    _catalogue(
        cat.DedupGreedyRatio,
        check="a deterministic (top-1) proposal verified with p/q_draft and p without x",
        kind="rule",
        model=law.DedupGreedyRatio,
    ),
    _catalogue(
        cat.ArgmaxDraftSoftQ,
        check="how draft tokens are chosen: argmax drafts need the one-hot rule, not p/q",
        kind="rule",
        model=law.ArgmaxDraft,
    ),
    BugClass(
        name="drafts_unconditioned",
        mechanism="All drafts are sampled from q(. | prefix) while each ratio uses q(. | prefix + drafts so far).",
        check="the draft loop: each draft must be sampled from the row of the prefix extended by the drafts before it",
        sources=("structural mutant (user-style suite)",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.DraftsUnconditioned,
    ),
    BugClass(
        name="recycled_drafts",
        mechanism="Drafts left over after a rejection (drawn after the rejected token) are proposed again next round.",
        check="draft caching across rounds: discard drafts after a rejection",
        sources=("structural mutant (user-style suite)",),
        kind="state",
        named_by=_ROUNDS,
        model=law.RecycledDrafts,
    ),
    # -- bonus: the token after a fully accepted round
    _catalogue(
        cat.BonusFromPreviousRow,
        check="the index of the bonus row: it must be row gamma, not gamma - 1",
        kind="rule",
        model=law.BonusPreviousRow,
        named_by=("rounds", "greedy"),
    ),
    BugClass(
        name="bonus_from_q",
        mechanism="When every draft is kept, the bonus is one more draft sample from q instead of a draw from p_gamma.",
        check="the bonus token: draw it from the target row gamma",
        sources=("structural mutant (user-style suite)",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.BonusFromQ,
    ),
    BugClass(
        name="bonus_argmax",
        mechanism="When every draft is kept, the bonus is argmax p_gamma instead of a sample.",
        check="the bonus token: sample it, do not take the argmax",
        sources=("structural mutant (user-style suite)",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.BonusArgmax,
    ),
    # -- block and traversal verification: a mutant of each rule (catalogue.block), its exact law the model
    *(
        BugClass(
            name=m.name,
            mechanism=m.mechanism,
            check=m.check,
            sources=(m.source,),
            kind="rule",
            named_by=_ROUNDS + (("tree",) if m.name in _ALSO_ON_TREES else ()),
            model=_block(m.name, m.variant),
        )  # fmt: skip
        for m in blk.MUTANTS
    ),
    # -- round structure and state
    _catalogue(
        cat.RejectOneLate,
        check="the rejection branch: the rejected draft is emitted before its replacement",
        kind="structure",
        model=law.RejectOneLate,
    ),
    _catalogue(
        cat.ContinueAfterRejection,
        check="the loop over drafts: it must stop (break) at the first rejection",
        kind="structure",
        model=law.ContinueAfterRejection,
    ),
    BugClass(
        name="bonus_after_rejection",
        mechanism=(
            "The bonus token is appended after the verify loop even when the loop broke at a rejection, so a "
            "rejected round emits its replacement and then a token from the bonus row, which conditions on drafts "
            "that were not emitted."
        ),
        check="the bonus draw: only when every draft was kept (Python's for ... else, or a flag set by the loop)",
        sources=(
            "written for the diagnosis after the study bug tests/study_bugs/stops.py:bonus_after_break (a lost "
            "for/else); openvinotoolkit/openvino.genai#4190 (tokens kept past a rejection)",
        ),
        kind="structure",
        named_by=_ROUNDS,
        model=law.BonusAfterRejection,
    ),
    BugClass(
        name="replacement_dropped_after_accepts",
        mechanism=(
            "At a rejection after some kept drafts the round ends at the kept drafts without a replacement; only a "
            "rejection at the first position is replaced. The rejected position is drafted and tested again next "
            "round, which biases it towards tokens the draft proposes."
        ),
        check="the rejection branch: a replacement from the residual is emitted at every rejection, whatever was kept",
        sources=(
            "written for the diagnosis after the study bug tests/study_bugs/stops.py:"
            "replacement_only_at_first_position; openvinotoolkit/openvino.genai#4190 (a rejection handled late)",
        ),
        kind="structure",
        named_by=_ROUNDS,
        model=law.ReplacementDroppedAfterAccepts,
    ),
    _catalogue(
        cat.NoKVRollback,
        check="the cache / context after a rejection: roll back the rejected draft and append the replacement",
        kind="state",
        model=_state("no_kv_rollback", "after_rejection"),
    ),
    BugClass(
        name="target_context_window",
        mechanism=(
            "The target sees only the last W tokens of the prefix (a rotating or sliding-window KV cache): every "
            "round past W tokens is verified on a truncated context."
        ),
        check="the target's cache window: a rotating cache must not drop context the model attends to",
        sources=(
            "ml-explore/mlx-lm (RotatingKVCache under speculative decoding; mlx-lm#846's family)",
            "tests/study_bugs/state.py:target_window_cache and the request suite's step_rotating_cache_256",
        ),
        kind="state",
        named_by=_ROUNDS,
        model=law.TargetContextWindow,
    ),
    BugClass(
        name="kv_block_wrong_prefix",
        mechanism=(
            "At some rounds (a KV block boundary) the verification pass is run on a prefix other than the true one."
        ),
        check="the prefix handed to the target at block boundaries (off by one token)",
        sources=("huggingface/transformers#30042",),
        kind="state",
        named_by=_ROUNDS,
        model=_state("kv_block_wrong_prefix", "flat", hi=0.2),
    ),
    BugClass(
        name="cache_key_position_only",
        mechanism="Cached target rows are keyed on the absolute position only, so rows of another prefix are reused.",
        check="the cache key of target rows: the whole prefix, not the position",
        sources=("ml-explore/mlx-lm#1423",),
        kind="state",
        named_by=_ROUNDS,
        model=_state("cache_key_position_only", "flat", lo=0.2),
    ),
    BugClass(
        name="state_not_reset",
        mechanism=(
            "State is not reset between sequences: a new sequence is decoded as a continuation of the previous one."
        ),
        check="the reset of the context / cache when a new request starts",
        sources=("vllm-project/vllm#39273",),
        kind="state",
        named_by=("rounds", "exact/reproducibility"),
        model=law.StateNotReset,
    ),
    *(
        BugClass(
            name=name,
            mechanism=mechanism,
            check=check,
            sources=sources,
            kind="structure",
            named_by=("exact/request", "stop") if name in _STOP_TOO else ("exact/request",),
            model=None,
            no_model_because=_REQUEST_ONLY + (f"; {_STOP_ONLY}" if name in _STOP_TOO else ""),
        )  # fmt: skip
        for name, mechanism, check, sources in _REQUEST_CLASSES
    ),
    _catalogue(
        cat.RandomnessSharedAcrossPositions,
        check=(
            "that every draw of a round (each draft, each acceptance test, the replacement, the bonus) takes its own "
            "uniform or noise: no index into the random buffer reused, no noise tensor shared between positions; "
            "then that no position's test reads the previous position's token or row"
        ),
        kind="rule",
        model=None,
        named_by=("serial",),
        no_model_because=(
            "named by the consecutive-pairs test's signature (_audit): each token's margin can be exact, so no law "
            "of single tokens shows it"
        ),
    ),
    BugClass(
        name="stop_never_a_replacement",
        mechanism=(
            "The replacement after a rejection (and in some engines the bonus) is drawn with the stop ids masked "
            "out, as if a request could not end on a token the draft did not propose: a request ends only on a "
            "kept draft, so requests run longer than target-only sampling makes them."
        ),
        check="the residual / bonus sampling: stop ids are ordinary tokens there; only the finish check treats them",
        sources=("written for the suite (issue 21: an EOS id treated specially at the replacement or bonus)",),
        kind="structure",
        named_by=("stop",),
        model=None,
        no_model_because=_STOP_ONLY,
    ),
    BugClass(
        name="seed_not_honoured",
        mechanism=(
            "The request's seed does not reach the sampler: every request draws from one stream started afresh "
            "(or shared), so requests with different seeds return the same tokens."
        ),
        check="where the sampler's generator is seeded: from the request's seed, one generator per request",
        sources=("NVIDIA/TensorRT-LLM#19487 (unseeded requests sharing one RNG stream gave identical samples)",),
        kind="state",
        named_by=("exact/seeds",),
        model=None,
        no_model_because="named by the seed-independence check's signature (_audit): no law of one request shows it",
    ),
    BugClass(
        name="float16_probabilities",
        mechanism=(
            "The verifier casts p and q to float16: ratio, acceptance uniform, residual and its cumulative sum "
            "are half precision, so small masses vanish from the sum and the clamped inverse CDF can emit the "
            "last id."
        ),
        check=(
            "the dtype of the verification arithmetic: float32 or float64 for p, q, the ratio, the residual and its CDF"
        ),
        sources=("deepseek-ai/DeepSpec#31 (reduced-precision sampling; the same family as bf16_draft_sampling)",),
        kind="rule",
        named_by=_ROUNDS,
        model=law.Float16Arithmetic,
    ),
    # -- no round model: named by an exact check or a token scorer
    _catalogue(
        cat.InclusiveCompare,
        check="the acceptance comparison: it must be strict, accept iff u < p/q",
        kind="rule",
        model=None,
        named_by=("exact/boundary",),
        no_model_because=_BOUNDARY_ONLY,
    ),
    BugClass(
        name="repetition_penalty_draft_only",
        mechanism=(
            "The repetition penalty is applied to the draft only; the target's law ignores it, so the output "
            "follows the unpenalised target."
        ),
        check="the target's logits processors: the penalty must be applied to the verified rows and the bonus row",
        sources=("sgl-project/sglang#21258 (penalty lost on the speculative path)",),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="repetition_penalty_stale_history",
        mechanism=(
            "The penalty's history is the prefix at the start of the round for every row: the drafts before a row "
            "are not counted as seen."
        ),
        check="the history handed to the penalty at each verified position: prefix + the drafts before it",
        sources=("vllm-project/vllm#19482 (penalties must see the drafts)",),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="repetition_penalty_inverted",
        mechanism=(
            "The target applies the reciprocal of the repetition penalty (a convention where values below 1 "
            "penalise, converted once too often): tokens already seen are favoured instead of penalised."
        ),
        check="the repetition penalty's value and direction where the target reads it: theta > 1 penalises seen tokens",
        sources=(
            "written for the diagnosis after the blind study bug tests/study_bugs12/parity.py:"
            "target_repetition_penalty_inverted (a penalty convention converted twice)",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="penalty_history_counts_the_scored_draft",
        mechanism=(
            "Each verified target row is penalised over a history that also holds the draft the row scores (the "
            "slice prefix + drafts[:i + 1] where drafts[:i] belongs), so every draft is tested against a row that "
            "already counts it: repeated tokens are rejected more often; the bonus row is right."
        ),
        check=(
            "the history each verified row's penalties count: the prefix and the drafts before that row, not the "
            "draft it scores"
        ),
        sources=(
            "sgl-project/sglang#40244 (penalty state across the positions of a verify block)",
            "written for the diagnosis after the blind study bug tests/study_bugs12/parity.py:"
            "target_penalty_history_includes_scored_token",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="frequency_penalty_follows_logit_sign",
        mechanism=(
            "The frequency penalty takes the repetition penalty's sign rule: a negative logit gets + frequency * "
            "count (pushed towards 0) instead of - frequency * count, so repeated tokens the model disfavours are "
            "favoured."
        ),
        check="the frequency penalty: logit - frequency * count whatever the logit's sign (only the "
        "multiplicative repetition penalty branches on the sign)",
        sources=(
            "vllm-project/vllm#18902 (the frequency penalty on the speculative path)",
            "written for the diagnosis after the blind study bug tests/study_bugs12/parity.py:"
            "target_frequency_penalty_follows_logit_sign",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="top_p_applied_twice",
        mechanism=(
            "The target applies the request's whole pipeline and then top-p once more to the renormalised result, "
            "so its nucleus is cut twice: the least likely kept tokens are removed."
        ),
        check="the verify path's filters: top-p once, in the sampler's pipeline, not again on its output",
        sources=(
            "sgl-project/sglang#36173 (a top-p renormalisation on the verify path besides the sampler's own filters)",
            "written for the diagnosis after the blind study bug tests/study_bugs12/parity.py:"
            "target_top_p_applied_twice",
        ),
        kind="settings",
        named_by=("rounds", "penalty"),
        model=law.TargetTopPTwice,
    ),
    BugClass(
        name="penalty_window_not_requested",
        mechanism=(
            "The target's penalties count only the last W tokens (a ring buffer, or a backend's default window "
            "such as llama.cpp's repeat_last_n of 64) where the request counts every token, so a token repeated"
            " earlier than the window is no longer penalised; W is fitted."
        ),
        check=(
            "the penalty history's length: every generated token (and the prompt, for the repetition penalty) "
            "unless the request sets a window"
        ),
        sources=(
            "ggml-org/llama.cpp's penalty_last_n / repeat_last_n (64 by default) applied where the request sets"
            " no window",
            "written for the penalty family after the blind study bug "
            "tests/study_bugs13/parity.py:target_penalties_over_fixed_recent_window",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="penalty_compounds_along_the_block",
        mechanism=(
            "The penalty is applied in place to a buffer shared by the rows of the verify block, once per row, "
            "so row j of a round gets r ** (j + 1) (and (j + 1) x presence and frequency): the first row is "
            "right, later rows are over-penalised."
        ),
        check=(
            "the penalty of each verify row: applied to that row's own logits once, not to a scale or buffer "
            "that persists along the block"
        ),
        sources=(
            "sgl-project/sglang#40244 and osaurus-ai/vmlx-swift#357 (penalty state shared by the positions of a"
            " verify block)",
            "written for the penalty family after the blind study bug "
            "tests/study_bugs13/parity.py:target_repetition_penalty_compounds_along_block",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="bonus_row_without_penalties",
        mechanism=(
            "The verified rows go through the penalties, but the bonus token after a fully accepted round is "
            "sampled by a path that applies no penalty, so it comes from the unpenalised row."
        ),
        check=(
            "the bonus row's processing: the same penalties (with the history that includes every accepted "
            "draft) as the verified rows"
        ),
        sources=(
            "vllm-project/vllm#42744 / #42802 (processors applied differently to verified positions and the bonus)",
            "written for the penalty family after the blind study bug "
            "tests/study_bugs13/bonus.py:bonus_row_sampled_without_penalties",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="presence_penalty_as_factor",
        mechanism=(
            "The presence penalty is mapped to a multiplicative, repetition-style factor 1 + presence on the "
            "generated tokens (logit / f when positive, logit * f when negative) instead of logit - presence, "
            "as a backend with multiplicative penalties only would."
        ),
        check=(
            "the presence penalty: subtract it from the logit of every generated token (OpenAI / vLLM "
            "semantics), never divide by it"
        ),
        sources=(
            "NVIDIA/TensorRT-LLM#17701 (presence and frequency penalties mishandled on the speculative path)",
            "written for the penalty family after the blind study bug "
            "tests/study_bugs13/parity.py:target_presence_mapped_to_multiplicative_penalty",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="repetition_penalty_on_probabilities",
        mechanism=(
            "The repetition penalty divides the seen tokens' probabilities by r and renormalises (logit - log "
            "r) instead of the logit's sign rule (logit / r when positive, logit * r when negative)."
        ),
        check="the repetition penalty: on the logits with the sign rule (HF, vLLM), not on probabilities",
        sources=(
            "sgl-project/sglang#21258 (a repetition penalty applied to the wrong tensor on a speculative path)",
            "written for the penalty family after the blind study bug "
            "tests/study_bugs13/parity.py:target_repetition_penalty_on_probabilities",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="penalties_count_the_prompt_only",
        mechanism=(
            "The presence and frequency penalties count the prompt's tokens instead of the generated ones (a "
            "history slice taken the wrong way, [:prompt_len] for [prompt_len:])."
        ),
        check=(
            "the slice of the history the presence and frequency penalties count: the generated tokens, after "
            "the prompt"
        ),
        sources=(
            "vllm-project/vllm#18902 (the frequency penalty wrong on the speculative path)",
            "written for the penalty family after the blind study bug "
            "tests/study_bugs13/parity.py:target_additive_penalties_count_prompt_not_output",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="repetition_penalty_skips_the_prompt",
        mechanism=(
            "The repetition penalty counts the generated tokens only, so the prompt's tokens are not penalised; "
            "the HF / vLLM repetition penalty counts the prompt and the generated tokens (presence and frequency "
            "count the generated ones only)."
        ),
        check="the tokens the repetition penalty reads: the prompt and the generated tokens (prompt + output ids)",
        sources=(
            "vllm-project/vllm-metal#69 (on the first decode step the repetition penalty did not see the prompt)",
            "written for the diagnosis after the blind study bug tests/study_bugs12/parity.py:"
            "target_repetition_penalty_skips_prompt",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="penalties_count_the_prompt",
        mechanism=(
            "Presence and frequency penalties count the prompt's tokens too (the repetition penalty's convention), "
            "so tokens the model never chose are penalised; OpenAI and vLLM count the generated tokens only."
        ),
        check="the counts presence and frequency penalties read: the request's generated tokens, not its prompt",
        sources=(
            "osaurus-ai/vmlx-swift#295 (presence and frequency penalty contexts seeded with the prompt)",
            "NVIDIA/TensorRT-LLM#5623 (ignore the context for presence and frequency penalties, as vLLM does)",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="penalty_fed_last_token_only",
        mechanism=(
            "The penalizer is fed only the last token of each verification step, so the accepted drafts of a "
            "round never enter the request's counts (a frequency penalty acts as about penalty / accepted length)."
        ),
        check="what the penalizer records after each round: every token the round committed, not its last one",
        sources=("sgl-project/sglang#33643 (the penalizer cumulates only the last token of a verify step)",),
        kind="state",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="penalty_history_keeps_rejected_drafts",
        mechanism=(
            "The penalty's history records every draft a round proposed, the rejected one and those after it "
            "too, so later rows are penalised for tokens that were never emitted."
        ),
        check="what the penalty state records after a round: the emitted tokens only (roll back the rejected drafts)",
        sources=("osaurus-ai/vmlx-swift#357 (the draft loop records every proposed token into the real processor)",),
        kind="state",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    BugClass(
        name="greedy_residual_argmax",
        mechanism="On a greedy mismatch the emitted token is argmax max(0, p - q) instead of argmax p.",
        check="the greedy rejection branch: emit argmax p",
        sources=("structural mutant (user-style suite)",),
        kind="greedy",
        named_by=("greedy",),
        model=None,
        no_model_because=_GREEDY_ONLY,
    ),
    BugClass(
        name="greedy_tie_highest_id",
        mechanism="The target's argmax breaks exact ties towards the highest id.",
        check="argmax tie-breaking: lowest id",
        sources=("vllm-project/vllm#7627",),
        kind="greedy",
        named_by=("greedy",),
        model=None,
        no_model_because=_GREEDY_ONLY,
    ),
    BugClass(
        name="greedy_tie_accepts_draft",
        mechanism="A draft tied for the target's maximum is kept even when a lower id ties with it.",
        check="the greedy match: x must equal argmax p (lowest id), not merely reach max p",
        sources=("huggingface/transformers#39421",),
        kind="greedy",
        named_by=("greedy",),
        model=None,
        no_model_because=_GREEDY_ONLY,
    ),
    BugClass(
        name="greedy_near_acceptance",
        mechanism="'Near-greedy' acceptance keeps a draft whose p(x) is within a factor of max p.",
        check="the greedy match: exact argmax equality",
        sources=("NVIDIA/TensorRT-LLM (relaxed acceptance)",),
        kind="greedy",
        named_by=("greedy",),
        model=None,
        no_model_because=_GREEDY_ONLY,
    ),
    BugClass(
        name="greedy_ignored",
        mechanism="Temperature 0 is ignored: the implementation samples from the raw rows.",
        check="the greedy branch: temperature 0 must decode by argmax",
        sources=("vllm-project/vllm#16899",),
        kind="greedy",
        named_by=("greedy",),
        model=None,
        no_model_because=_GREEDY_ONLY,
    ),
    BugClass(
        name="unverified_draft_tail",
        mechanism=(
            "From some point of the sequence on, draft samples are appended without verification (the draft is "
            "trusted once it has 'warmed up')."
        ),
        check="the generation loop: every emitted token must come out of a verification pass",
        sources=("structural mutant (user-style suite)",),
        kind="structure",
        named_by=("stream", "lm"),
        model=None,
        no_model_because=_STREAM_ONLY,
    ),
    BugClass(
        name="last_round_unverified",
        mechanism=(
            "When fewer than gamma + 1 tokens remain, the rest are filled with draft samples instead of a last, "
            "shorter verified round."
        ),
        check="the end of the loop: the last round must verify its (fewer) drafts like any other",
        sources=("structural mutant (user-style suite)",),
        kind="structure",
        named_by=("stream", "lm"),
        model=None,
        no_model_because=_STREAM_ONLY,
    ),
    BugClass(
        name="context_misses_last_token",
        mechanism=(
            "From the second round on, the context (or cache) handed to the models lacks the last emitted token: "
            "the bonus or replacement token is never fed back."
        ),
        check="what the next round is conditioned on: prefix + every emitted token, the last one included",
        sources=("huggingface/transformers#30042 (cache position not advanced in assisted decoding)",),
        kind="state",
        named_by=("stream",),
        model=None,
        no_model_because=_STREAM_ONLY,
    ),
    BugClass(
        name="greedy_as_low_temperature",
        mechanism=(
            "Temperature 0 is emulated by a tiny temperature, which splits exact ties instead of taking the lowest id."
        ),
        check="the greedy branch: argmax with lowest-id ties, not temperature 1e-3",
        sources=("vllm-project/vllm#7627",),
        kind="greedy",
        named_by=("greedy",),
        model=None,
        no_model_because=_GREEDY_ONLY,
    ),
    BugClass(
        name="temperature_ignored",
        mechanism=(
            "The request's temperature is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the request's temperature on the speculative path: it must reach both draft and target rows",
        sources=("huggingface/transformers#28166 (assisted generation and the request's temperature)",),
        kind="settings",
        named_by=("lm",),
        model=None,
        no_model_because=_LM_ONLY,
    ),
    BugClass(
        name="top_k_ignored",
        mechanism=(
            "The request's top-k is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the request's top-k on the speculative path: verified rows are filtered as without speculation",
        sources=("sgl-project/sglang#10617 (sampling parameters not applied with EAGLE)",),
        kind="settings",
        named_by=("lm",),
        model=None,
        no_model_because=_LM_ONLY,
    ),
    BugClass(
        name="top_p_ignored",
        mechanism=(
            "The request's top-p is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the request's top-p on the speculative path: verified rows are filtered as without speculation",
        sources=("sgl-project/sglang#10617 (sampling parameters not applied with EAGLE)",),
        kind="settings",
        named_by=("lm",),
        model=None,
        no_model_because=_LM_ONLY,
    ),
    BugClass(
        name="min_p_ignored",
        mechanism=(
            "The request's min-p is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the request's min-p under speculation: it must filter the verified rows as without speculation",
        sources=("sgl-project/sglang#10617 (min_p and logit_bias not applied with EAGLE)",),
        kind="settings",
        named_by=("lm",),
        model=None,
        no_model_because=_LM_ONLY,
    ),
    BugClass(
        name="repetition_penalty_ignored",
        mechanism=(
            "The request's repetition-penalty is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the repetition penalty under speculation: every verified row needs it, over its whole prefix",
        sources=("NVIDIA/TensorRT-LLM#17701 (penalties dropped by one-model speculation)",),
        kind="settings",
        named_by=("lm",),
        model=None,
        no_model_because=_LM_ONLY,
    ),
    BugClass(
        name="presence_penalty_ignored",
        mechanism=(
            "The request's presence-penalty is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the presence penalty under speculation: every verified row needs it, over the generated tokens",
        sources=("sgl-project/sglang#22049 (penalties not applied under speculative decoding)",),
        kind="settings",
        named_by=("lm", "penalty"),
        model=None,
        no_model_because=_LM_PENALTY,
    ),
    BugClass(
        name="logit_bias_ignored",
        mechanism=(
            "The request's logit bias is not applied on the speculative path: the output is exactly the target's "
            "law without it, as if the request had sent none."
        ),
        check="the logit bias under speculation: added to the raw logits of every verified row (and the draft's)",
        sources=("sgl-project/sglang#10617 (min_p and logit_bias not applied with EAGLE)",),
        kind="settings",
        named_by=("rounds", "lm", "penalty"),
        model=_ignored("logit_bias", "logit_bias_ignored"),
    ),
    BugClass(
        name="logit_bias_after_temperature",
        mechanism=(
            "The logit bias is added after temperature scaling instead of to the raw logits first (OpenAI's and "
            "vLLM's order): at temperature T a bias b acts as b * T, so the same law at temperature 1 and a "
            "weaker (T < 1) or stronger (T > 1) bias elsewhere."
        ),
        check="the order of the logits processors: the logit bias first, then the penalties, then temperature",
        sources=("structural mutant (user-style suite; OpenAI and vLLM add the bias to the raw logits first)",),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=(
            "only a setting with both a bias and a temperature shows it, the parity grid's combined one, which has "
            "penalties: the penalty scorer rebuilds each token's law (_penalty)"
        ),
    ),
    BugClass(
        name="frequency_penalty_ignored",
        mechanism=(
            "The request's frequency-penalty is not applied on the speculative path: the output is exactly the "
            "target's law without it, as if the request had left it at its default."
        ),
        check="the frequency penalty under speculation: every verified row needs it, over the generated tokens",
        sources=(
            "vllm-project/vllm#18902 (frequency penalty has no effect with speculative decoding)",
            "NVIDIA/TensorRT-LLM#17701 (penalties dropped by one-model speculation)",
        ),
        kind="settings",
        named_by=("lm", "penalty"),
        model=None,
        no_model_because=_LM_PENALTY,
    ),
    BugClass(
        name="always_accept_from",
        mechanism=(
            "Verification is exact up to some output length and from there on every draft is kept (one target token "
            "per round): a buffer of draft rows or a cache sized for one block runs out, and the kernel reads the "
            "target's own rows in the draft's place (p / q = 1)."
        ),
        check="the buffers the verifier reads past the first block: the draft's rows at every offset, not the target's",
        sources=("written for the suite (issue 21: long outputs past a 256-token block)",),
        kind="state",
        named_by=("lm",),
        model=None,
        no_model_because=_LM_ONLY,
    ),
    BugClass(
        name="penalties_ignored",
        mechanism=(
            "Neither the presence nor the frequency penalty of the request is applied on the speculative path: the "
            "output is exactly the target's law without them (one-model speculation skipping the penalty step)."
        ),
        check="the penalty step under speculation: every verified row needs both penalties, over the generated tokens",
        sources=(
            "NVIDIA/TensorRT-LLM#17701 (penalties silently dropped by one-model speculation)",
            "sgl-project/sglang#22049 (penalties not applied with speculative decoding)",
        ),
        kind="settings",
        named_by=("penalty",),
        model=None,
        no_model_because=_PENALTY_ONLY,
    ),
    # -- multi-draft rules run as tree round steps (catalogue.tree_steps), named by the tree scorer
    BugClass(
        name="spectr_single_draft_residual",
        mechanism=(
            "SpecTr's k-sequential selection accepts draft i with min(1, p / (rho q)) in turn, but when none is "
            "accepted draws from the single-draft residual norm((p - q)+) instead of p - min(q, p / rho) S: the "
            "chain rule's residual does not account for the k acceptance chances."
        ),
        check="the residual after k rejected drafts: p - min(q, p / rho) * sum_{j<k} (1 - beta)^j, normalised",
        sources=("structural mutant (SpecTr, Sun et al., NeurIPS 2023: the chain rule's residual kept)",),
        kind="rule",
        named_by=("tree",),
        model=None,
        no_model_because=_TREE_ONLY,
    ),
    BugClass(
        name="spectr_rho_one",
        mechanism=(
            "SpecTr's k-sequential selection with rho = 1 for k >= 2 drafts (below rho*): the acceptances alone put "
            "more than p(y) on likely tokens, and the residual p - min(q, p) S, clipped at 0, cannot undo it."
        ),
        check="rho: the rule is exact only for rho in [rho*, k], rho* solving 1 - (1 - beta(rho))^k = rho beta(rho)",
        sources=("structural mutant (SpecTr, Sun et al., NeurIPS 2023: rho left at the single-draft value 1)",),
        kind="rule",
        named_by=("tree",),
        model=None,
        no_model_because=_TREE_ONLY,
    ),
)

CLASSES: dict[str, BugClass] = {r.name: r for r in RECORDS}


def bug_class(name: str) -> BugClass:
    return CLASSES[name]


def round_models() -> list[RoundModel]:
    """Every candidate model of the round scorer, fresh: the reference first, then each record's."""
    return [RoundModel(), *(r.model() for r in RECORDS if r.model is not None)]
