"""Round steps for a fourth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests, the study script or any earlier study's
results, and without reading any diagnosis output (every audit ran with ``--no-diagnosis``). What
was read: ``tests/study_bugs/_util.py`` (the correct helpers every step uses), the entry format of
``tests/study_bugs3/__init__.py`` and the head of ``tests/study_bugs3/acceptance.py``, the function
names only of the earlier sets (to avoid their mechanisms), ``docs/adapters.md``, the settings
pipeline ``specverify/dists`` (for the ``--logits`` steps) and the research notes
(``/work/shared/research/``, the seed article).

Buggy speculative-decoding round steps, each a different mistake modelled on a real report from
the research notes (tracker reference or the notes' bug id) or written for the study with the
reason it is plausible, chosen to differ from the mechanisms of ``tests/study_bugs``,
``tests/study_bugs2`` and ``tests/study_bugs3``, and exact round steps written in unusual ways,
several of which look like bugs. ``STUDY`` lists them; the ``family`` labels are the writer's own.
Every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis

and RESULTS.md records the verdicts (every buggy one FAILs, every correct one PASSes). The
helpers come from ``study_bugs._util`` (correct building blocks); every mistake lives in its step,
on the line marked ``# BUG:``. Stateful steps are module-level objects whose ``__call__`` is the
step (the audit calls the rounds of one sequence consecutively).
"""

STUDY = [
    # ---- target rows and the target's context ------------------------------------------------
    {
        "spec": "study_bugs4.rows:verify_chunks_lose_earlier_chunk",
        "buggy": True,
        "flags": [],
        "family": "target_context",
        "mechanism": "the verification pass runs in chunks of two drafts, each scored on the committed prefix alone: target row j >= 2 (bonus row included) is p(. | prefix + xs[2:j]) instead of p(. | prefix + xs[:j]).",
        "source": "written for the study, modelled on vllm-project/vllm#53488 (MTP + chunked prefill) and huggingface/text-generation-inference#2711 (B39: non-contiguous KV slots)",
    },
    {
        "spec": "study_bugs4.rows:target_retokenisation_merges_repeats",
        "buggy": True,
        "flags": [],
        "family": "target_row_offset",
        "mechanism": "equal adjacent drafts are merged into one token before the target pass; the fewer rows are padded with the last one and indexed by draft position, so after a repeat every draft (and the bonus) is verified against a row conditioned on a shorter context.",
        "source": "huggingface/transformers#46124 (universal assisted generation re-tokenises the draft for the target)",
    },
    # ---- draft rows and the draft's law ------------------------------------------------------
    {
        "spec": "study_bugs4.rows:q_gather_with_unpadded_stride",
        "buggy": True,
        "flags": [],
        "family": "draft_row_offset",
        "mechanism": "the draft rows live in a flat buffer of stride V + 1 but q_i(x) for the ratio is gathered at i * V + x: for i >= 1 the ratio divides by q_i(x - i) when x >= i, a padding 0 when x = i - 1 (accepted outright), q_{i-1}(V + 1 + x - i) below; the residual uses the right row.",
        "source": "written for the study from flashinfer-ai/flashinfer#879 / #3551 (B19: placeholder ids and the probability layout) and GHSA-8wr5-jm2h-8r4f (padded vocabulary)",
    },
    {
        "spec": "study_bugs4.rows:ngram_hit_overrides_draft_sample",
        "buggy": True,
        "flags": [],
        "family": "draft_law",
        "mechanism": "a hybrid drafter proposes, when the context's last token occurred earlier, the token that followed its latest earlier occurrence (a deterministic prompt-lookup hit), else samples from q_i; the ratio and residual always use the draft model's q_i.",
        "source": "written for the study from prompt-lookup drafting (transformers' PromptLookupCandidateGenerator) on a draft-model path; statistics notes 7b (deterministic candidates with p / q_draft are not exact)",
    },
    # ---- acceptance test ---------------------------------------------------------------------
    {
        "spec": "study_bugs4.acceptance:ratio_hoisted_out_of_loop",
        "buggy": True,
        "flags": [],
        "family": "acceptance_token_index",
        "mechanism": "min(1, p_0(x_0) / q_0(x_0)) is computed once before the loop and every draft is accepted with it (fresh uniforms); residual and bonus are standard.",
        "source": "written for the study: a loop-invariant ratio hoisted out of the verify loop (index [0, x[0]] for [i, x[i]]); harmless at gamma = 1",
    },
    {
        "spec": "study_bugs4.acceptance:exponential_threshold_flipped",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "the test in log space is written E < log(p(x) / q(x)) with E ~ Exp(1) (the exact form is E > log(q / p)): acceptance 1 - q/p when p > q, never otherwise.",
        "source": "written for the study, next to vllm-project/vllm PR #46665 (log-space arithmetic of the sampler)",
    },
    {
        "spec": "study_bugs4.acceptance:strict_match_against_target_argmax",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "the verifier samples t_i ~ p_i at each position but keeps a draft iff it equals argmax p_i; at the first mismatch t_i is emitted; bonus t_gamma ~ p_gamma.",
        "source": "sgl-project/sglang#31214 (B22: the verify path silently took the argmax comparison) with TensorRT-LLM's strict acceptance (engines notes, Table A)",
    },
    {
        "spec": "study_bugs4.acceptance:accept_with_prob_min_p_q",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted with probability min(p(x), q(x)) instead of min(1, p(x) / q(x)); residual and bonus are standard.",
        "source": "written for the study: the seed article's overall acceptance beta = sum min(p, q) read per token",
    },
    {
        "spec": "study_bugs4.acceptance:accept_with_row_acceptance_rate",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "every draft is accepted with its position's expected acceptance rate sum_v min(p_i, q_i)(v), independent of the drafted token; residual and bonus are standard.",
        "source": "written for the study from the acceptance-rate bookkeeping engines keep (engines notes, Table D: alpha = sum min(p, q))",
    },
    # ---- accepted count and where verification stops -----------------------------------------
    {
        "spec": "study_bugs4.counting:draft_stop_drops_triggering_token",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "the drafter stops at its first draft with q(x) < 0.4 and discards that draft; position i is then drawn from p_i, so the drafts kept at a position follow q restricted to q(x) >= 0.4 while the ratio divides by q.",
        "source": "written for the study from transformers' assistant_confidence_threshold (engines notes, section 2), which keeps the triggering token",
    },
    {
        "spec": "study_bugs4.counting:draft_truncated_at_target_zero",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "a draft with p_i(x) = 0 ends the block as if never drafted: the position is drawn from p_i instead of rejecting x and drawing from (p_i - q_i)+.",
        "source": "written for the study from vllm-project/vllm PR #36138 / #43338 and lmdeploy#4551 (grammar masks on the speculative path)",
    },
    {
        "spec": "study_bugs4.counting:placeholder_drafts_verified",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "a block the drafter ended early (at its first draft with q(x) < 0.4, kept) is padded with id -1 and zero draft rows; the verifier does not exclude the padding: -1 indexes id V - 1, the zero row gives an infinite (or NaN -> 1) ratio, so every placeholder is accepted and emitted as V - 1.",
        "source": "vllm-project/vllm#46899 (stale -1 placeholders fed back as drafts) and flashinfer-ai/flashinfer#879 / #3551 (B19: -1 padding ids used as indices and accepted)",
    },
    {
        "spec": "study_bugs4.counting:slice_includes_rejected_draft",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "after a rejection at position n the round emits xs[:n + 1] (the rejected draft included) and then the replacement from (p_n - q_n)+; full acceptance is right.",
        "source": "written for the study: the slice draft[:num_accepted + 1] (right for a count that includes the bonus) used for the drafts",
    },
    {
        "spec": "study_bugs4.counting:last_position_rejection_takes_bonus_branch",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "the full-acceptance branch is taken when n >= gamma - 1: a rejection of the last draft emits all drafts (the rejected one included) and a bonus from row gamma.",
        "source": "written for the study, next to openvinotoolkit/openvino.genai#4190 (B38: a rejection handled one iteration late)",
    },
    # ---- the token after a rejection ---------------------------------------------------------
    {
        "spec": "study_bugs4.replacement:residual_is_overlap_min_p_q",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from min(p, q) normalised instead of p - min(p, q) = (p - q)+.",
        "source": "written for the study: the residual written as minimum(p, q) with 'p -' lost",
    },
    {
        "spec": "study_bugs4.replacement:residual_in_reduced_draft_vocab",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the residual (p - q)+ is restricted to the drafter's reduced vocabulary (ids below 3V/4) and renormalised; ids outside are never replacements (p as fallback when nothing is left).",
        "source": "written for the study from EAGLE-3's reduced draft vocabulary (d2t / t2d) and SPEED-Bench's vocabulary-pruning note (engines notes, section 5)",
    },
    {
        "spec": "study_bugs4.replacement:residual_p_times_one_minus_q",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from p(v) (1 - q(v)) normalised instead of (p - q)+: tokens with p < q keep mass.",
        "source": "written for the study: the residual derived as if target and draft picked independently ('the target picks v and the draft does not')",
    },
    {
        "spec": "study_bugs4.replacement:gumbel_on_probabilities_not_logs",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is argmax over the support of (p - q)+ of w + Gumbel noise (added to the weights, not their logs): a law much flatter than (p - q)+ over its support.",
        "source": "written for the study from vLLM V1's noise-based recovered-token sampling (engines notes, section 1.4) rewritten as Gumbel-max without the log",
    },
    {
        "spec": "study_bugs4.replacement:residual_normalised_by_token_rejection_prob",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the residual is divided by 1 - min(1, p(x) / q(x)) (the drafted token's rejection probability) instead of sum (p - q)+ and sampled by an inverse CDF that assumes a sum of 1 (overshoot clamped to the last id).",
        "source": "written for the study: the row-level normaliser 1 - beta confused with the token-level rejection probability",
    },
    # ---- the bonus token ---------------------------------------------------------------------
    {
        "spec": "study_bugs4.bonus:bonus_restricted_to_draft_candidates",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "after full acceptance the bonus is drawn from p_gamma restricted to the top 8 ids of the drafter's next row q(. | prefix + xs), renormalised (p_gamma as fallback), instead of from all of p_gamma.",
        "source": "written for the study from tree verification (Medusa / EAGLE draft-head candidates; SGLang's target-only tree, engines notes section 3) with the final draw kept among the candidates",
    },
    {
        "spec": "study_bugs4.bonus:bonus_decode_step_position_off_by_one",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "after full acceptance the bonus comes from a separate one-token decode step one position short (right last tokens, position one earlier: the context without its first token) instead of row gamma of the verification pass.",
        "source": "huggingface/transformers#30042 (B05: cache_position not advanced correctly in assisted decoding), here on the bonus step only",
    },
    {
        "spec": "study_bugs4.bonus:bonus_row_conditioned_on_draft_argmax",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the target pass is fed the drafts with the last replaced by argmax q_{gamma-1}; rows 0 .. gamma - 1 are right, the bonus row is p(. | prefix + xs[:-1] + argmax q) instead of p(. | prefix + xs).",
        "source": "huggingface/transformers#47932 (B04) and llama.cpp examples/speculative (B32: the top candidate kept in place of the sample), here only in the verify input",
    },
    # ---- numerics ----------------------------------------------------------------------------
    {
        "spec": "study_bugs4.numerics:residual_normalised_over_wrong_axis",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "R = (P[:gamma] - Q)+ is normalised over the positions axis; the replacement at i is drawn with weights R[i, v] / sum_j R[j, v] instead of (p_i - q_i)+.",
        "source": "written for the study: the reduction axis of a [positions, vocab] residual mixed up in a vectorised kernel",
    },
    {
        "spec": "study_bugs4.numerics:probabilities_stored_as_uint8",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "ratio and residual use p and q rounded to the nearest 1/255 (a uint8 cache): a draft with rounded q = 0 is always accepted (inf, or NaN that min(1, .) makes 1), one with rounded p = 0 < rounded q never; drafts come from the exact q and the bonus from the exact p.",
        "source": "written for the study from compact draft-probability caches (vLLM MRV2 #35461) and deepseek-ai/DeepSpec#31 (B34: q in another precision than sampled)",
    },
    {
        "spec": "study_bugs4.numerics:residual_normaliser_before_clamp",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the residual's normaliser is sum(p - q) (0 up to rounding) instead of sum (p - q)+, and the inverse CDF trusts a sum of 1: the replacement is a function of the support and the rounding error's sign (the first id of the support, or an id the binary search fixes on a decreasing or NaN cumulative sum), never a draw from (p - q)+.",
        "source": "written for the study: clamp(p - q) / (p - q).sum(), next to B01 (huggingface/transformers#28508) and B43 (vllm-project/vllm#2336)",
    },
    # ---- state across rounds -----------------------------------------------------------------
    {
        "spec": "study_bugs4.state:target_kv_not_trimmed",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "the target's cache keeps the rejected drafts after a rejection and the next pass appends the replacement after them: later target rows condition on a context with the rejected drafts inside (longer, wrong preceding tokens).",
        "source": "ml-explore/mlx-lm#1109 / #846 (B25: trim is a no-op on a non-trimmable cache)",
    },
    {
        "spec": "study_bugs4.state:request_rng_replayed",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "every request draws all its randomness from a generator seeded by its slot (always 0), so serial requests replay the same uniforms round for round.",
        "source": "NVIDIA/TensorRT-LLM#19487 / #19505 (B33: RNG keyed by sequence slot; serial unseeded requests share one stream)",
    },
    {
        "spec": "study_bugs4.state:accepted_count_from_previous_step",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "the round's final token is right but the output is xs[:m] + [token] with m the previous round's accepted count: the token lands at the wrong position, and rejected or unverified drafts are emitted when m > n.",
        "source": "written for the study, modelled on vllm-project/vllm#52071 (a scheduler field left stale without async scheduling)",
    },
    {
        "spec": "study_bugs4.state:coin_offset_advanced_by_accepted_count",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "the acceptance uniforms' offset advances by the accepted count n instead of the coins consumed (n + 1 after a rejection): the coin that rejected, known to be >= min(1, p/q), is the next round's first coin.",
        "source": "vllm-project/vllm-ascend#13608 / #13755 (B17: per-request RNG advanced by the wrong amount)",
    },
    # ---- settings parity (raw logits) --------------------------------------------------------
    {
        "spec": "study_bugs4.parity:target_top_p_excludes_crossing_token",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the verifier's hand-written top-p keeps tokens while the cumulative mass including them is below top_p, dropping the token that crosses it; the draft uses the library's top-p.",
        "source": "sgl-project/sglang#36173 (B23: the speculative verifier's top-k/top-p differed from the normal sampler's)",
    },
    {
        "spec": "study_bugs4.parity:penalty_history_last_token_per_round",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the penalty history gets only the last token of each round, so accepted drafts never enter it: draft and target penalise with the prompt plus one token per round (plus the round's drafts).",
        "source": "sgl-project/sglang#33643 (penalties fed only the last token of each verification step)",
    },
    {
        "spec": "study_bugs4.parity:target_repetition_penalty_always_divides",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the verifier's repetition penalty divides every seen token's logit by the penalty (negative logits must be multiplied); the draft uses the library's penalty.",
        "source": "written for the study: the CTRL penalty's sign mistake in a hand-written verify path (class of B24, sgl-project/sglang#21258)",
    },
    {
        "spec": "study_bugs4.parity:target_presence_penalty_per_occurrence",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the verifier subtracts the presence penalty once per occurrence (presence * count) instead of once per present token; the draft uses the library's.",
        "source": "written for the study: presence and frequency sharing one counts tensor on the verify path (next to sgl-project/sglang#40244)",
    },
    # ---- correct steps written in unusual ways -----------------------------------------------
    {
        "spec": "study_bugs4.correct:last_draft_treated_as_one_hot",
        "buggy": False,
        "flags": [],
        "family": "draft_law",
        "mechanism": "exact: the last draft is verified as a one-hot proposal (accept with p(x), replace from p without x), the others with the full rule.",
        "source": "vllm-project/vllm#40149 / #40651 (one-hot treatment of a draft is lossless)",
    },
    {
        "spec": "study_bugs4.correct:accept_on_complement_coin",
        "buggy": False,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "exact: accept iff u > 1 - min(1, p/q), probability min(1, p/q).",
        "source": "written for the study",
    },
    {
        "spec": "study_bugs4.correct:leftover_drafts_proposed_next_round",
        "buggy": False,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "exact: after a rejection the drafts past it open the next round's block with the (stale) rows they were drawn from; each is verified against the row it was drawn from, on true-prefix target rows.",
        "source": "written for the study (pipelined drafting; looks like a missing flush)",
    },
    {
        "spec": "study_bugs4.correct:draft_stop_keeps_triggering_token",
        "buggy": False,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "exact: the drafter stops at its first draft with q(x) < 0.4 and keeps it in the block; the block length depends on draft randomness only.",
        "source": "transformers' assistant_confidence_threshold (engines notes, section 2)",
    },
    {
        "spec": "study_bugs4.correct:bonus_drawn_eagerly",
        "buggy": False,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "exact: the bonus is drawn from p_gamma before the coins and kept only after a full acceptance; its randomness is independent of the coins.",
        "source": "written for the study (looks like RNG coupling)",
    },
    {
        "spec": "study_bugs4.correct:draft_feeds_itself_a_second_sample",
        "buggy": False,
        "flags": [],
        "family": "draft_row_context",
        "mechanism": "exact: the drafter continues its chain with one sample and reports a second, independent sample from the same row; each reported draft is verified against its row on target rows of the reported drafts.",
        "source": "written for the study (looks like llama.cpp examples/speculative's B32 divergence of drafted and verified tokens)",
    },
]
