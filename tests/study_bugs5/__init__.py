"""Round steps for a fifth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study script (``scripts/generalisation_study.py``) or any earlier
study's results (``tests/study_bugs*/RESULTS.md``, ``scripts/results/generalisation*``), without
reading git log messages, and without reading any diagnosis output (every audit ran with
``--no-diagnosis``). What was read: ``tests/study_bugs/_util.py`` (the correct helpers every step
uses), the entry format of ``tests/study_bugs4/__init__.py`` and the head of
``tests/study_bugs4/acceptance.py``, the function names only of the earlier sets (to avoid their
mechanisms), ``docs/adapters.md``, ``specverify/dists`` (for the ``--logits`` steps), the plan's
settings grid (``specverify/audit/pipeline/plan.py``) and its seeded-reproducibility check
(``specverify/audit/pipeline/exact_checks.py``, so that the exact stateful steps reset per
request), and the research notes (``/work/shared/research/``, the seed article).

Buggy speculative-decoding round steps, each a different mistake modelled on a real report from
the research notes (tracker reference or the notes' bug id) or written for the study with the
reason it is plausible, chosen to differ from the mechanisms of ``tests/study_bugs`` to
``tests/study_bugs4``, and exact round steps written in unusual ways, several of which look like
bugs. ``STUDY`` lists them; the ``family`` labels are the writer's own. Every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis

and RESULTS.md records the verdicts (every buggy one FAILs, every correct one PASSes). The
helpers come from ``study_bugs._util`` (correct building blocks); every mistake lives in its step,
on the line marked ``# BUG:``. Stateful steps are module-level objects whose ``__call__`` is the
step (the audit calls the rounds of one sequence consecutively; a prefix that does not continue
the previous round's output is a new request).
"""

STUDY = [
    # ---- target rows and the target's context ------------------------------------------------
    {
        "spec": "study_bugs5.rows:draft_loop_mutates_shared_context",
        "buggy": True,
        "flags": [],
        "family": "target_context",
        "mechanism": "the draft loop appends each draft to the running context ctx and the verification pass is called with ctx as its prefix: target row j is p(. | prefix + xs + xs[:j]) instead of p(. | prefix + xs[:j]) (the drafts twice in the context); draft rows are right.",
        "source": "written for the study: a list mutated in place and reused as the verify prefix (Python aliasing), next to ml-explore/mlx-lm#1175 (B28: the verify loop fed the wrong context)",
    },
    {
        "spec": "study_bugs5.rows:target_context_missing_last_committed_token",
        "buggy": True,
        "flags": [],
        "family": "target_context",
        "mechanism": "the verification pass is fed the drafts only, as if the last committed token were already in the target's cache: target row j is p(. | prefix[:-1] + xs[:j]) instead of p(. | prefix + xs[:j]), bonus row included.",
        "source": "written for the study from ohdearquant/lattice#243 (B36: verify loop shifted by one against the last committed token) and huggingface/transformers#30042 (B05)",
    },
    {
        "spec": "study_bugs5.rows:target_masked_to_draft_support",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "each draft position's target row is restricted to the ids with q_i > 0 and renormalised before the ratio and the residual: acceptance min(1, p_i'(x) / q_i(x)) with p_i' = p_i 1[q_i > 0] / Z_i, replacement from (p_i' - q_i)+; the bonus row is unmasked.",
        "source": "written for the study from masks that reach one side of the speculative path (vllm-project/vllm PR #36138 / #43338, lmdeploy#4551) and EAGLE-3's reduced draft vocabulary (engines notes, section 5)",
    },
    # ---- draft rows and the draft's law ------------------------------------------------------
    {
        "spec": "study_bugs5.rows:q_rows_alias_one_buffer",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "each draft row is copied into one preallocated buffer and the buffer itself is appended to the list of rows: every ratio and residual uses q_{gamma-1} (a draft where it is 0 is accepted); drafts are sampled from the right rows.",
        "source": "written for the study: a static probability buffer stored by reference (out= / CUDA-graph buffers); the q-provenance class of huggingface/transformers#47932 (B04)",
    },
    {
        "spec": "study_bugs5.rows:draft_top_k_sampling_reports_full_q",
        "buggy": True,
        "flags": [],
        "family": "draft_law",
        "mechanism": "the drafter samples each draft from its row restricted to the top 5 ids and renormalised, but reports the full row as q: the ratio divides by q(x) instead of q(x) / Z_top5 and the residual subtracts the full row.",
        "source": "huggingface/transformers#47932 / #47961 (B04: candidate generators sampled from processed logits and returned the unprocessed distribution as q)",
    },
    # ---- acceptance test ---------------------------------------------------------------------
    {
        "spec": "study_bugs5.acceptance:comparison_flipped",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "the test is u > min(1, p(x) / q(x)): a draft is accepted with probability 1 - min(1, p(x) / q(x)), never when p(x) >= q(x); replacement and bonus are standard.",
        "source": "written for the study: a flipped comparison operator, next to sgl-project/sglang#35771 (B21: the acceptance comparison's boundary)",
    },
    {
        "spec": "study_bugs5.acceptance:match_test_with_residual_replacement",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "strict acceptance (t_i ~ p_i, keep x_i iff t_i == x_i: probability p_i(x_i)) wired to the probabilistic rule's recovery: on a mismatch the token is drawn from (p_i - q_i)+ instead of being t_i; bonus from p_gamma.",
        "source": "TensorRT-LLM's strict acceptance beside its rejection-sampling path (engines notes, Table A) and sgl-project/sglang#31214 (B22: the verify path silently switched modes)",
    },
    {
        "spec": "study_bugs5.acceptance:ratio_reads_draft_cdf_not_pmf",
        "buggy": True,
        "flags": [],
        "family": "acceptance_draft_prob",
        "mechanism": "the drafter samples by inverse CDF and the verifier reads its cumulative row as the draft probabilities: the ratio is p(x) / Q(x) with Q(x) = sum_{v <= x} q(v) >= q(x); the residual uses the probability row.",
        "source": "written for the study: the sampler's cumulative array stored where q was expected (q-provenance class of deepseek-ai/DeepSpec#31, B34, and llama.cpp examples/speculative, B32)",
    },
    {
        "spec": "study_bugs5.acceptance:ratio_gathered_from_sorted_rows",
        "buggy": True,
        "flags": [],
        "family": "acceptance_token_index",
        "mechanism": "p_i and q_i are sorted in descending order and the ratio is gathered at the token id: x is accepted with min(1, p_(x) / q_(x)), the (x+1)-th largest probabilities of the two rows (0/0 rejects, positive/0 accepts); replacement and bonus are standard.",
        "source": "written for the study from llama.cpp examples/speculative (B32: index-aligned entries of two sorted candidate lists) and sort-based truncation kernels (vLLM's apply_top_k_top_p)",
    },
    {
        "spec": "study_bugs5.acceptance:ratio_reads_last_drafted_token",
        "buggy": True,
        "flags": [],
        "family": "acceptance_token_index",
        "mechanism": "every position's ratio is evaluated at the draft loop's leftover variable, the last draft x_{gamma-1}: x_i is accepted with min(1, p_i(x_{gamma-1}) / q_i(x_{gamma-1})) (q_i = 0 there accepts, 0/0 rejects); right at the last position.",
        "source": "written for the study: a stale loop variable reused in the verify loop",
    },
    # ---- accepted count and the tokens emitted from it ---------------------------------------
    {
        "spec": "study_bugs5.counting:full_acceptance_default_index_gamma_minus_one",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "the first rejection is found with next(..., gamma - 1): after a full acceptance the round emits xs[:gamma - 1] and a draw from (p_{gamma-1} - q_{gamma-1})+ (p_{gamma-1} when empty) in place of the accepted last draft, and no bonus; rejections are right.",
        "source": "written for the study: an off-by-one default of the first-rejection search, next to openvinotoolkit/openvino.genai#4190 (B38)",
    },
    {
        "spec": "study_bugs5.counting:output_buffer_padded_with_zero_not_placeholder",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "the [gamma + 1] output buffer is initialised with 0 and the entries != -1 are returned: after a rejection at n the round emits xs[:n] + [replacement] + [0] * (gamma - n).",
        "source": "vllm-project/vllm#46899 and flashinfer-ai/flashinfer#879 (B19): the -1 placeholder convention of batched samplers' outputs, with the buffer filled with the wrong sentinel",
    },
    {
        "spec": "study_bugs5.counting:emitted_slice_includes_last_committed_token",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "with seq = [last committed token] + xs the round emits seq[:n] + [final token] instead of seq[1:n + 1] + [final]: after n >= 1 kept drafts it repeats the last committed token, emits x_0 .. x_{n-2} and drops x_{n-1}; right when n = 0.",
        "source": "ohdearquant/lattice#243 / #258 (B36: the verify loop shifted by one against a layout starting with the last committed token)",
    },
    {
        "spec": "study_bugs5.counting:leading_accepts_via_cumsum_arange_off_by_one",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "n = sum(cumsum(acc) == arange(gamma)) instead of arange(1, gamma + 1): 0 after a full acceptance (a draw from (p_0 - q_0)+ alone), 1 + the run of acceptances after a rejected x_0 (the rejected draft emitted), otherwise the number of positions whose prefix holds exactly one rejection; emits xs[:n] and the token from row n.",
        "source": "written for the study: an off-by-one torch.arange(k) in a vectorised accepted-length computation",
    },
    # ---- the token after a rejection ---------------------------------------------------------
    {
        "spec": "study_bugs5.replacement:zero_accepted_falls_back_to_plain_decoding",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "a rejection at position 0 is treated as 'nothing speculated' and the token is drawn from p_0 instead of (p_0 - q_0)+; rejections at later positions use the residual.",
        "source": "written for the study: a no-accept fast path routed to the regular sampler (vLLM V1's regular sampler serves the bonus, engines notes section 1.3; vllm-project/vllm-ascend#16396, rows routed through the wrong path)",
    },
    {
        "spec": "study_bugs5.replacement:race_exponential_sign_dropped",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is argmax w / E with w = (p - q)+ and E = log(u) < 0 instead of -log(u): an id with w = 0 scores 0 and beats the support (the lowest such id wins); only when w > 0 everywhere is the winner in the support, by the smallest w / |log u|.",
        "source": "vLLM V1's recovered-token race argmax(prob / E), E ~ Exp(1) (engines notes, section 1.4), with the sign of -log(u) lost",
    },
    {
        "spec": "study_bugs5.replacement:residual_subtracts_scalar_q_of_draft",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the residual is maximum(p - q[x], 0): the rejected draft's q(x), a scalar, is subtracted from every entry, so the replacement is drawn from (p(v) - q(x))+ normalised (p when empty) instead of (p(v) - q(v))+.",
        "source": "written for the study: an index left on the draft row, which broadcasting accepts; the clamp(p - q, 0) line of transformers' _speculative_sampling",
    },
    {
        "spec": "study_bugs5.replacement:residual_sampled_over_flattened_block",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the block's residuals R = (P[:gamma] - Q)+ [gamma, V] are sampled flattened and reduced modulo V instead of row i: the replacement after a rejection at i follows sum_j (p_j - q_j)+ / sum_j R_j over every position of the block, not (p_i - q_i)+.",
        "source": "written for the study: a batched residual sampled over the wrong extent (the rejected row never selected), next to vLLM V1's vectorised recovered-token kernels (engines notes, section 1.4)",
    },
    {
        "spec": "study_bugs5.replacement:residual_support_mask_passed_as_weights",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the sampler is handed residual > 0 (the support mask of the empty-residual check) instead of the residual: the replacement is uniform over {v: p(v) > q(v)} (from p when empty) instead of proportional to (p - q)+.",
        "source": "written for the study: a boolean mask passed where weights are expected",
    },
    # ---- the bonus token ---------------------------------------------------------------------
    {
        "spec": "study_bugs5.bonus:bonus_from_stale_loop_variable",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the verify loop binds p = ps[i] and the bonus is sampled from p after the loop: p_{gamma-1} = p(. | prefix + xs[:-1]) instead of p_gamma.",
        "source": "written for the study: a loop variable read after the loop (bonus-row class of vllm-project/vllm#42744, B11)",
    },
    {
        "spec": "study_bugs5.bonus:bonus_read_at_padded_block_end",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the drafter stops at its first draft with q(x) < 0.4 (kept); the k-draft block is padded with id 0 to gamma for the verification pass; the drafts are verified on the right rows but the bonus is read at row gamma, p(. | prefix + xs + [0] * (gamma - k)), instead of row k.",
        "source": "written for the study from static-shape verification (CUDA-graph padding; HabanaAI/vllm-fork#1780, B41, padding rows; vllm-project/vllm#46899, placeholders)",
    },
    {
        "spec": "study_bugs5.bonus:bonus_sampler_uses_model_generation_defaults",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the bonus goes through a regular sampler that applies the model's generation_config defaults (top_k = 20, then top_p = 0.8) to p_gamma; verified positions use the rows as given.",
        "source": "vllm-project/vllm#42744 (B11: settings applied at the bonus position only) and google-ai-edge/LiteRT-LM#3017 (B42: the speculative path not using the request's parameters); Qwen2.5's generation_config defaults",
    },
    # ---- numerics ----------------------------------------------------------------------------
    {
        "spec": "study_bugs5.numerics:log1p_used_for_log_probs",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the log-space test log u < log1p(p(x)) - log1p(q(x)): acceptance min(1, (1 + p(x)) / (1 + q(x))), near 1 for every draft; replacement and bonus are standard.",
        "source": "written for the study: log1p picked 'for stability' where log was meant, next to vllm-project/vllm PR #46665 (log-space arithmetic of the sampler)",
    },
    {
        "spec": "study_bugs5.numerics:inverse_cdf_without_cumsum",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the replacement is searchsorted(w, u * sum(w)) on the residual weights w = (p - q)+ themselves (no cumsum): a binary search over an unsorted array (capped at the last id), not a draw from w.",
        "source": "written for the study: the cumulative sum dropped from an inverse-CDF sampler",
    },
    {
        "spec": "study_bugs5.numerics:renormalise_without_axis",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the target block is divided by P.sum() (no axis): every row is scaled by 1 / (gamma + 1), so the ratio is p(x) / ((gamma + 1) q(x)) and the residual (p / (gamma + 1) - q)+; the bonus is unaffected.",
        "source": "written for the study: a reduction missing axis=-1, keepdims=True (class of B01, huggingface/transformers#28508)",
    },
    # ---- state across rounds and requests ----------------------------------------------------
    {
        "spec": "study_bugs5.state:draft_prob_buffer_not_cleared_on_rejection",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "draft rows are stored per absolute position, written only past a high-water mark that is not moved back after a rejection: drafts come from fresh rows, but the next round's positions up to the old block end use last round's rows (drawn in the context with the rejected draft) for ratio and residual.",
        "source": "written for the study from draft-probability caches kept across steps (vLLM MRV2 #35461) and rewind bookkeeping off by some slots (lablup/mlxcel#994, B30)",
    },
    {
        "spec": "study_bugs5.state:replacement_slot_keeps_rejected_draft",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "after a rejection at n the target cache's valid count is advanced by n + 1: the replacement is never fed and every later pass of the request sees the rejected x_n in its place (context ... + xs[:n] + [x_n] instead of ... + xs[:n] + [r]).",
        "source": "written for the study from num-computed-tokens bookkeeping (vllm-project/vllm#52071) and huggingface/text-generation-inference#2711 (B39: KV slots holding other tokens than assumed)",
    },
    {
        "spec": "study_bugs5.state:pending_bonus_leaks_into_next_request",
        "buggy": True,
        "flags": [],
        "family": "state_across_requests",
        "mechanism": "the bonus of a fully accepted block is held and emitted at the head of the next call (exact within a request); it is never flushed when a request ends, so the next request starts with a token sampled for the previous request's context.",
        "source": "vllm-project/vllm#46899 (stale placeholders fed back) and vllm-project/vllm#52071 (per-request state left over), with the request-slot reuse of NVIDIA/TensorRT-LLM#19487 (B33)",
    },
    # ---- settings parity (raw logits) --------------------------------------------------------
    {
        "spec": "study_bugs5.parity:ratio_from_unnormalised_logits",
        "buggy": True,
        "flags": ["--logits"],
        "family": "numerics",
        "mechanism": "the log-space test uses the processed logits without log-softmax: log u < z_p(x) - z_q(x), acceptance min(1, (p(x) / q(x)) (Z_p / Z_q)); drafts, residual and bonus use the processed probabilities.",
        "source": "written for the study: log-softmax dropped as 'shift-invariant', next to huggingface/transformers#47932 (B04: logits in place of the distribution) and vllm-project/vllm PR #46665",
    },
    {
        "spec": "study_bugs5.parity:target_top_k_threshold_over_block",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the verifier's top-k takes the k-th largest tempered logit over the whole [gamma + 1, V] target block instead of per row (each row keeps at least its maximum); top-p and min-p follow per row; the draft uses the library's pipeline.",
        "source": "written for the study: the reduction axis of a batched top-k, next to sgl-project/sglang#36173 (B23: the verifier's truncation differed from the sampler's)",
    },
    {
        "spec": "study_bugs5.parity:target_top_p_unsorted_with_gather",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the verifier's top-p masks the descending-sorted target row and maps it back with sorted[order] (a gather) instead of scattering to order: id v gets the value of id order[order[v]], a permutation of the truncated row; the draft uses the library's pipeline.",
        "source": "written for the study from sort-based top-p (vLLM's apply_top_k_top_p scatters the sorted logits back), next to sgl-project/sglang#36173 (B23)",
    },
    {
        "spec": "study_bugs5.parity:target_repetition_penalty_masks_unseen_tokens",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the verifier's repetition penalty selects tokens with counts >= 0 instead of counts > 0: every target logit is penalised (divided when positive, multiplied when negative), not only the seen ones; the draft uses the library's pipeline.",
        "source": "written for the study: a wrong comparison in a hand-written verify-path penalty, next to sgl-project/sglang#21258 (B24)",
    },
    # ---- correct steps written in unusual ways -----------------------------------------------
    {
        "spec": "study_bugs5.correct:accept_p_over_max_p_q",
        "buggy": False,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "exact: accept with p(x) / max(p(x), q(x)) = min(1, p(x) / q(x)) and replace from p - min(p, q) = (p - q)+.",
        "source": "written for the study (looks like a normaliser by the wrong maximum)",
    },
    {
        "spec": "study_bugs5.correct:bonus_skipped_when_last_ratio_below_one",
        "buggy": False,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "exact: after a full acceptance the bonus is emitted only when p_{gamma-1}(x) >= q_{gamma-1}(x); otherwise the next round draws that position from the target's law.",
        "source": "written for the study (looks like a target-dependent early stop)",
    },
    {
        "spec": "study_bugs5.correct:speculation_paused_by_acceptance_ema",
        "buggy": False,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "exact: an EMA of the acceptance fraction below 0.4 switches to plain decoding (one token from p(. | prefix)) for 3 calls; decisions depend on the past only; reset per request.",
        "source": "TensorRT-LLM's acceptance_rate_threshold auto-disable (engines notes, Table A)",
    },
    {
        "spec": "study_bugs5.correct:unused_coins_carried_over",
        "buggy": False,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "exact: coins come from a buffer refilled gamma at a time; a round consumes the coins it compares (the rejecting one included) and leaves the rest, never looked at, for the next round; emptied per request.",
        "source": "written for the study (looks like stale random numbers; next to vllm-project/vllm-ascend#13608, B17)",
    },
    {
        "spec": "study_bugs5.correct:coins_and_race_noise_from_one_uniform_table",
        "buggy": False,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "exact: one [gamma, V] uniform table U: the coin of draft i is U[i, x_i] and the replacement is argmax (p_i - q_i)+ / (-log U[i]); the coin sits at the one id whose residual weight is 0 whenever a rejection is possible.",
        "source": "written for the study (looks like the shared-noise bug of vllm-project/vllm#47386 / #54282, B08)",
    },
]
