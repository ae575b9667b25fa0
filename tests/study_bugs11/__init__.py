"""Round steps for an eleventh blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages, ``docs/verdict.md`` or
``docs/protocol.md``, and without reading any diagnosis output (every audit ran with
``--no-diagnosis``). Nothing was grepped across the repository.
What was read: the whole of ``tests/study_bugs10/__init__.py`` (docstring, format and entries),
``tests/study_bugs10/_common.py`` and ``tests/study_bugs10/state.py`` (how a step module looks), the
first 60 lines of ``tests/study_bugs10/parity.py`` and the first 40 of ``tests/study_bugs10/correct.py``;
``tests/study_bugs/_util.py`` (the correct helpers the steps use); the ``"mechanism"`` sentences of
``tests/study_bugs`` to ``tests/study_bugs10`` (``grep -A6 '"mechanism"'``, only to avoid duplicating
them) and the function and class names of the earlier sets (``grep -n "^def \\|^class "``);
``docs/examples/round_step.py`` and ``docs/examples/round_step_logits.py`` (the two signatures);
lines 1-120 of ``docs/adapters.md``; the whole of ``specverify/dists/_processing.py`` and
``specverify/dists/_settings.py`` and ``validate_logits`` in ``specverify/dists/_validate.py`` (the
settings pipeline, for the ``--logits`` steps); ``specverify audit --help``; the research notes
``/work/shared/research/real-bugs-2024-2026.md`` and ``/work/shared/research/engines-and-bugs.md``;
and public GitHub issue and pull-request threads found with the search tool (the trackers cited
in ``source``; most references come from the research notes). Seen in passing, not opened: the
file names under ``tests/`` (a directory listing) and the names of files others had modified
(``git status --short``, which listed files under ``specverify/diagnosis/`` by name only). Before
the audits, every step was run on a toy pair of hashed tables outside specverify (a smoke test
for crashes and for the exact steps' law, and a rough look at the buggy steps' effect; not an
audit).

Buggy speculative-decoding round steps, each one mistake modelled on a real report (tracker
reference) or written for the study with the reason it is plausible, chosen to differ from the
mechanisms of ``tests/study_bugs`` to ``tests/study_bugs10``, and six exact round steps written in
unusual ways that look like bugs (a drafter whose cache is rewound too far, race noise shared by
the positions of a round, the ratio capped before the division, the last draft left unverified,
a coin made of two uniforms, a repetition penalty applied in a loop; some are twins of buggy
steps of this set). ``STUDY`` lists them; the ``family`` labels are the writer's own and
``mechanism`` says exactly what each step does wrong (or why it is exact). Every spec is audited
with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util``,
``study_bugs10._common`` and this set's ``_common`` (correct building blocks); every mistake lives
in its step, on the line marked ``# BUG:``. Stateful steps (``state.py``, and one exact step of
``correct.py``) are module-level objects whose ``__call__`` is the step; they treat a round whose
prefix does not continue the previous round's output as the start of a new request, and keep
state of one request at most. Steps that need the end-of-sequence id take the last id (the
audit's default stop id).
Two buggy steps of an earlier draft passed the audit (their effect on the audit's model pairs was
below its resolution, a TV of about 0.08 to 0.1 per unit) and were replaced by the steps now in
STUDY (``bonus:bonus_race_noise_fixed_at_import`` and ``replacement:residual_scanned_in_id_order``);
RESULTS.md lists them with their verdicts. One more replacement candidate (a repeated draft that
ends the block) was smoke-tested but not audited and is not in the set.
Of the audits' output only the verdict lines (which units PASS or FAIL, and the line naming the
first failing test) and the exit codes were looked at; with ``--no-diagnosis`` they carry no
diagnosis.
"""

STUDY = [
    {
        "spec": "study_bugs11.rows:verify_mask_diagonal_among_drafts",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the verification pass's mask lets each draft slot see the committed prefix and its own input "
        "token but no earlier draft: rows 0 and 1 are right, row j >= 2 (the bonus row included) is "
        "p(. | prefix + [x_{j-1}]) instead of p(. | prefix + xs[:j]); ratio, residual and bonus use "
        "those rows.",
        "source": "sgl-project/sglang#7523 (draft-step kv indices built without the draft tree's structure) and "
        "PaddlePaddle/FastDeploy#3514 (tree attention needs mask checks inside the lower triangle); "
        "written for the study as an identity mask among the draft slots",
    },
    {
        "spec": "study_bugs11.rows:draft_gumbel_noise_shared_across_positions",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "each draft is argmax(log q_i + g) with one Gumbel vector g drawn per round and shared by "
        "every position, so given the earlier drafts x_i does not follow q_i (the drafts of a round "
        "are coupled through g) while q_i is reported as its law; verification is standard.",
        "source": "vllm-project/vllm#47386 / #54282 (Gumbel noise of the drafts keyed by (seed, position) and "
        "shared with other draws), here the position left out of the key",
    },
    {
        "spec": "study_bugs11.rows:draft_row_masked_to_target_support",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "drafts are sampled from q_i, but the row reported to the verifier is q_i restricted to the "
        "target row's support {p_i > 0} and renormalised: a draft outside that support reads q = 0 "
        "and is accepted (the target never emits it), the others are tested against q_i / Z_i and the "
        "residual is (p_i - q_i / Z_i)+.",
        "source": "vllm-project/vllm PRs #36138 / #43338 / #48516 and lmdeploy#4551 (allowed-token masks and "
        "drafts on the speculative path); written for the study as the target's allowed-token mask "
        "applied to the reported draft row only",
    },
    {
        "spec": "study_bugs11.rows:verify_output_padded_past_captured_size",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the verification pass runs on the last committed token and the first 2 drafts only (a graph "
        "captured for 3 query tokens) and its output is padded to gamma + 1 rows by repeating the "
        "last row: rows 0 .. 2 are right, row j >= 3 (the bonus row included) is p(. | prefix + "
        "xs[:2]).",
        "source": "written for the study: a captured verify graph smaller than gamma + 1 with its output expanded "
        "to the expected shape (the row-misalignment class of vllm-project/vllm#41768 and "
        "HabanaAI/vllm-fork#1780)",
    },
    {
        "spec": "study_bugs11.acceptance:target_confidence_threshold_accepts_outright",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "a draft with p(x) >= 0.2 is accepted without its coin, the others with u < min(1, p(x) / "
        "q(x)); drafts with p(x) >= 0.2 and q(x) > p(x) are accepted too often. Replacement and bonus "
        "are standard.",
        "source": "SGLang's --speculative-accept-threshold-single (lossy below its default 1.0; research notes "
        "Table A), set to 0.2 on a path meant to be exact",
    },
    {
        "spec": "study_bugs11.acceptance:ratio_with_additive_tolerance",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "the test is u < min(1, p(x) / q(x) + 0.1): a tolerance of 0.1 added to the ratio, so every "
        "draft with p(x) < q(x) (those the target never emits included) is accepted 0.1 more often. "
        "Replacement and bonus are standard.",
        "source": "written for the study: a 'numerical tolerance' added to the ratio; the lossy relatives are "
        "TensorRT-LLM's relaxed acceptance (relaxed_delta) and SGLang's thresholds (research notes Table "
        "A)",
    },
    {
        "spec": "study_bugs11.acceptance:low_probability_drafts_rejected_outright",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "a draft with q(x) < 0.1 is rejected without its coin (and a token drawn from (p - q)+ at its "
        "position); the others take u < min(1, p(x) / q(x)). Bonus standard.",
        "source": "llama.cpp's draft cut p_min (common/speculative.cpp, where it stops drafting and is exact; "
        "research notes section 3) applied in the verifier as a rejection instead",
    },
    {
        "spec": "study_bugs11.counting:kept_count_from_np_prod",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": "n = gamma * np.prod(accept) (np.prod for np.cumprod(accept).sum()): a round keeps every "
        "draft and draws the bonus when all coins pass, and otherwise keeps none and emits one draw "
        "from (p_0 - q_0)+ (p_0 when empty), even when x_0 was accepted.",
        "source": "written for the study: np.prod written for np.cumprod(...).sum() in the accepted-count idiom",
    },
    {
        "spec": "study_bugs11.counting:rejections_found_with_bitwise_not_of_uint8_mask",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": "the accept mask is uint8 and the rejections are np.flatnonzero(~mask); ~ on uint8 is bitwise "
        "(1 -> 254, 0 -> 255), so position 0 always counts as the first rejection and every round "
        "emits a single draw from (p_0 - q_0)+ (p_0 when empty), never a draft or a bonus.",
        "source": "written for the study: numpy's ~ on an integer mask (it is a logical not only on bool), the "
        "mask cast to uint8 for a kernel",
    },
    {
        "spec": "study_bugs11.counting:replacement_appended_twice",
        "buggy": True,
        "flags": [],
        "family": "tokens_emitted",
        "mechanism": "after a rejection at n the replacement from (p_n - q_n)+ is appended in the verify loop and "
        "again by the code that finishes the round: the round emits xs[:n] + [r, r]; full acceptances "
        "are right.",
        "source": "written for the study: a final token appended both inside the loop and by the round's epilogue "
        "(the rejection bookkeeping spot of openvinotoolkit/openvino.genai#4190)",
    },
    {
        "spec": "study_bugs11.counting:kept_drafts_sliced_one_late",
        "buggy": True,
        "flags": [],
        "family": "tokens_emitted",
        "mechanism": "with n leading accepts the kept drafts are xs[1:n + 1] instead of xs[:n]: x_0 is dropped "
        "and, after a rejection at n >= 1, the rejected x_n is emitted; the final token (a draw from "
        "(p_n - q_n)+, or the bonus from p_gamma after gamma - 1 drafts) comes from the right row.",
        "source": "written for the study: a slice shifted by one (the verify-off-by-one class of "
        "ohdearquant/lattice#243 / #258)",
    },
    {
        "spec": "study_bugs11.replacement:residual_of_cumulative_rows",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn proportionally to (P - Q)+ with P and Q the running sums (CDFs) of "
        "p and q, instead of (p - q)+: ids after a stretch where p's cumulative mass leads q's get "
        "weight, whatever their own p(v) - q(v). Test and bonus are standard.",
        "source": "written for the study: the verifier keeps CDF rows for inverse-CDF sampling and forms the "
        "residual from them",
    },
    {
        "spec": "study_bugs11.replacement:drafter_runner_up_as_replacement",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "after a rejection the drafter's best other candidate (argmax q with the rejected draft "
        "excluded, a sibling) is emitted outright whenever (p - q)+ gives it positive weight, and a "
        "draw from (p - q)+ otherwise. Test and bonus are standard.",
        "source": "ggml-org/llama.cpp#5625 (SpecInfer-style multi-branch verification) and SafeAILab/EAGLE#183 "
        "(top-k siblings): a sibling taken after a rejection without being drawn with its weight",
    },
    {
        "spec": "study_bugs11.replacement:draft_entry_zeroed_before_residual",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the residual is (p - q')+ with q' the draft row whose entry at the rejected draft x is "
        "zeroed (the no-draft-probabilities path's step): x keeps residual weight p(x) and can be its "
        "own replacement; the other entries are (p - q)+. Test and bonus are standard.",
        "source": "vLLM V1's recovered token (max(p - q, 0), or p with the draft token zeroed when there is no q; "
        "research notes section 1.4), the no-q step applied to a step that has q",
    },
    {
        "spec": "study_bugs11.replacement:residual_scanned_in_id_order",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn by scanning the ids in order with a fresh coin each and taking the "
        "first id v whose coin is below w(v) / max w (w = (p - q)+; the scan repeats when none "
        "passes): v is taken with probability proportional to (w(v) / max w) times the chance that "
        "every lower id failed, favouring low ids, instead of w(v) / sum w. Test and bonus are "
        "standard.",
        "source": "written for the study: a rejection sampler that walks the vocabulary in id order instead of "
        "proposing ids uniformly (a sequential scan as a GPU kernel would vectorise it)",
    },
    {
        "spec": "study_bugs11.bonus:bonus_race_noise_fixed_at_import",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": "after a full acceptance the bonus is argmax(p_gamma / E), the exponential race, with a noise "
        "buffer E filled once (at the process's first bonus) and never refilled: every bonus is a "
        "fixed function of p_gamma (the same id for the same row), not a draw from it; verified "
        "positions are standard.",
        "source": "vLLM V1's race noise, one exponential vector per request and step (research notes section 1.4), "
        "here a buffer filled once; the fixed-noise class of vllm-project/vllm-ascend#13470 (a constant "
        "coin on NPU)",
    },
    {
        "spec": "study_bugs11.bonus:bonus_row_sees_last_draft_twice",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": "the verification pass is fed xs + [x_{gamma-1}] and the bonus is drawn from its last row, "
        "p(. | prefix + xs + [x_{gamma-1}]), instead of p(. | prefix + xs); the drafts' rows are "
        "right.",
        "source": "written for the study: the bonus position's input slot filled with the last draft and the bonus "
        "read from the row after it (the bonus-row indexing spot of vllm-project/vllm#42744)",
    },
    {
        "spec": "study_bugs11.numerics:probabilities_stored_as_integer_log2",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "draft and target rows are stored as integer log2-probabilities and read back as powers of "
        "two (each probability rounded to the nearest 2^k, unnormalised) for the ratio and the "
        "residual; drafts come from the exact q and the bonus from the exact p_gamma.",
        "source": "written for the study: a compact log-probability cache in integer units of log 2 read back with "
        "exp2 (the quantised-probability class of deepseek-ai/DeepSpec#31's precision mismatch)",
    },
    {
        "spec": "study_bugs11.numerics:coin_as_product_of_two_uniforms",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the acceptance coin is u1 * u2 (two uniforms combined by a product): P(u1 u2 < r) = r - r ln "
        "r, so every draft with r = min(1, p/q) < 1 is accepted too often (r = 0.5 -> 0.85). "
        "Replacement and bonus are standard.",
        "source": "written for the study: two random streams combined by a product (vllm-project/vllm-ascend#13730 "
        "/ #13766 build the coin from two random draws on NPU)",
    },
    {
        "spec": "study_bugs11.numerics:target_rows_normalised_per_tile",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the target's rows are renormalised per tile of 16 ids (each tile divided by its own mass; "
        "the block reduction's partial sums never combined) and used for the ratio, the residual and "
        "the bonus (the bonus sampler renormalises the row).",
        "source": "flashinfer-ai/flashinfer#424 / #425 (a missing __syncthreads after a block reduction), here in "
        "a tiled normalisation",
    },
    {
        "spec": "study_bugs11.state:stale_placeholder_becomes_first_draft",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: after a round with a rejection the request's unused draft slots hold the "
        "placeholder -1, and the next round's first draft is read from such a slot: -1 resolves by "
        "wrap-around to id V - 1, which is fed to the target and tested with q_0(V - 1) as if drawn "
        "from q_0 (accepted outright where q_0 gives it 0); rounds after a full acceptance are right.",
        "source": "vllm-project/vllm#46899 (stale -1 placeholders fed back as draft tokens)",
    },
    {
        "spec": "study_bugs11.state:drafted_stop_marks_request_finished",
        "buggy": True,
        "flags": [],
        "family": "stop_tokens",
        "mechanism": "stateful: a round that drafts the end-of-sequence id (the last id) marks the request "
        "finished whether or not that draft is accepted; the request's next round takes the finish "
        "path and emits the end-of-sequence id (clearing the flag) instead of decoding.",
        "source": "openvinotoolkit/openvino.genai#1951 / #3293 (a drafted EOS handled on its own path changed the "
        "results); written for the study as a finished flag set at drafting time",
    },
    {
        "spec": "study_bugs11.state:bonus_written_twice_into_target_cache",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: the target's context is a per-request cache advanced with each round's output, and "
        "after a full acceptance the bonus is written once more (by the sampler and as the next "
        "input): every later target row of the request (ratio, residual, bonus) conditions on a "
        "context with each such bonus doubled; the drafter sees the true prefix.",
        "source": "ml-explore/mlx-lm#1175 (the MTP verify loop fed a context with the confirmed token doubled), "
        "here a bonus written twice into the cache",
    },
    {
        "spec": "study_bugs11.state:target_position_advanced_by_kept_drafts_only",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: the target's position counter advances by the kept drafts of each round but not by "
        "its final token, so after k rounds of a request the verification pass runs k positions too "
        "low (emulated by running it on the prefix without its first k tokens: right last tokens, "
        "positions k too low); the drafter and a request's first round are right.",
        "source": "huggingface/transformers#30042 (cache_position not advanced correctly in assisted decoding), "
        "here a drift of one position per round",
    },
    {
        "spec": "study_bugs11.state:target_logit_bias_accumulates_per_round",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_logit_bias",
        "mechanism": "stateful: the verifier keeps a per-request bias vector and adds the request's logit bias to "
        "it in place every round (meant: set once), so round r of a request processes the target rows "
        "with r times the bias (first round right); penalties, temperature, filters and the drafts "
        "are right.",
        "source": "vllm-project/vllm#30846 (logits modified in place by sampling parameters), here a per-request "
        "bias buffer updated with += each round",
    },
    {
        "spec": "study_bugs11.parity:target_temperature_read_as_int",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_temperature",
        "mechanism": "the verifier's config types temperature as an integer: the target rows are processed at "
        "int(T) (T = 0.8 -> 0, greedy target rows; T = 1.5 -> 1), every other knob applied; the "
        "drafts use T.",
        "source": "written for the study: an integer-typed temperature field in the verifier's copy of the "
        "sampling config (google-ai-edge/LiteRT-LM#3017: the speculative path does not use the "
        "verifier's sampling parameters)",
    },
    {
        "spec": "study_bugs11.parity:target_logit_bias_ids_off_by_one",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_logit_bias",
        "mechanism": "the verifier's bias vector uses 1-based ids: the bias for id t is added to id t + 1 of the "
        "target's raw logits (a bias on the last id is dropped); the rest of the pipeline and the "
        "drafts' bias are right.",
        "source": "written for the study: OpenAI logit_bias keys mapped through a 1-based index; "
        "sgl-project/sglang#10617 (logit_bias not applied right with EAGLE)",
    },
    {
        "spec": "study_bugs11.parity:target_repetition_penalty_compounds_per_occurrence",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier applies the repetition penalty in a loop over the history list, so a token seen "
        "k times (prompt included) is divided by the penalty (multiplied, when negative) k times "
        "instead of once; the other knobs and the drafts are right.",
        "source": "written for the study: a loop over the history instead of over its distinct ids (transformers' "
        "processor gathers each id once); sgl-project/sglang#21258 (repetition penalty mishandled on the "
        "speculative ngram path)",
    },
    {
        "spec": "study_bugs11.parity:target_top_p_threshold_not_complemented",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_p",
        "mechanism": "the verifier's hand-written top-p removes the least likely tokens while their cumulative "
        "mass is <= top_p instead of <= 1 - top_p, so it keeps only the most likely tokens covering "
        "about 1 - top_p of the mass (at least one); bias, penalties, temperature, top-k, min-p and "
        "the drafts are right.",
        "source": "written for the study: top_p written where 1 - top_p was meant in a hand-written nucleus "
        "filter; sgl-project/sglang#36173 (the verifier's top-p differing from the sampler's)",
    },
    {
        "spec": "study_bugs11.parity:target_presence_penalty_mask_inverted",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier subtracts the presence penalty from the tokens not yet generated (count == 0) "
        "instead of those generated at least once; the frequency and repetition penalties, the rest "
        "of the pipeline and the drafts are right.",
        "source": "written for the study: == 0 for > 0 in a presence mask; sgl-project/sglang#33643 (penalty state "
        "on the speculative path)",
    },
    {
        "spec": "study_bugs11.correct:drafter_cache_rewound_two_too_many",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact (stateful, resets per request): the drafter's own context is rolled back two tokens "
        "past its kept drafts after every round (never below one token), so it lags the request's; "
        "each draft is reported with the row it was drawn from and the target's rows are those of "
        "prefix + xs[:i].",
        "source": "lablup/mlxcel#994 / #1002 (the draft KV rewind trimmed 2 entries too many: acceptance decayed, "
        "the output stayed lossless)",
    },
    {
        "spec": "study_bugs11.correct:race_noise_shared_by_the_positions_of_a_round",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the replacement is argmax((p_i - q_i)+ / E) with one Exp(1) vector E per round shared "
        "by every position; only the first rejection's replacement is emitted, and nothing else used "
        "E.",
        "source": "vLLM V1's recovered token, one exponential noise vector per request and step (research notes "
        "section 1.4); looks like the coupled noise of study_bugs9's race noise drawn once per request",
    },
    {
        "spec": "study_bugs11.correct:ratio_capped_before_the_division",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the test is u < min(1, p(x)) / q(x); p(x) <= 1, and with u < 1 the event is the same "
        "as u < min(1, p(x) / q(x)).",
        "source": "written for the study: looks like min applied to the wrong operand",
    },
    {
        "spec": "study_bugs11.correct:last_draft_left_unverified_final_token_from_its_row",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: gamma drafts go to the target but only the first gamma - 1 are verified; after they "
        "are all accepted the final token is drawn from row gamma - 1, the row of the emitted context "
        "(the last draft is never emitted).",
        "source": "written for the study: the exact twin of a verify loop that misses the last draft (study_bugs), "
        "looks like a lost draft and a bonus from the wrong row",
    },
    {
        "spec": "study_bugs11.correct:coin_as_square_of_max_of_two_uniforms",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the coin is max(u1, u2) ** 2, and P(max(u1, u2) ** 2 < r) = (sqrt r) ** 2 = r: a "
        "uniform coin.",
        "source": "written for the study: the exact twin of numerics:coin_as_product_of_two_uniforms",
    },
    {
        "spec": "study_bugs11.correct:target_repetition_penalty_loop_over_distinct_ids",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": "exact: the verifier applies the repetition penalty by a loop over the distinct ids of the "
        "history (dict.fromkeys), each seen id once; bias, additive penalties, temperature and "
        "filters as the request says.",
        "source": "written for the study: the exact twin of parity:target_repetition_penalty_compounds_per_occurrence",
    },
]
