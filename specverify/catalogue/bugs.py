"""The bug catalogue: buggy speculative samplers modelled on real reports, and exact decoys.

Run ``specverify selftest`` to watch the suite catch every bug and pass every decoy. Each entry is a
:class:`~specverify.catalogue.ChainSampler` subclass that changes one hook; its docstring gives the
root cause and, where it comes from a public report, that report. ``needs`` names the sampling
settings under which the bug shows (a top-k bug is invisible without top-k); ``harness`` says
whether it shows on position rows ('kernel') or only with prefix-dependent models ('sequence').
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..dists import SamplingSettings, inverse_cdf_sample, probs_from_logits, softmax
from ..harness import ChainSampler, RoundOutput, Uniforms
from ..lm.synthetic import TablePair

TOPK_TOPP = SamplingSettings(temperature=0.9, top_k=12, top_p=0.85)
MIN_P = SamplingSettings(min_p=0.08)
TEMP = SamplingSettings(temperature=0.7, top_p=0.9)


# --------------------------------------------------------------------------------------------
# bugs
# --------------------------------------------------------------------------------------------
class ResidualSoftmax(ChainSampler):
    """The residual max(0, p - q) is renormalised with a softmax (over probabilities!) instead of
    being divided by its sum, which flattens it towards uniform. huggingface/transformers#28508."""

    name, exact, source = "residual_softmax", False, "huggingface/transformers#28508"

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return softmax(np.maximum(p_row - q_row, 0.0))


class AlwaysAccept(ChainSampler):
    """Every draft token is accepted (a faulty match count); the output is the draft's law.
    huggingface/transformers#28508 (the same PR)."""

    name, exact, source = "always_accept", False, "huggingface/transformers#28508"

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        return np.ones_like(px, dtype=bool)


class ArgmaxDraftSoftQ(ChainSampler):
    """The drafter emits its argmax (for speed) but the verifier still divides by the draft's
    softmax q(x), as if x had been sampled. huggingface/transformers#32867 (reverting #30778)."""

    name, exact, source = "argmax_draft_soft_q", False, "huggingface/transformers#32867"

    def draft_token(
        self, q_sampled: npt.NDArray[np.float64], u: npt.NDArray[np.float64], j: int, U: Uniforms
    ) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = np.argmax(q_sampled, axis=-1)
        return out


class RawQReported(ChainSampler):
    """The draft samples from top-k/top-p processed logits but returns the raw logits' softmax as q,
    inflating p/q by 1/Z on kept tokens. huggingface/transformers#47932."""

    name, exact, source, needs = "raw_q_vs_processed", False, "huggingface/transformers#47932", TOPK_TOPP

    def draft_rows_reported(
        self,
        pair: TablePair,
        ridx: npt.NDArray[np.int64],
        settings: SamplingSettings | None,
        sampled: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        return pair.draft_table(SamplingSettings(temperature=settings.temperature if settings else 1.0))[ridx]


class TargetDefaultParams(ChainSampler):
    """Target probabilities computed with default settings (T = 1, top_p = 1) while the draft used
    the request's. vllm-project/vllm#9834, fixed in #10198."""

    name, exact, source, needs = "target_default_params", False, "vllm-project/vllm#9834", TEMP

    def target_rows(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None, *, bonus: bool
    ) -> npt.NDArray[np.float64]:
        return pair.target_table(None)[ridx]


class ReuseAcceptUniform(ChainSampler):
    """The acceptance uniform u is reused as the inverse-CDF threshold of the residual draw; given a
    rejection u ~ U(ratio, 1), not U(0, 1). vllm-project/vllm-ascend#16370."""

    name, exact, source = "reuse_u_for_residual", False, "vllm-project/vllm-ascend#16370"

    def final_uniform(self, U: Uniforms, n_acc: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        g = U.accept.shape[1]
        b = np.arange(len(n_acc))
        return np.where(n_acc < g, U.accept[b, np.minimum(n_acc, g - 1)], U.final)


class SharedNoise(ChainSampler):
    """One noise source drives draft sampling, acceptance and recovery (keyed by the same seed and
    position), so recovery re-favours draft-preferred tokens. vllm-project/vllm#47386 / #54282."""

    name, exact, source = "shared_noise", False, "vllm-project/vllm#47386"

    def uniforms(self, rng: np.random.Generator, b: int, g: int) -> Uniforms:
        U = super().uniforms(rng, b, g)
        U.accept = U.draft
        return U

    def final_uniform(self, U: Uniforms, n_acc: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        g = U.draft.shape[1]
        return np.where(n_acc < g, U.draft[np.arange(len(n_acc)), np.minimum(n_acc, g - 1)], U.final)


class UniformZero(ChainSampler):
    """The acceptance uniform is hard-coded to 0.0 (no device RNG), so every draft with p(x) > 0 is
    accepted and the reported acceptance is 1.0. vllm-project/vllm-ascend#13470."""

    name, exact, source = "u_const_zero", False, "vllm-project/vllm-ascend#13470"

    def uniforms(self, rng: np.random.Generator, b: int, g: int) -> Uniforms:
        U = super().uniforms(rng, b, g)
        U.accept = np.zeros_like(U.accept)
        return U


class MinPBonusOnly(ChainSampler):
    """min-p (and logit bias) applied only when sampling the bonus token; verified positions use the
    unfiltered target. vllm-project/vllm#42744."""

    name, exact, source, needs = "minp_bonus_only", False, "vllm-project/vllm#42744", MIN_P

    def target_rows(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None, *, bonus: bool
    ) -> npt.NDArray[np.float64]:
        if bonus:
            return pair.target_table(settings)[ridx]
        s: dict[str, Any] = settings.to_dict() if settings else {}
        s["min_p"] = 0.0
        return pair.target_table(SamplingSettings(**s))[ridx]


class TopKTopPOrder(ChainSampler):
    """The speculative path applies top-p on the full distribution and intersects with top-k, while
    the normal sampler applies top-p after top-k and renormalisation (draft and target both use the
    wrong order, so the output follows the wrong law). sgl-project/sglang#36173."""

    name, exact, source, needs = "topk_topp_order", False, "sgl-project/sglang#36173", TOPK_TOPP

    @staticmethod
    def _other_order(logits: npt.NDArray[np.float64], s: SamplingSettings) -> npt.NDArray[np.float64]:
        x = logits / s.temperature
        p_only = probs_from_logits(x, SamplingSettings(top_p=s.top_p))
        k_only = probs_from_logits(x, SamplingSettings(top_k=s.top_k))
        keep = (p_only > 0) & (k_only > 0)
        w = np.where(keep, softmax(x), 0.0)
        out: npt.NDArray[np.float64] = w / w.sum(-1, keepdims=True)
        return out

    def target_rows(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None, *, bonus: bool
    ) -> npt.NDArray[np.float64]:
        if settings is None or settings.is_greedy:  # no top-k / top-p in play
            return super().target_rows(pair, ridx, settings, bonus=bonus)
        return self._other_order(pair.target_logits[ridx], settings)

    def draft_rows_sampled(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        if settings is None or settings.is_greedy:
            return super().draft_rows_sampled(pair, ridx, settings)
        return self._other_order(pair.draft_logits[ridx], settings)


class InclusiveCompare(ChainSampler):
    """Acceptance tested with an inclusive comparison u <= p/q; with u = 0 a draft whose target
    probability is exactly 0 is accepted. Invisible to sampling with 53-bit uniforms (P(u = 0) is
    2^-53); caught exactly by injecting u = 0. sgl-project/sglang#35771."""

    name, exact, source = "inclusive_compare", False, "sgl-project/sglang#35771"
    detector = "boundary"

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        with np.errstate(divide="ignore", invalid="ignore"):
            return U.accept <= px / qx


def bfloat16_round(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``x`` cast to bfloat16 and back, as torch does it (to float32, then the top 16 bits rounded to
    nearest, ties to even), in numpy: a diagnosis of this class then needs no torch import."""
    bits = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    out: npt.NDArray[np.float64] = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return out


class Bf16Draft(ChainSampler):
    """The draft token is sampled from bfloat16 logits while the ratio and residual use float32
    probabilities of the unrounded logits. deepseek-ai/DeepSpec#31."""

    name, exact, source = "bf16_draft_sampling", False, "deepseek-ai/DeepSpec#31"
    #: raw logits carry an arbitrary offset; at magnitude ~24 bf16's spacing is 0.125
    logit_offset = 24.0

    def draft_rows_sampled(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        return probs_from_logits(bfloat16_round(pair.draft_logits[ridx] + self.logit_offset), settings)

    def draft_rows_reported(
        self,
        pair: TablePair,
        ridx: npt.NDArray[np.int64],
        settings: SamplingSettings | None,
        sampled: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        return pair.draft_table(settings)[ridx]


class OrAccept(ChainSampler):
    """Acceptance is (x equals the target's own sample) OR (u * q < p): the exact-match fast path is
    OR-ed with the ratio test, double-counting acceptance. alibaba/rtp-llm#1295."""

    name, exact, source = "or_accept", False, "alibaba/rtp-llm#1295"

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        P, X = ctx["P"], ctx["X"]
        g = X.shape[1]
        y = inverse_cdf_sample(P[:, :g], U.target[:, :g])
        out: npt.NDArray[np.bool_] = (y == X) | (U.accept * qx < px)
        return out


class ContinueAfterRejection(ChainSampler):
    """Drafting and verification go on after a rejection: the replacement is emitted, then later
    drafts (conditioned on the rejected token) keep being verified. Shows only when the target
    depends on the prefix."""

    name, exact, source, harness = (
        "continue_after_rejection",
        False,
        "structural mutant (statistics.md 7g)",
        "sequence",
    )

    def continue_after_rejection(self) -> bool:
        return True


class ReplacementFromP(ChainSampler):
    """After a rejection the replacement is drawn from p instead of the residual (p - q)+.
    ShopeeLLM/Spec-RL#14 (deliberate there, for RL)."""

    name, exact, source = "replacement_from_p", False, "ShopeeLLM/Spec-RL#14"

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return p_row


class ReplacementFromQ(ChainSampler):
    """After a rejection the replacement is drawn from the draft q."""

    name, exact, source = "replacement_from_q", False, "structural mutant"

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return q_row


class NoKVRollback(ChainSampler):
    """After a rejection the cache is not rolled back: the next round runs as if the rejected draft
    token were the last token of the context. mlx-lm#1109, #1423; transformers#30042 (greedy)."""

    name, exact, source, harness = "no_kv_rollback", False, "ml-explore/mlx-lm#1109", "sequence"

    def next_context(
        self, tokens: npt.NDArray[np.int64], n_acc: npt.NDArray[np.int64], drafts: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        g = drafts.shape[1]
        b = np.arange(len(n_acc))
        return np.where(n_acc < g, drafts[b, np.minimum(n_acc, g - 1)], tokens[b, n_acc])


class ResidualNotNormalised(ChainSampler):
    """The residual (p - q)+ is fed to a sampler that assumes a normalised vector (first i with
    cumsum > u); when u exceeds the residual's mass it falls off the end onto the last token, as the
    seed article's ``sample`` does with its ``return d.length - 1``."""

    name, exact, source = "residual_not_normalised", False, "structural mutant (statistics.md 7g)"

    def draw_residual(self, weights: npt.NDArray[np.float64], u: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        cum = np.cumsum(weights, axis=-1)
        idx = np.count_nonzero(cum <= u[:, None], axis=-1)
        out: npt.NDArray[np.int64] = np.minimum(idx, weights.shape[1] - 1)
        return out


class OffByOneTargetRow(ChainSampler):
    """Acceptance compares x_i with the target row of the next position (p_{i+1}(x_i) / q_i(x_i)):
    rows misaligned with draft tokens. vllm-project/vllm#41768 (row misalignment)."""

    name, exact, source = "off_by_one_target_row", False, "vllm-project/vllm#41768"

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        P, X = ctx["P"], ctx["X"]
        b, g = X.shape
        shifted = P[np.arange(b)[:, None], np.arange(1, g + 1)[None, :], X]
        with np.errstate(divide="ignore", invalid="ignore"):
            out: npt.NDArray[np.bool_] = U.accept < shifted / qx
            return out


class SameUniformAllPositions(ChainSampler):
    """One acceptance uniform is shared by every position of the round (a missing sync made the
    uniforms not unique per position). flashinfer-ai/flashinfer#424."""

    name, exact, source = "same_uniform_all_positions", False, "flashinfer-ai/flashinfer#424"

    def uniforms(self, rng: np.random.Generator, b: int, g: int) -> Uniforms:
        U = super().uniforms(rng, b, g)
        U.accept = np.repeat(U.accept[:, :1], g, axis=1)
        return U


class RandomnessSharedAcrossPositions(ChainSampler):
    """Two positions of a round draw from one uniform: the bonus token is drawn by inverse CDF with
    the uniform that drew the last draft. Every token's own law stays exact (the uniform is fresh for
    each round); only the bonus depends on the last draft beyond its law. The class of
    flashinfer-ai/flashinfer#424/#425 (uniform samples not unique per position), in the form a blind
    study step took (tests/study_bugs4/RESULTS.md), which passed every per-token test."""

    name, exact = "randomness_shared_across_positions", False
    source = "flashinfer-ai/flashinfer#424, #425 (uniform samples not unique per position)"

    def uniforms(self, rng: np.random.Generator, b: int, g: int) -> Uniforms:
        U = super().uniforms(rng, b, g)
        U.final = U.draft[:, -1].copy()  # the replacement / bonus uniform: the last draft's
        return U


class TemperatureTwice(ChainSampler):
    """Temperature applied twice to the target (once by the sampler, once in the verifier), so the
    verified law is sharper than the request's. A common class (lattice#388 forgot it instead)."""

    name, exact, source, needs = (
        "temperature_twice",
        False,
        "ohdearquant/lattice#388 (inverse)",
        SamplingSettings(temperature=0.7),
    )

    def target_rows(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None, *, bonus: bool
    ) -> npt.NDArray[np.float64]:
        t = settings.temperature if settings else 1.0
        return pair.target_table(SamplingSettings(temperature=t * t))[ridx]

    def draft_rows_sampled(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        t = settings.temperature if settings else 1.0
        return pair.draft_table(SamplingSettings(temperature=t * t))[ridx]


class DraftSettingsNotForwarded(ChainSampler):
    """The assistant did not inherit the request's generation config: it samples at the default
    temperature but the verifier is given q at the request's temperature.
    huggingface/transformers#28166."""

    name, exact, source, needs = "draft_settings_not_forwarded", False, "huggingface/transformers#28166", TEMP

    def draft_rows_sampled(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        return pair.draft_table(None)[ridx]

    def draft_rows_reported(
        self,
        pair: TablePair,
        ridx: npt.NDArray[np.int64],
        settings: SamplingSettings | None,
        sampled: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        return pair.draft_table(settings)[ridx]


class RejectOneLate(ChainSampler):
    """A rejection is handled one step late: the rejected draft is emitted anyway and the
    replacement follows it. openvinotoolkit/openvino.genai#4190."""

    name, exact, source = "reject_one_late", False, "openvinotoolkit/openvino.genai#4190"

    def round(
        self,
        pair: TablePair,
        ctx: npt.NDArray[np.int64],
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        out = super().round(pair, ctx, gamma, rng, settings)
        b = np.arange(len(out.num_accepted))
        stop = out.num_accepted < gamma
        late = out.tokens.copy()
        k = out.num_accepted
        s = np.nonzero(stop)[0]
        late[s, k[s] + 1] = out.tokens[s, k[s]]
        late[s, k[s]] = out.drafts[s, k[s]]
        n = np.where(stop, k + 1, k)
        return type(out)(late, n, out.drafts, late[b, n])


class ResidualWrongSign(ChainSampler):
    """The residual is computed as max(0, q - p) (operands swapped)."""

    name, exact, source = "residual_wrong_sign", False, "structural mutant"

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        w = np.maximum(q_row - p_row, 0.0)
        empty = ~(w > 0).any(-1)
        w[empty] = p_row[empty]
        return w


class DedupGreedyRatio(ChainSampler):
    """Deterministic top-1 proposal verified with the ratio p/q_draft instead of the one-hot rule
    (the 'inexact hybrid' of SafeAILab/EAGLE#110 / #221) and the residual of the full rule."""

    name, exact, source = "topk_candidate_with_draft_ratio", False, "SafeAILab/EAGLE#221"

    def draft_token(
        self, q_sampled: npt.NDArray[np.float64], u: npt.NDArray[np.float64], j: int, U: Uniforms
    ) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = np.argmax(q_sampled, axis=-1)
        return out

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        w: npt.NDArray[np.float64] = p_row.copy()
        w[np.arange(len(x)), x] = 0.0
        return w


class BonusFromPreviousRow(ChainSampler):
    """The bonus token is drawn from p_gamma (the row of the last verified draft) instead of
    p_{gamma+1}: an index off by one on the bonus row."""

    name, exact, source = "bonus_from_previous_row", False, "structural mutant (statistics.md 7g)"
    _last_ridx: npt.NDArray[np.int64]  # the rows of the last non-bonus call

    def target_rows(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None, *, bonus: bool
    ) -> npt.NDArray[np.float64]:
        if bonus:  # the engine asks for rows in order 0..gamma, so _last_ridx is row gamma - 1
            return pair.target_table(settings)[self._last_ridx]
        self._last_ridx = ridx
        return pair.target_table(settings)[ridx]


# --------------------------------------------------------------------------------------------
# decoys: unusual, but exact
# --------------------------------------------------------------------------------------------
class MultiplyInsteadOfDivide(ChainSampler):
    """Decoy: accept iff u * q(x) < p(x), with no division. Exact."""

    name, exact = "decoy_u_times_q", True

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        return U.accept * qx < px


class GumbelResidual(ChainSampler):
    """Decoy: replacement and bonus drawn by the exponential race (Gumbel-max) instead of the
    inverse CDF, as vLLM does. Exact."""

    name, exact = "decoy_exponential_race", True

    def uniforms(self, rng: np.random.Generator, b: int, g: int) -> Uniforms:
        U = super().uniforms(rng, b, g)
        self._rng = rng
        return U

    def draw(self, weights: npt.NDArray[np.float64], u: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        e = self._rng.exponential(size=weights.shape)
        with np.errstate(divide="ignore"):
            out: npt.NDArray[np.int64] = np.argmax(weights / e, axis=-1)
            return out


class OneHotRule(ChainSampler):
    """Decoy: the one-hot rule (accept x with probability p(x), else sample p without x). Exact for
    any proposal; lower acceptance."""

    rule = "one_hot"  # white-box strata assume the full rule with the pair's draft rows
    name, exact = "decoy_one_hot", True

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        return U.accept < px

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        w: npt.NDArray[np.float64] = p_row.copy()
        w[np.arange(len(x)), x] = 0.0
        return w


class SampleAndMatch(ChainSampler):
    """Decoy: the target samples every position; drafts are kept while equal (llama.cpp, MLX)."""

    rule = "sample_and_match"  # white-box strata assume the full rule with the pair's draft rows
    name, exact = "decoy_sample_and_match", True

    def accept(
        self, px: npt.NDArray[np.float64], qx: npt.NDArray[np.float64], U: Uniforms, ctx: dict[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.bool_]:
        P, X = ctx["P"], ctx["X"]
        g = X.shape[1]
        self._y = inverse_cdf_sample(P, U.target)  # [B, g + 1]
        out: npt.NDArray[np.bool_] = self._y[:, :g] == X
        return out

    def residual_weights(
        self, p_row: npt.NDArray[np.float64], q_row: npt.NDArray[np.float64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        w: npt.NDArray[np.float64] = p_row.copy()
        w[np.arange(len(x)), x] = 0.0  # the target's own draw, given it differs from x
        return w


class ArgmaxDraftOneHot(OneHotRule):
    """Decoy: argmax drafting verified with the one-hot rule, vLLM's draft_probs=None path
    (vllm-project/vllm#16899). Exact."""

    name, exact = "decoy_argmax_draft_one_hot", True

    def draft_token(
        self, q_sampled: npt.NDArray[np.float64], u: npt.NDArray[np.float64], j: int, U: Uniforms
    ) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = np.argmax(q_sampled, axis=-1)
        return out


class DraftOtherTemperatureHonest(ChainSampler):
    """Decoy: the draft samples at another temperature but reports that q honestly. Exact; only the
    acceptance rate changes."""

    rule = None  # white-box strata assume the full rule with the pair's draft rows
    name, exact, needs = "decoy_draft_other_temperature", True, TEMP

    def draft_rows_sampled(
        self, pair: TablePair, ridx: npt.NDArray[np.int64], settings: SamplingSettings | None
    ) -> npt.NDArray[np.float64]:
        return pair.draft_table(SamplingSettings(temperature=1.3))[ridx]


class TorchKernel(ChainSampler):
    """Decoy: the same rule through the torch kernel (a different vectorisation). Exact."""

    name, exact = "decoy_torch_kernel", True

    def round(
        self,
        pair: TablePair,
        ctx: npt.NDArray[np.int64],
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        import torch

        from ..algorithms.chain_torch import verify_chain_torch

        b = len(ctx)
        U = self.uniforms(rng, b, gamma)
        X = np.empty((b, gamma), dtype=np.int64)
        P: list[npt.NDArray[np.float64]] = []
        Q: list[npt.NDArray[np.float64]] = []
        c = ctx
        for j in range(gamma):
            r = pair.row_index(c, j)
            q = pair.draft_table(settings)[r]
            X[:, j] = inverse_cdf_sample(q, U.draft[:, j])
            Q.append(q)
            P.append(pair.target_table(settings)[r])
            c = X[:, j]
        P.append(pair.target_table(settings)[pair.row_index(c, gamma)])
        t = torch.from_numpy
        tok_t, n_t = verify_chain_torch(t(X), t(np.stack(Q, 1)), t(np.stack(P, 1)), t(U.accept), t(U.final))
        tok, n = tok_t.numpy(), n_t.numpy()
        return RoundOutput(tok, n, X, tok[np.arange(b), n])


class BonusDropped(ChainSampler):
    """Decoy: when every draft is accepted no bonus token is emitted (lossless but slower): the next
    round simply starts after the last draft. Exact in law."""

    name, exact, harness = "decoy_bonus_dropped", True, "sequence"

    def round(
        self,
        pair: TablePair,
        ctx: npt.NDArray[np.int64],
        gamma: int,
        rng: np.random.Generator,
        settings: SamplingSettings | None = None,
    ) -> RoundOutput:
        out = super().round(pair, ctx, gamma, rng, settings)
        full = out.num_accepted == gamma
        out.tokens[full, gamma] = -1
        b = np.arange(len(ctx))
        out.next_context = np.where(full, out.drafts[b, gamma - 1], out.next_context)
        return out


BUGS = [
    ResidualSoftmax,
    AlwaysAccept,
    ArgmaxDraftSoftQ,
    RawQReported,
    TargetDefaultParams,
    ReuseAcceptUniform,
    SharedNoise,
    UniformZero,
    MinPBonusOnly,
    TopKTopPOrder,
    InclusiveCompare,
    Bf16Draft,
    OrAccept,
    BonusFromPreviousRow,
    ContinueAfterRejection,
    ReplacementFromP,
    ReplacementFromQ,
    NoKVRollback,
    ResidualNotNormalised,
    OffByOneTargetRow,
    SameUniformAllPositions,
    RandomnessSharedAcrossPositions,
    TemperatureTwice,
    DraftSettingsNotForwarded,
    RejectOneLate,
    ResidualWrongSign,
    DedupGreedyRatio,
]
DECOYS = [
    ChainSampler,
    MultiplyInsteadOfDivide,
    GumbelResidual,
    OneHotRule,
    SampleAndMatch,
    ArgmaxDraftOneHot,
    DraftOtherTemperatureHonest,
    TorchKernel,
    BonusDropped,
]
