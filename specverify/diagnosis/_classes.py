"""The bug classes a diagnosis can name: what each one is, what to check in the code, and the
real reports it was modelled on. Catalogue classes take their mechanism from the catalogue's
docstring; the classes of the user-style suite (state, parity, greedy) are described here.

``ALIASES`` maps the names of the user-style suite (tests/user_impls) to the class that is the
same mechanism, for the diagnosis study.
"""

from __future__ import annotations

import dataclasses
import inspect

from ..catalogue import BUGS

__all__ = ["BugClass", "CLASSES", "ALIASES", "bug_class"]


@dataclasses.dataclass(frozen=True)
class BugClass:
    name: str
    mechanism: str
    check: str  # what to look at in the code
    sources: tuple[str, ...]
    kind: str  # 'rule', 'settings', 'state', 'greedy', 'structure'


_CATALOGUE_CHECKS = {
    "residual_softmax": ("the renormalisation of max(0, p - q): divide by its sum, never softmax it", "rule"),
    "always_accept": ("the acceptance count / mask: every draft is kept", "rule"),
    "argmax_draft_soft_q": ("how draft tokens are chosen: argmax drafts need the one-hot rule, not p/q", "rule"),
    "raw_q_vs_processed": (
        "the q handed to the verifier: it must be the processed (top-k/top-p) law drafts came from",
        "settings",
    ),
    "target_default_params": ("the target's sampling settings: they are not the request's", "settings"),
    "reuse_u_for_residual": ("the uniform of the residual draw: it reuses the acceptance uniform", "rule"),
    "shared_noise": ("the random streams: draft, acceptance and recovery share one noise source", "rule"),
    "u_const_zero": ("the acceptance uniform: it is constant (0), not drawn", "rule"),
    "minp_bonus_only": ("min-p / logit bias: applied to the bonus row only, not to verified positions", "settings"),
    "topk_topp_order": ("the order of top-k and top-p in the speculative path (draft and target)", "settings"),
    "inclusive_compare": ("the acceptance comparison: it must be strict, accept iff u < p/q", "rule"),
    "bf16_draft_sampling": ("the dtype drafts are sampled in versus the dtype of q in the ratio", "settings"),
    "or_accept": ("the acceptance condition: an exact-match fast path OR-ed with the ratio test", "rule"),
    "bonus_from_previous_row": ("the index of the bonus row: it must be row gamma, not gamma - 1", "rule"),
    "continue_after_rejection": ("the loop over drafts: it must stop (break) at the first rejection", "structure"),
    "replacement_from_p": ("the replacement after a rejection: it must come from (p - q)+, not p", "rule"),
    "replacement_from_q": ("the replacement after a rejection: it must come from (p - q)+, not q", "rule"),
    "no_kv_rollback": (
        "the cache / context after a rejection: roll back the rejected draft and append the replacement",
        "state",
    ),
    "residual_not_normalised": ("the residual draw: (p - q)+ must be normalised (or u scaled by its mass)", "rule"),
    "off_by_one_target_row": ("the target row the ratio reads: row j for draft j, not row j + 1", "rule"),
    "same_uniform_all_positions": ("the acceptance uniforms: one per position, not one per round", "rule"),
    "temperature_twice": ("temperature: applied twice to the rows (sampler and verifier)", "settings"),
    "draft_settings_not_forwarded": (
        "the draft's settings: it samples with defaults but reports q at the request's",
        "settings",
    ),
    "reject_one_late": ("the rejection branch: the rejected draft is emitted before its replacement", "structure"),
    "residual_wrong_sign": ("the residual: max(0, p - q), operands swapped", "rule"),
    "topk_candidate_with_draft_ratio": (
        "a deterministic (top-1) proposal verified with p/q_draft and p without x",
        "rule",
    ),
}

_NEW = {
    "residual_unclipped": (
        "The residual is |p - q| instead of max(0, p - q): tokens the draft over-weights get replacement mass.",
        "the residual: clip at zero, max(0, p - q), never abs",
        ("structural mutant (user-style suite)",),
        "rule",
    ),
    "draft_uniform_reused_for_acceptance": (
        "The uniform that drew the draft by inverse CDF is reused in the acceptance test, so acceptance "
        "depends on where x fell in q's CDF.",
        "the random draws: the acceptance uniform must be fresh, not the draft's",
        ("vllm-project/vllm#47386",),
        "rule",
    ),
    "bonus_from_q": (
        "When every draft is kept, the bonus is one more draft sample from q instead of a draw from p_gamma.",
        "the bonus token: draw it from the target row gamma",
        ("structural mutant (user-style suite)",),
        "rule",
    ),
    "bonus_argmax": (
        "When every draft is kept, the bonus is argmax p_gamma instead of a sample.",
        "the bonus token: sample it, do not take the argmax",
        ("structural mutant (user-style suite)",),
        "rule",
    ),
    "inverted_ratio": (
        "Drafts are kept with probability min(1, q(x)/p(x)): the ratio is inverted.",
        "the acceptance ratio: p(x) / q(x), target over draft",
        ("structural mutant (user-style suite)",),
        "rule",
    ),
    "zero_guard_accepts": (
        "A division guard reads p(x) = 0 as ratio 1, so drafts the target forbids are kept.",
        "the guard around p/q: a draft with p(x) = 0 must be rejected",
        ("sgl-project/sglang#35771 (same boundary)",),
        "rule",
    ),
    "drafts_unconditioned": (
        "All drafts are sampled from q(. | prefix) while each ratio uses q(. | prefix + drafts so far).",
        "the draft loop: each draft must be sampled from the row of the prefix extended by the drafts before it",
        ("structural mutant (user-style suite)",),
        "rule",
    ),
    "recycled_drafts": (
        "Drafts left over after a rejection (drawn after the rejected token) are proposed again next round.",
        "draft caching across rounds: discard drafts after a rejection",
        ("structural mutant (user-style suite)",),
        "state",
    ),
    "replacement_from_q_when_close": (
        "A fallback draws the replacement from q when the residual mass is small ('draft ~ target').",
        "the fallback of the residual: when (p - q)+ is tiny it must still be used (or p when it is exactly 0)",
        ("structural mutant (user-style suite)",),
        "rule",
    ),
    "replacement_from_p_when_far": (
        "A shortcut draws the replacement from p when the residual mass is large ('draft useless').",
        "the shortcut in the residual: it is only exact when q = 0 on the residual's support",
        ("ShopeeLLM/Spec-RL#14",),
        "rule",
    ),
    "kv_block_wrong_prefix": (
        "At some rounds (a KV block boundary) the verification pass is run on a prefix other than the true one.",
        "the prefix handed to the target at block boundaries (off by one token)",
        ("huggingface/transformers#30042",),
        "state",
    ),
    "cache_key_position_only": (
        "Cached target rows are keyed on the absolute position only, so rows of another prefix are reused.",
        "the cache key of target rows: the whole prefix, not the position",
        ("ml-explore/mlx-lm#1423",),
        "state",
    ),
    "state_not_reset": (
        "State is not reset between sequences: a new sequence is decoded as a continuation of the previous one.",
        "the reset of the context / cache when a new request starts",
        ("vllm-project/vllm#39273",),
        "state",
    ),
    "target_missing_temperature": (
        "Temperature is applied to the draft only; the target is sampled at temperature 1.",
        "the target's sampling pipeline: apply the request's temperature",
        ("vllm-project/vllm#9834",),
        "settings",
    ),
    "target_missing_top_k": (
        "top-k is applied to the draft only; the target keeps its whole vocabulary.",
        "the target's sampling pipeline: apply top-k",
        ("vllm-project/vllm#15063",),
        "settings",
    ),
    "target_missing_top_p": (
        "top-p is applied to the draft only; the target keeps its tail.",
        "the target's sampling pipeline: apply top-p",
        ("vllm-project/vllm#15063",),
        "settings",
    ),
    "target_missing_min_p": (
        "min-p is applied to the draft only; the target keeps its low-probability tail.",
        "the target's sampling pipeline: apply min-p",
        ("vllm-project/vllm#42744",),
        "settings",
    ),
    "top_p_before_temperature": (
        "The target chooses the top-p nucleus before applying temperature.",
        "the order of the target's sampling steps: temperature, then top-k, top-p, min-p",
        ("sgl-project/sglang#36173",),
        "settings",
    ),
    "top_p_before_top_k_target": (
        "The target applies top-p before top-k (the draft in the right order).",
        "the order of the target's sampling steps: top-k before top-p",
        ("sgl-project/sglang#36173",),
        "settings",
    ),
    "temperature_in_ratio_only": (
        "Temperature is used only inside the acceptance ratio; drafts, residual and bonus use untempered rows.",
        "every row of the round (drafts, ratio, residual, bonus) must use the tempered law",
        ("ohdearquant/lattice#388",),
        "settings",
    ),
    "repetition_penalty_draft_only": (
        "The repetition penalty is applied to the draft only; the target's law ignores it, so the output follows "
        "the unpenalised target.",
        "the target's logits processors: the penalty must be applied to the verified rows and the bonus row",
        ("sgl-project/sglang#21258 (penalty lost on the speculative path)",),
        "settings",
    ),
    "repetition_penalty_stale_history": (
        "The penalty's history is the prefix at the start of the round for every row: the drafts before a row "
        "are not counted as seen.",
        "the history handed to the penalty at each verified position: prefix + the drafts before it",
        ("vllm-project/vllm#19482 (penalties must see the drafts)",),
        "settings",
    ),
    "greedy_residual_argmax": (
        "On a greedy mismatch the emitted token is argmax max(0, p - q) instead of argmax p.",
        "the greedy rejection branch: emit argmax p",
        ("structural mutant (user-style suite)",),
        "greedy",
    ),
    "greedy_tie_highest_id": (
        "The target's argmax breaks exact ties towards the highest id.",
        "argmax tie-breaking: lowest id",
        ("vllm-project/vllm#7627",),
        "greedy",
    ),
    "greedy_tie_accepts_draft": (
        "A draft tied for the target's maximum is kept even when a lower id ties with it.",
        "the greedy match: x must equal argmax p (lowest id), not merely reach max p",
        ("huggingface/transformers#39421",),
        "greedy",
    ),
    "greedy_near_acceptance": (
        "'Near-greedy' acceptance keeps a draft whose p(x) is within a factor of max p.",
        "the greedy match: exact argmax equality",
        ("NVIDIA/TensorRT-LLM (relaxed acceptance)",),
        "greedy",
    ),
    "greedy_ignored": (
        "Temperature 0 is ignored: the implementation samples from the raw rows.",
        "the greedy branch: temperature 0 must decode by argmax",
        ("vllm-project/vllm#16899",),
        "greedy",
    ),
    "float16_probabilities": (
        "The verifier casts p and q to float16: ratio, acceptance uniform, residual and its cumulative sum are half "
        "precision, so small masses vanish from the sum and the clamped inverse CDF can emit the last id.",
        "the dtype of the verification arithmetic: float32 or float64 for p, q, the ratio, the residual and its CDF",
        ("deepseek-ai/DeepSpec#31 (reduced-precision sampling; the same family as bf16_draft_sampling)",),
        "rule",
    ),
    "unverified_draft_tail": (
        "From some point of the sequence on, draft samples are appended without verification (the draft is "
        "trusted once it has 'warmed up').",
        "the generation loop: every emitted token must come out of a verification pass",
        ("structural mutant (user-style suite)",),
        "structure",
    ),
    "last_round_unverified": (
        "When fewer than gamma + 1 tokens remain, the rest are filled with draft samples instead of a last, "
        "shorter verified round.",
        "the end of the loop: the last round must verify its (fewer) drafts like any other",
        ("structural mutant (user-style suite)",),
        "structure",
    ),
    "context_misses_last_token": (
        "From the second round on, the context (or cache) handed to the models lacks the last emitted token: "
        "the bonus or replacement token is never fed back.",
        "what the next round is conditioned on: prefix + every emitted token, the last one included",
        ("huggingface/transformers#30042 (cache position not advanced in assisted decoding)",),
        "state",
    ),
    "greedy_as_low_temperature": (
        "Temperature 0 is emulated by a tiny temperature, which splits exact ties instead of taking the lowest id.",
        "the greedy branch: argmax with lowest-id ties, not temperature 1e-3",
        ("vllm-project/vllm#7627",),
        "greedy",
    ),
}


def _first_paragraph(doc: str | None) -> str:
    return " ".join((inspect.cleandoc(doc or "").split("\n\n")[0]).split())


def _build() -> dict[str, BugClass]:
    out = {}
    for cls in BUGS:
        check, kind = _CATALOGUE_CHECKS.get(cls.name, ("the line named in the mechanism", "rule"))
        out[cls.name] = BugClass(cls.name, _first_paragraph(cls.__doc__), check, (cls.source,), kind)
    for name, (mech, check, refs, kind) in _NEW.items():
        out[name] = BugClass(name, mech, check, refs, kind)
    return out


CLASSES: dict[str, BugClass] = _build()

#: user-style suite name -> class name (where they differ)
ALIASES = {
    "bonus_wrong_row": "bonus_from_previous_row",
    "reused_uniform": "draft_uniform_reused_for_acceptance",
    "continue_after_reject": "continue_after_rejection",
    "shared_uniform": "same_uniform_all_positions",
    "replacement_from_q_high_overlap": "replacement_from_q_when_close",
    "replacement_from_p_low_overlap": "replacement_from_p_when_far",
    "accepts_p_zero": "zero_guard_accepts",
    "position_wrong_prefix": "kv_block_wrong_prefix",
    "stale_cache_after_reject": "no_kv_rollback",
    "no_reset_new_sequence": "state_not_reset",
    "temperature_draft_only": "target_missing_temperature",
    "min_p_draft_only": "target_missing_min_p",
    "greedy_bonus_wrong_row": "bonus_from_previous_row",
    "greedy_ignored": "greedy_ignored",
    "float16_ratio": "float16_probabilities",
    "unverified_after_8_tokens": "unverified_draft_tail",
    "unverified_last_round": "last_round_unverified",
    "realign_missing_last_token": "context_misses_last_token",
    "residual_unnormalised": "residual_not_normalised",
}


def bug_class(name: str) -> BugClass:
    return CLASSES[name]
