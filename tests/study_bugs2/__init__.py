"""Round steps for a second blind generalisation study of specverify's automatic diagnosis.

Written without reading specverify's diagnosis code, catalogue or their tests (nor the first
study's results): buggy speculative-decoding round steps, each a different mistake modelled on a
real report (or written for the study, with the reason it is plausible), chosen as variants of the
mechanisms in ``tests/study_bugs`` rather than repeats of them, and correct steps written in
unusual ways. ``STUDY`` lists them; every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis

and RESULTS.md records the verdicts (every buggy one FAILs, every correct one PASSes). The
helpers come from ``study_bugs._util`` (correct building blocks; every mistake lives in its step).
"""

STUDY = [
    # ---- target_row_offset -------------------------------------------------------------------
    {
        "spec": "study_bugs2.rows:target_row_plus_two",
        "buggy": True,
        "flags": [],
        "family": "target_row_offset",
        "mechanism": "draft i is verified (ratio and residual) against target row min(i + 2, gamma), two rows late, instead of row i.",
        "source": "written for the study after vllm-project/vllm#51812 (logit rows misaligned with spec-token indices), with an offset of two",
    },
    {
        "spec": "study_bugs2.rows:last_position_shifted",
        "buggy": True,
        "flags": [],
        "family": "target_row_offset",
        "mechanism": "only the last draft is verified (ratio and residual) against row gamma (logits[-1], which conditions on it) instead of row gamma - 1; the other positions use the right rows.",
        "source": "huggingface/transformers#30042 (B05: logits slicing off by one at the end of the candidate block)",
    },
    # ---- draft_row_offset --------------------------------------------------------------------
    {
        "spec": "study_bugs2.rows:residual_q_next_row",
        "buggy": True,
        "flags": [],
        "family": "draft_row_offset",
        "mechanism": "the ratio uses the right draft row q_i but the replacement at position i is drawn from (p_i - q_{i+1})+, the next draft row (the last position keeps its own).",
        "source": "written for the study: ratio and recovery read draft_probs through separate index expressions (vLLM's rejection sampler uses separate kernels) and the recovery's carries the target rows' +1 bonus offset",
    },
    {
        "spec": "study_bugs2.rows:q_rows_reversed",
        "buggy": True,
        "flags": [],
        "family": "draft_row_offset",
        "mechanism": "the draft rows are popped from a stack, so draft i is tested (ratio and residual) with the row of draft gamma - 1 - i.",
        "source": "written for the study: a list used as a stack where a queue was meant; invisible at gamma = 1",
    },
    # ---- acceptance_form ---------------------------------------------------------------------
    {
        "spec": "study_bugs2.acceptance:ratio_squared",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "two independent coins must both pass against min(1, p(x)/q(x)), so a draft is accepted with probability min(1, p/q) squared.",
        "source": "written for the study: a duplicated test left after a refactor (the class of alibaba/rtp-llm#1295, an acceptance assembled from two conditions)",
    },
    {
        "spec": "study_bugs2.acceptance:coin_scaled_by_draft_peak",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted iff u * max(q) <= p(x), i.e. with probability min(1, p(x)/max q) instead of min(1, p(x)/q(x)).",
        "source": "written for the study: textbook rejection sampling's envelope constant M taken over the whole draft row",
    },
    {
        "spec": "study_bugs2.acceptance:accept_iff_target_supports",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted deterministically iff p(x) > 0; no coin is drawn.",
        "source": "written for the study: the acceptance reduced to the target's filter/grammar mask (cf. vllm-project/vllm#19482, processors on the rejection path)",
    },
    {
        "spec": "study_bugs2.acceptance:accept_with_prob_q",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted with probability q(x), the draft's own probability, while the replacement is (p - q)+.",
        "source": "vllm-project/vllm#40149 (the one-hot rule accepts with p(x)) with the two rows swapped",
    },
    {
        "spec": "study_bugs2.acceptance:ratio_of_log_probs",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted with probability min(1, log q(x) / log p(x)), a ratio of log-probabilities instead of probabilities.",
        "source": "written for the study: verifiers that hold log_softmax scores (ml-explore/mlx-lm#1085, vLLM logprobs) dividing them as if they were probabilities",
    },
    {
        "spec": "study_bugs2.acceptance:sqrt_ratio",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted with probability min(1, sqrt(p(x)/q(x))).",
        "source": "written for the study: a factor 0.5 on the log-ratio (lossy relaxations such as vLLM's typical acceptance are tuned this way)",
    },
    # ---- accept_count ------------------------------------------------------------------------
    {
        "spec": "study_bugs2.counting:count_minus_one",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "the count is the number of leading accepts minus one (floored at 0), and the round emits that many drafts and then a residual draw at that position, even when every draft passed.",
        "source": "written for the study: an index of the last accepted draft used as a length (the n_matches confusion of transformers' _speculative_sampling)",
    },
    {
        "spec": "study_bugs2.counting:count_capped_below_gamma",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "the count is capped at gamma - 1, so a fully accepted round drops its last draft and emits a residual draw at that position instead of the draft and a bonus.",
        "source": "written for the study: a bounds clamp for an unconditional draft_probs[n] gather (vLLM's rejection sampler gathers the recovered token for every request)",
    },
    # ---- verification_stops ------------------------------------------------------------------
    {
        "spec": "study_bugs2.counting:stop_at_last_rejection",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "verification stops at the last rejected draft instead of the first, so drafts rejected before it are emitted as accepted.",
        "source": "written for the study: max for min on np.where(~accepted) (the argmin/argmax-on-mask idiom of batched kernels)",
    },
    {
        "spec": "study_bugs2.counting:skip_rejected_draft",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "a rejected draft is dropped without a replacement and verification continues with the next draft against the next row (which conditions on the dropped draft), ending with a bonus from row gamma.",
        "source": "antonellof/ferrox#307 (control flow after a mismatch changed), with continue for break",
    },
    # ---- replacement_law ---------------------------------------------------------------------
    {
        "spec": "study_bugs2.replacement:residual_abs",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from |p - q| normalised instead of (p - q)+.",
        "source": "written for the study: |p - q| is the TV integrand code reuses; the class of vllm-project/vllm-ascend#7807 (an unadjusted residual)",
    },
    {
        "spec": "study_bugs2.replacement:residual_next_target_row",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement at position i is drawn from (p_{i+1} - q_i)+, the next target row, while the ratio uses p_i.",
        "source": "written for the study: the recovery kernel reads target_probs[pos + 1] (the bonus offset), the split-index class of vllm-project/vllm#51812",
    },
    {
        "spec": "study_bugs2.replacement:residual_q_without_x",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from (p - q')+ where q' is the draft row with the rejected token zeroed and renormalised.",
        "source": "vllm-project/vllm#40149 (the one-hot rule's 'remove x') mixed into the full rule's residual on the draft side",
    },
    # ---- bonus_law ---------------------------------------------------------------------------
    {
        "spec": "study_bugs2.bonus:bonus_from_residual_of_last_position",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the bonus token is drawn from (p_gamma - q_{gamma-1})+, the residual against the last draft row, instead of from p_gamma.",
        "source": "written for the study: bonus and recovery share one output path (as in vLLM's rejection sampler) and the bonus is not exempted from the residual",
    },
    {
        "spec": "study_bugs2.bonus:bonus_from_first_row",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the bonus token is sampled from target row 0 (the row of the first draft) instead of row gamma.",
        "source": "vllm-project/vllm#13933 (bonus sampled at a per-request logits offset) with the start offset for the end; class of huggingface/transformers#30042",
    },
    # ---- settings_parity (--logits) ----------------------------------------------------------
    {
        "spec": "study_bugs2.parity:draft_top_k_target_not",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the draft applies top-k but the target's verification rows do not (every other knob on both sides).",
        "source": "vllm-project/vllm#15063 (V1 spec decode enabled top-k/top-p by masking the target logits, missing before)",
    },
    {
        "spec": "study_bugs2.parity:temperature_only_on_draft",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "when sampling (temperature > 0), temperature is applied to the draft's logits only and the target's rows are processed at temperature 1; greedy requests are unaffected.",
        "source": "z-lab/dflash#74 (draft and target sampled at different temperatures), mirrored to the verify side",
    },
    {
        "spec": "study_bugs2.parity:target_min_p_before_temperature",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "on the target the min-p mask is computed from the logits before temperature, while the draft applies min-p after temperature.",
        "source": "written for the study: min-p placement relative to temperature differs between engines (llama.cpp chain vs vLLM sampler)",
    },
    {
        "spec": "study_bugs2.parity:target_top_k_plus_one",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the target's top-k keeps k + 1 tokens while the draft keeps k.",
        "source": "written for the study: a 0- vs 1-based index in a hand-written kth-value lookup (torch.kthvalue is 1-based)",
    },
    # ---- numerics ----------------------------------------------------------------------------
    {
        "spec": "study_bugs2.numerics:draft_probs_stored_top8",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "only the 8 largest entries of each draft row are stored for verification (the rest read as 0), so a draft drawn outside them is accepted outright and the residual is (p - q_top8)+.",
        "source": "EAGLE-style drafters that keep only top-k draft probabilities (sgl-project/sglang#10308), with the full row sampled",
    },
    {
        "spec": "study_bugs2.numerics:p_clamped_at_1e2",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "target probabilities are clamped from below at 1e-2 and used unnormalised in the ratio, the residual and the bonus.",
        "source": "written for the study: a probability floor for a later log, the class of vllm-project/vllm#2336 (B43)",
    },
    {
        "spec": "study_bugs2.numerics:softmax_fixed_shift_float32",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "target rows are renormalised by a float32 softmax of log p shifted by a fixed -100, which lands in the subnormal range, quantising probabilities and zeroing small ones.",
        "source": "written for the study: a constant shift for a bounded-logit softmax; vllm-project/vllm#46665 (float32 precision loss on the residual path)",
    },
    # ---- correct, unusual --------------------------------------------------------------------
    {
        "spec": "study_bugs2.correct:vectorised_round",
        "buggy": False,
        "flags": [],
        "family": "accept_count",
        "mechanism": "exact: coins as an array test u*q(x) < p(x), the first rejection as argmin of the mask padded with False, and a table of laws [(p_n - q_n)+ ..., p_gamma] indexed by it.",
        "source": "written for the study (the vectorised form of batched kernels)",
    },
    {
        "spec": "study_bugs2.correct:log_space",
        "buggy": False,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "exact: the test is log(u) < log p(x) - log q(x) and the replacement and bonus are Gumbel-max on the logs of their weights.",
        "source": "ml-explore/mlx-lm#1085 (log-space acceptance)",
    },
    {
        "spec": "study_bugs2.correct:residual_from_cumsum_difference",
        "buggy": False,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "exact: the residual is p - min(p, q) and is drawn by searchsorted on its cumulative sums with u scaled by the total.",
        "source": "written for the study (an unusual but equal residual form)",
    },
    {
        "spec": "study_bugs2.correct:while_loop_interleaved",
        "buggy": False,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "exact: a while loop whose index advances on acceptance, coin u*q(x) < p(x), the bonus handled as position gamma inside the loop.",
        "source": "written for the study",
    },
]
