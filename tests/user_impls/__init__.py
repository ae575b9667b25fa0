"""Speculative-decoding implementations written the way users write them, for auditing.

Importable with ``PYTHONPATH=tests``, e.g. ``specverify audit --round user_impls.round_numpy:step_correct``.
Plain numpy only (no specverify imports). ``CASES`` lists every implementation:

* ``spec``: ``module:attribute`` (an instance with ``__call__`` for the stateful steppers);
* ``shape``: ``round`` | ``kernel`` | ``generator``;
* ``flags``: extra audit flags (``--logits``, ``--greedy``, ``--full-rule``);
* ``buggy``: whether the output law (or greedy output) differs from the target's;
* ``bug_class``: a short name for the bug, None for correct ones;
* ``rounds``: sequences per unit when the suite's default does not reach eps (None: the default);
* ``ci_rounds``: sequences per unit at the CI size (eps 0.1) when a quarter of ``rounds`` does not
  show the bug (None: a quarter);
* ``visible``: where the bug shows: ``any``, ``low_overlap`` (draft and target far apart, zero-heavy
  supports), ``high_overlap`` (draft close to target: most rounds accept every draft), ``greedy``
  (temperature 0 / greedy audit, mostly at exact ties), or ``settings:<knob>`` (only with that
  sampling knob active). For correct ones it says where a naive reading would expect a bug.

``tests/user_impls/_selfcheck.py`` checks them against a tiny order-2 model (not part of the suite).
"""


def _case(spec, shape, buggy, bug_class=None, visible="any", flags=(), rounds=None, ci_rounds=None):
    return {
        "spec": "user_impls." + spec,
        "shape": shape,
        "flags": list(flags),
        "buggy": buggy,
        "bug_class": bug_class,
        "visible": visible,
        "rounds": rounds,
        "ci_rounds": ci_rounds,
    }


CASES = [
    # round_numpy: probability-mode round steps -------------------------------------------------
    _case("round_numpy:step_correct", "round", False),
    _case("round_numpy:step_inverse_cdf", "round", False),
    _case("round_numpy:step_gumbel", "round", False),
    _case("round_numpy:step_vectorised", "round", False),
    _case("round_numpy:step_residual_by_rejection", "round", False),
    _case("round_numpy:step_exponential_race", "round", False),
    _case("round_numpy:step_kv_block_correct", "round", False),
    _case("round_numpy:step_no_bonus", "round", False, visible="high_overlap"),
    _case("round_numpy:step_same_row_drafts", "round", False),
    _case("round_numpy:step_mixture_draft", "round", False),
    _case("round_numpy:step_residual_from_p", "round", True, "replacement_from_p", "any"),
    _case("round_numpy:step_residual_from_q", "round", True, "replacement_from_q", "any"),
    _case("round_numpy:step_residual_wrong_sign", "round", True, "residual_wrong_sign", "any"),
    _case("round_numpy:step_residual_abs", "round", True, "residual_unclipped", "any"),
    _case("round_numpy:step_reused_uniform", "round", True, "reused_uniform", "any"),
    _case("round_numpy:step_bonus_wrong_row", "round", True, "bonus_wrong_row", "high_overlap"),
    # every token's margin exact: only the consecutive-pairs test sees it (full acceptances: high overlap)
    _case("round_numpy:step_bonus_reuses_draft_uniform", "round", True, "bonus_reuses_draft_uniform", "high_overlap"),
    _case("round_numpy:step_bonus_from_q", "round", True, "bonus_from_q", "high_overlap"),
    _case("round_numpy:step_inverted_ratio", "round", True, "inverted_ratio", "any"),
    _case("round_numpy:step_continue_after_reject", "round", True, "continue_after_reject", "any"),
    # one uniform for the whole round: a small deviation (PASS at eps 0.1 with 625 sequences per unit)
    _case("round_numpy:step_shared_uniform", "round", True, "shared_uniform", "any", ci_rounds=2500),
    _case("round_numpy:step_drafts_unconditioned", "round", True, "drafts_unconditioned", "any"),
    _case(
        "round_numpy:step_residual_from_q_when_close", "round", True, "replacement_from_q_high_overlap", "high_overlap"
    ),
    _case("round_numpy:step_greedy_bonus", "round", True, "bonus_argmax", "high_overlap"),
    _case("round_numpy:step_zero_guard_accepts", "round", True, "accepts_p_zero", "low_overlap"),
    _case("round_numpy:step_residual_from_p_when_far", "round", True, "replacement_from_p_low_overlap", "low_overlap"),
    _case("round_numpy:step_kv_block_bug", "round", True, "position_wrong_prefix", "any"),
    _case("round_numpy:step_residual_unnormalised", "round", True, "residual_unnormalised", "any"),
    # stateful: instances keeping state between calls --------------------------------------------
    _case("stateful:cached_rows", "round", False),
    _case("stateful:verified_context", "round", False),
    # It accepts rarely (about 0.06 drafts per round on the low-overlap pair), so its 'later'
    # stratum fills slowly: at the suite's 2,500 sequences per unit the audit is honestly
    # INCONCLUSIVE and asks for --rounds 8055; 8,100 reach eps 0.05.
    _case("stateful:position_draft_cache", "round", False, rounds=8100),
    _case("stateful:stale_rollback", "round", True, "stale_cache_after_reject", "any"),
    _case("stateful:position_target_cache", "round", True, "cache_key_position_only", "any"),
    _case("stateful:no_reset", "round", True, "no_reset_new_sequence", "any"),
    _case("stateful:recycled_drafts", "round", True, "recycled_drafts", "any"),
    # logits_steppers: the step applies the sampling settings itself -----------------------------
    _case("logits_steppers:step_logits_correct", "round", False, flags=["--logits"]),
    _case("logits_steppers:step_logits_gumbel", "round", False, flags=["--logits"]),
    _case("logits_steppers:step_logits_topk_target_only", "round", False, visible="settings:top_k", flags=["--logits"]),
    _case(
        "logits_steppers:step_logits_draft_order_swapped", "round", False, visible="settings:top_k", flags=["--logits"]
    ),
    _case(
        "logits_steppers:step_logits_rep_penalty_target_only",
        "round",
        False,
        visible="settings:repetition_penalty",
        flags=["--logits"],
    ),
    # Lossless but its untempered draft is accepted less often at temperature 0.6, so the 'later'
    # stratum fills slowly: at 2,500 sequences per unit the audit is honestly INCONCLUSIVE
    # (eps 0.0511); 3,200 reach eps 0.05.
    _case(
        "logits_steppers:step_logits_temp_target_only",
        "round",
        False,
        visible="settings:temperature",
        flags=["--logits"],
        rounds=3200,
    ),
    _case(
        "logits_steppers:step_logits_temp_draft_only",
        "round",
        True,
        "temperature_draft_only",
        "settings:temperature",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_topp_before_temp",
        "round",
        True,
        "top_p_before_temperature",
        "settings:top_p",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_target_order_swapped",
        "round",
        True,
        "top_p_before_top_k_target",
        "settings:top_k",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_temp_in_ratio_only",
        "round",
        True,
        "temperature_in_ratio_only",
        "settings:temperature",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_rep_penalty_draft_only",
        "round",
        True,
        "repetition_penalty_draft_only",
        "settings:repetition_penalty",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_min_p_draft_only",
        "round",
        True,
        "min_p_draft_only",
        "settings:min_p",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_rep_penalty_prefix_only",
        "round",
        True,
        "repetition_penalty_stale_history",
        "settings:repetition_penalty",
        ["--logits"],
    ),
    _case(
        "logits_steppers:step_logits_bias_ignored",
        "round",
        True,
        "logit_bias_ignored",
        "settings:logit_bias",
        ["--logits"],
    ),
    # greedy: greedy steppers (--greedy) and settings-aware probability steps ---------------------
    _case("greedy:greedy_argmax", "round", False, visible="greedy", flags=["--greedy"]),
    _case("greedy:greedy_sampled_drafts", "round", False, visible="greedy", flags=["--greedy"]),
    _case("greedy:greedy_vectorised", "round", False, visible="greedy", flags=["--greedy"]),
    _case("greedy:greedy_residual_argmax", "round", True, "greedy_residual_argmax", "greedy", ["--greedy"]),
    _case("greedy:greedy_tie_highest", "round", True, "greedy_tie_highest_id", "greedy", ["--greedy"]),
    _case("greedy:greedy_tie_accepts_draft", "round", True, "greedy_tie_accepts_draft", "greedy", ["--greedy"]),
    _case("greedy:greedy_bonus_wrong_row", "round", True, "greedy_bonus_wrong_row", "greedy", ["--greedy"]),
    _case("greedy:greedy_near", "round", True, "greedy_near_acceptance", "greedy", ["--greedy"]),
    _case("greedy:step_settings_correct", "round", False, visible="greedy"),
    _case("greedy:step_settings_one_hot", "round", False, visible="greedy"),
    _case("greedy:step_settings_ignores_greedy", "round", True, "greedy_ignored", "greedy"),
    _case("greedy:step_settings_low_temperature", "round", True, "greedy_as_low_temperature", "greedy"),
    # kernels: batched verification kernels -------------------------------------------------------
    _case("kernels:kernel_vectorised", "kernel", False, flags=["--full-rule"]),
    _case("kernels:kernel_loop", "kernel", False, flags=["--full-rule"]),
    _case("kernels:kernel_bonus_wrong_row", "kernel", True, "bonus_wrong_row", "high_overlap", ["--full-rule"]),
    _case("kernels:kernel_residual_from_p", "kernel", True, "replacement_from_p", "any", ["--full-rule"]),
    _case("kernels:kernel_shared_uniform", "kernel", True, "shared_uniform", "any", ["--full-rule"]),
    _case("kernels:kernel_unnormalised_residual", "kernel", True, "residual_unnormalised", "any", ["--full-rule"]),
    _case("kernels:kernel_float16", "kernel", True, "float16_ratio", "any", ["--full-rule"]),
    # vllm#44744: ids from the padded tail of a tile; only the odd-vocabulary unit (101 ids) has a tail
    _case("kernels:kernel_padded_tile", "kernel", True, "id_outside_vocab", "settings:odd_vocab", ["--full-rule"]),
    _case("kernels:kernel_zero_id_as_padding", "kernel", True, "zero_id_as_padding", "any", ["--full-rule"]),
    # generators: whole generate() functions ------------------------------------------------------
    _case("generators:generate_correct", "generator", False),
    _case("generators:generate_adaptive_gamma", "generator", False),
    _case("generators:generate_realign_bug", "generator", True, "realign_missing_last_token", "any"),
    _case("generators:generate_unverified_tail", "generator", True, "unverified_after_8_tokens", "low_overlap"),
    _case("generators:generate_last_round_unverified", "generator", True, "unverified_last_round", "low_overlap"),
]
