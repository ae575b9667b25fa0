"""Round steps for a tenth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages, ``docs/verdict.md`` or
``docs/protocol.md``, and without reading any diagnosis output (every audit ran with
``--no-diagnosis``). Nothing was grepped across the repository.
What was read: the whole of ``tests/study_bugs9/__init__.py`` (docstring, format and entries),
``tests/study_bugs9/_common.py`` and ``tests/study_bugs9/state.py`` (how a step module looks), the
first 60 lines of ``tests/study_bugs9/parity.py`` and the first 40 of ``tests/study_bugs9/correct.py``;
``tests/study_bugs/_util.py`` (the correct helpers the steps use); the ``"mechanism"`` sentences of
``tests/study_bugs`` to ``tests/study_bugs9`` (``grep -A6 '"mechanism"'``, only to avoid duplicating
them) and the function and class names of the earlier sets (``grep -n "^def \\|^class "``);
``docs/examples/round_step.py`` and ``docs/examples/round_step_logits.py`` (the two signatures);
lines 1-120 of ``docs/adapters.md`` and its lines matching "tables", "context" or "vocab"; the whole
of ``specverify/dists/_processing.py`` and ``specverify/dists/_settings.py`` and ``validate_logits``
in ``specverify/dists/_validate.py`` (the settings pipeline, for the ``--logits`` steps);
``specverify audit --help``; the research notes ``/work/shared/research/real-bugs-2024-2026.md``
and ``/work/shared/research/engines-and-bugs.md``; and public GitHub issue and pull-request threads
found with the search tool (the trackers cited in ``source``). Seen in passing, not opened: the
file names under ``tests/`` (a directory listing) and the names of files others had modified
(``git status --short``). Before the audits, every step was run on a toy pair of hashed tables
outside specverify (a smoke test for crashes and for the exact steps' law; not an audit).

Buggy speculative-decoding round steps, each one mistake modelled on a real report (tracker
reference) or written for the study with the reason it is plausible, chosen to differ from the
mechanisms of ``tests/study_bugs`` to ``tests/study_bugs9``, and six exact round steps written in
unusual ways that look like bugs (a pre-drawn replacement that short-cuts the coin, a per-step
token budget, a sharpened drafter reporting its sharpened row, a verification in two chunks,
penalty counts kept incrementally, temperature applied to log-probabilities; some are twins of
buggy steps of this set). ``STUDY`` lists them; the ``family`` labels are the writer's own and
``mechanism`` says exactly what each step does wrong (or why it is exact). Every spec is audited
with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util`` and
``study_bugs10._common`` (correct building blocks); every mistake lives in its step, on the line
marked ``# BUG:``. Stateful steps (``state.py``, and one exact step of ``correct.py``) are
module-level objects whose ``__call__`` is the step; they treat a round whose prefix does not
continue the previous round's output as the start of a new request, and keep state of one request
at most.
Seven buggy steps of an earlier draft passed the audit (their effect on the audit's model pairs
was below its resolution, a TV of about 0.08 to 0.1 per unit) and were replaced by the steps now
in STUDY; RESULTS.md lists them with their verdicts. Of the audits' output only the verdict lines
(which units PASS or FAIL) were looked at; with ``--no-diagnosis`` they carry no diagnosis.
"""

STUDY = [
    # ---- target and draft rows -------------------------------------------------------------------
    {
        "spec": "study_bugs10.rows:verify_ids_shifted_by_special_token_offset",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the verification pass is fed (x + 1) mod V for every draft x (an id map that adds a "
            "special-token offset the ids already carry): row 0 is right, row j >= 1 (the bonus row "
            "included) conditions on the shifted ids while the ratio, the residual and the emitted tokens"
            " use the drafts."
        ),
        "source": (
            "NVIDIA/Megatron-LM#7543 (token_to_id added the special-token offset a second time, shifting "
            "every id) and huggingface/transformers#45307 (draft-to-target id translation across "
            "vocabularies in assisted generation), here on the verify input"
        ),
    },
    {
        "spec": "study_bugs10.rows:verify_positions_start_one_early",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the verification pass numbers its positions from len(prefix) - 1 (the drafter's convention),"
            " emulated by running it on the prefix without its first token: every target row (ratio, "
            "residual, bonus) has the right last tokens at a position one too low; the drafter is right."
        ),
        "source": (
            "huggingface/transformers#30042 (cache_position not advanced correctly in assisted decoding) "
            "and ggml-org/llama.cpp#26478 (speculative batch positions not consecutive with the cache)"
        ),
    },
    {
        "spec": "study_bugs10.rows:drafter_vocab_trimmed_q_not_renormalised",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "the drafter samples from its row restricted to a reduced vocabulary (ids below 48) and "
            "renormalised, but the row handed to the verifier is the full row with the other ids zeroed "
            "and not renormalised: the ratio divides by Z q'(x) instead of q'(x) (Z the mass on the "
            "reduced vocabulary) and the residual is (p - Z q')+."
        ),
        "source": (
            "written for the study: an EAGLE-3 style reduced draft vocabulary whose probabilities are "
            "scattered back to the full vocabulary without the renormalisation used for sampling (the "
            "q-provenance class of huggingface/transformers#47932, where a generator sampled from "
            "processed logits and returned raw ones)"
        ),
    },
    {
        "spec": "study_bugs10.rows:drafter_context_follows_argmax_rows_rescored_on_samples",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "the drafter grows its chain on its own argmax tokens (context prefix + a[:i]) and samples "
            "each draft from that row, but the rows reported to the verifier are re-scored on the sampled"
            " chain, q(. | prefix + xs[:i]): from position 1 on, a draft is tested against a row it was "
            "not drawn from whenever an earlier draft is not the argmax."
        ),
        "source": (
            "written for the study: the buggy twin of "
            "study_bugs9.correct:drafter_chains_on_its_own_argmax (a draft tree grown on argmax tokens, q"
            " recomputed on the emitted chain; vllm-project/vllm#16899 drafts argmax while the rejection "
            "sampler needs the sampled law)"
        ),
    },
    # ---- acceptance test -------------------------------------------------------------------------
    {
        "spec": "study_bugs10.acceptance:second_candidate_tested_against_unupdated_target",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "SpecInfer-style second candidate y ~ q_0 at the first position: after x_0 is rejected, y is "
            "tested with min(1, p_0(y) / q_0(y)) against the original row p_0 instead of the normalised "
            "residual (p_0 - q_0)+, and a second rejection draws from (p_0 - q_0)+ instead of the "
            "residual of the residual; a kept x_0 continues the chain, a kept y ends the round."
        ),
        "source": (
            "ggml-org/llama.cpp#5625 (SpecInfer Algorithm 2 multi-draft verification, which replaces the "
            "target row by the normalised residual before the next candidate); written for the study with"
            " that update left out"
        ),
    },
    {
        "spec": "study_bugs10.acceptance:exponential_clock_with_gumbel_noise",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "the log-space test accept iff G > log(q(x) / p(x)) uses a standard Gumbel G = -log(-log u) "
            "where the exact form needs E = -log u ~ Exp(1): a draft is accepted with probability 1 - "
            "exp(-p(x) / q(x)) instead of min(1, p(x) / q(x)); replacement and bonus are standard."
        ),
        "source": (
            "written for the study: samplers hold both Gumbel noise (Gumbel-max drafting, "
            "vllm-project/vllm#40651's gumbel_sample) and exponential noise (the recovered-token race); "
            "the two confused in the acceptance clock"
        ),
    },
    {
        "spec": "study_bugs10.acceptance:one_hot_rule_for_drafts_at_row_argmax",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "drafts are sampled from q, but a draft equal to its row's argmax is verified as a one-hot "
            "proposal (accepted with probability p(x), a rejection drawn from p with x removed); other "
            "drafts get min(1, p/q) and (p - q)+."
        ),
        "source": (
            "vllm-project/vllm#40149 / #40651 (one-hot rejection sampling, exact for argmax drafts), here"
            " switched on per token by x == argmax q for sampled drafts"
        ),
    },
    # ---- accepted count and the tokens emitted ---------------------------------------------------
    {
        "spec": "study_bugs10.counting:replacement_inserted_before_kept_drafts",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "after a rejection at n >= 1 the replacement from (p_n - q_n)+ is inserted in front of the "
            "kept drafts (out.insert(0, ...)): the round emits [replacement] + xs[:n]; a rejection at "
            "position 0 and a full acceptance are right."
        ),
        "source": "written for the study: list.insert(0, x) for append(x) in the emission of a round",
    },
    {
        "spec": "study_bugs10.counting:accepted_drafts_through_np_unique",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "the kept drafts are np.unique(xs[:n]) (meant as a list-to-array conversion), sorted "
            "ascending with repeats removed, then the replacement from (p_n - q_n)+ or the bonus from "
            "p_gamma."
        ),
        "source": "written for the study: np.unique used to turn the accepted ids into an array",
    },
    {
        "spec": "study_bugs10.counting:full_acceptance_detected_by_output_length",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "the bonus is appended when len(out) == gamma after the verify loop, which also holds after a"
            " rejection at the last position: such a round emits its replacement and then a bonus from "
            "p_gamma (a row conditioned on the rejected last draft)."
        ),
        "source": (
            "written for the study: an output-length test for 'every draft accepted' (the lost for/else "
            "of openvinotoolkit/openvino.genai#4190's class)"
        ),
    },
    {
        "spec": "study_bugs10.replacement:residual_reweighted_by_target_probability",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is drawn proportionally to (p - q)+ * p (the residual weighted once more by "
            "the target probability) instead of (p - q)+: ids where the target is confident are favoured."
        ),
        "source": (
            "written for the study: an importance weight carried over from the acceptance test into the "
            "residual (the wrong-residual-weights spot of huggingface/transformers#28508)"
        ),
    },
    {
        "spec": "study_bugs10.replacement:residual_over_draft_support_only",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the residual is restricted to the draft row's support: (p - q)+ * [q > 0], so ids the "
            "drafter gives no mass (where the residual is p) are never replacements; p when that is "
            "empty."
        ),
        "source": (
            "written for the study: a residual computed over a sparse draft row's id list (SGLang writes "
            "draft probabilities into a zero-initialised buffer, research notes section 3)"
        ),
    },
    {
        "spec": "study_bugs10.replacement:race_multiplies_by_exponential_noise",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is argmax((p - q)+ * E) with E ~ Exp(1) instead of the exponential race "
            "argmax((p - q)+ / E): multiplying by the noise favours the largest residual entries beyond "
            "their weight."
        ),
        "source": (
            "vLLM V1's recovered token argmax(max(p - q, 0) / E) (research notes, section 1.4), written with * for /"
        ),
    },
    {
        "spec": "study_bugs10.bonus:bonus_is_next_draft_when_target_supports_it",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "after a full acceptance the drafter's next proposal argmax q(. | prefix + xs) is emitted as "
            "the bonus whenever p_gamma gives it positive probability (a free extra draft taken without a"
            " test), and a draw from p_gamma otherwise; verified positions are standard."
        ),
        "source": (
            "written for the study: a bonus taken from the drafter (google-ai-edge/LiteRT-LM#3017's "
            "speculative path not using the verifier's sampling), guarded only by the target's support"
        ),
    },
    {
        "spec": "study_bugs10.bonus:bonus_sampled_at_draft_temperature",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the bonus is drawn through the drafter's sampler at its temperature 0.7: from p_gamma ** (1 "
            "/ 0.7) renormalised instead of p_gamma; verified positions are standard."
        ),
        "source": (
            "google-ai-edge/LiteRT-LM#3017 (the speculative path does not use the verifier's sampling "
            "parameters), here the bonus sampled with the drafter's configuration"
        ),
    },
    {
        "spec": "study_bugs10.bonus:bonus_greedy_when_row_is_confident",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "after a full acceptance the bonus is argmax p_gamma whenever p_gamma's largest probability "
            "exceeds 0.5 (a 'confident, skip sampling' fast path) and a draw from p_gamma otherwise; "
            "verified positions are standard."
        ),
        "source": (
            "written for the study: a skip-sampling shortcut on the bonus path (the silent greedy bonus "
            "of sgl-project/sglang#31214, here only for peaked rows)"
        ),
    },
    {
        "spec": "study_bugs10.numerics:log_coin_taken_with_log1p",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the log-space test takes the coin's logarithm with np.log1p instead of np.log (log1p(u) < "
            "log p(x) - log q(x)): log1p(u) >= 0, so a draft with p(x) < q(x) is never accepted and one "
            "with p(x) >= q(x) is accepted with probability min(1, p/q - 1); replacement and bonus are "
            "standard."
        ),
        "source": (
            "written for the study: np.log1p reached for as the 'accurate' logarithm of a uniform in a "
            "log-space acceptance test"
        ),
    },
    {
        "spec": "study_bugs10.numerics:coin_drawn_as_random_bit",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the acceptance coin is rng.integers(0, 2), a random bit, where a uniform on [0, 1) was "
            "meant: a draft with p(x) > 0 is accepted with probability 1/2 whatever its ratio (p(x) = 0 "
            "never); replacement and bonus are standard."
        ),
        "source": (
            "written for the study: an integer draw where a uniform was meant (the coin class of "
            "vllm-project/vllm-ascend#13470, where the coin was a constant on NPU)"
        ),
    },
    {
        "spec": "study_bugs10.numerics:residual_in_unsigned_fixed_point_wraps",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the residual is P - Q on probabilities in unsigned 16.16 fixed point (uint32), which wraps "
            "to about 2**32 where q > p instead of clamping at 0: the replacement is nearly uniform over "
            "the ids with q > p (the rejected draft included)."
        ),
        "source": (
            "written for the study: an integer probability kernel whose clamp was dropped (unsigned "
            "subtraction wraps instead of going negative)"
        ),
    },
    # ---- request-level state (stateful) and stop tokens ------------------------------------------
    {
        "spec": "study_bugs10.state:generator_restored_at_each_request",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": (
            "stateful: one generator serves the process; its state is saved when created and restored at "
            "each new request, so every request replays the same stream (drafts, coins, replacements, "
            "bonuses); two requests with the same prompt emit the same tokens."
        ),
        "source": (
            "NVIDIA/TensorRT-LLM#19487 (serial unseeded requests share one random stream and give "
            "identical samples), here through a generator state restored per request"
        ),
    },
    {
        "spec": "study_bugs10.state:drafts_spill_into_unallocated_block",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": (
            "stateful: the request's KV blocks (16 slots) are allocated for the committed length only, "
            "not for the gamma drafts of the pass; drafts whose slots lie past the allocated blocks are "
            "read back as id 0 (the null block), so the target rows after the first spilled slot (ratio, "
            "residual, bonus) condition on 0; rounds inside the allocated blocks are right."
        ),
        "source": (
            "ROCm/ATOM#250 (block allocation for multi-token decode counted the current length, not the "
            "tokens about to be generated) and RBLN-SW/vllm-rbln#326 (proposals crossing a block boundary"
            " corrupt the KV cache)"
        ),
    },
    {
        "spec": "study_bugs10.state:drafter_bans_eos_but_reports_unmasked_row",
        "buggy": True,
        "flags": [],
        "family": "stop_tokens",
        "mechanism": (
            "the drafter never proposes the end-of-sequence id (the last id): each draft is drawn from "
            "its row with EOS removed and renormalised while the unmasked row is reported as q, so EOS is"
            " emitted only through the residual (p - q)+ or the bonus and requests end at EOS too rarely "
            "(the other drafts are tested against a row they were not drawn from)."
        ),
        "source": (
            "openvinotoolkit/openvino.genai#1951 / #3293 (a drafted EOS handled on its own path: the "
            "draft side's EOS treatment changed the main model's results) and vllm-project/vllm#41768 (an"
            " EOS mask on the speculative path); written for the study as an EOS ban in the draft sampler"
        ),
    },
    # ---- penalty counts of a request (stateful, --logits) ----------------------------------------
    {
        "spec": "study_bugs10.state:penalty_counts_miss_bonus_tokens",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "stateful: the request's penalty counts are updated with each round's accepted drafts and "
            "replacement before the bonus is sampled, and bonus tokens never enter them: every later row "
            "of the request (draft and target) is penalised (repetition, presence, frequency) over a "
            "history without the request's bonus tokens."
        ),
        "source": (
            "sgl-project/sglang#33643 (penalty state fed only part of each step's accepted tokens) and "
            "vllm-project/vllm#33251 (spec-penalty bookkeeping of the last sampled token), here the bonus"
            " left out"
        ),
    },
    # ---- settings parity (--logits) --------------------------------------------------------------
    {
        "spec": "study_bugs10.parity:temperature_only_on_bonus_row",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_temperature",
        "mechanism": (
            "the verified target rows 0 .. gamma - 1 are processed at temperature 1 (every other knob "
            "applied) and only the bonus row, which goes through the regular sampler, gets the request's "
            "temperature; greedy requests and the drafts are right."
        ),
        "source": (
            "vllm-project/vllm#42744 / #42802 (processors applied on the bonus token and skipped on "
            "verified positions), here the temperature"
        ),
    },
    {
        "spec": "study_bugs10.parity:target_top_k_set_taken_from_draft_row",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_k",
        "mechanism": (
            "the target's row is masked with the draft row's top-k id set (computed on the draft's logits"
            " after bias, penalties and temperature) instead of its own k largest logits (its own top-k "
            "when the two share no finite logit); bias, penalties, temperature, top-p and min-p and the "
            "drafts are right."
        ),
        "source": (
            "written for the study: one top-k index tensor computed for the drafter and reused on the "
            "target; sgl-project/sglang#36173 (the verifier's filter pipeline differs from the sampler's)"
        ),
    },
    {
        "spec": "study_bugs10.parity:target_top_p_cumulated_in_id_order",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_p",
        "mechanism": (
            "the verifier's hand-written top-p accumulates the row's probabilities in vocabulary order "
            "(no sort) and keeps the ids whose preceding mass is below top_p, instead of the most likely "
            "tokens; bias, penalties, temperature, top-k, min-p and the drafts are right."
        ),
        "source": (
            "written for the study: a hand-written nucleus filter without its sort; "
            "sgl-project/sglang#36173 (top-p on the speculative path differs from the sampler's)"
        ),
    },
    {
        "spec": "study_bugs10.parity:target_min_p_as_absolute_threshold",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_min_p",
        "mechanism": (
            "the verifier's min-p removes the tokens with p < min_p (an absolute cut, as epsilon "
            "sampling) instead of p < min_p * max p (the most likely token kept); everything else and the"
            " drafts are right."
        ),
        "source": (
            "written for the study: min-p confused with an epsilon cut; sgl-project/sglang#10617 (min_p "
            "not applied right with EAGLE)"
        ),
    },
    {
        "spec": "study_bugs10.parity:target_logit_bias_subtracted",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_logit_bias",
        "mechanism": (
            "the verifier applies the logit bias with the pooler's convention (logits -= bias) before the"
            " rest of the pipeline: every target row carries the bias with the wrong sign; the drafts "
            "carry it right."
        ),
        "source": (
            "vllm-project/vllm#39435 (the pooler's logit_bias is subtracted and the sampling logit_bias "
            "added: two features under one name), the pooler's convention on the verifier"
        ),
    },
    {
        "spec": "study_bugs10.parity:target_repetition_penalty_applied_twice",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "the model runner applies the repetition penalty to the target's raw logits and the sampler's"
            " pipeline applies it again after the bias: every target row is penalised twice; the drafts "
            "once."
        ),
        "source": (
            "sgl-project/sglang-omni#2005 (the model runner and SGLang's sampler both applied "
            "repetition_penalty, squaring it, so regular decode and speculative verify disagreed)"
        ),
    },
    {
        "spec": "study_bugs10.parity:target_presence_penalty_from_second_occurrence",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "the verifier's presence penalty masks the tokens generated at least twice (count > 1) "
            "instead of at least once; the frequency and repetition penalties and the drafts are right."
        ),
        "source": (
            "written for the study: an off-by-one in the presence mask of a hand-written spec-penalty "
            "kernel (the spot of vllm-project/vllm#33251)"
        ),
    },
    # ---- exact steps written in unusual ways -----------------------------------------------------
    {
        "spec": "study_bugs10.correct:replacement_predrawn_accepts_matching_draft",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the replacement y ~ (p - q)+ is drawn before the coin and a draft equal to y is kept "
            "without its coin; y == x is only possible where p(x) >= q(x), where the coin accepts anyway."
        ),
        "source": "written for the study: looks like an OR-ed fast path (alibaba/rtp-llm#1295)",
    },
    {
        "spec": "study_bugs10.correct:round_output_capped_at_three_tokens",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: a per-step budget keeps the first 3 tokens of each round (a full acceptance loses its"
            " last draft and its bonus); a cut at a fixed index keeps every emitted token distributed as "
            "p given the tokens before it."
        ),
        "source": "written for the study: looks like accepted tokens dropped",
    },
    {
        "spec": "study_bugs10.correct:drafter_sharpened_and_reported_sharpened",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the drafter samples from its row squared and renormalised (temperature 0.5) and "
            "reports that same row as q."
        ),
        "source": (
            "written for the study: the consistent twin of rows:drafter_vocab_trimmed_q_not_renormalised "
            "(a drafter law other than its raw row, reported as drawn)"
        ),
    },
    {
        "spec": "study_bugs10.correct:verification_pass_in_two_chunks",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the verification runs as target(prefix, xs[:2]) and target(prefix + xs[:2], xs[2:]); "
            "rows 0 and 1 of the first pass and every row of the second are the rows of prefix + xs[:i]."
        ),
        "source": ("written for the study: the exact twin of a chunked verify that loses a chunk (study_bugs4)"),
    },
    {
        "spec": "study_bugs10.correct:penalty_counts_kept_incrementally",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": (
            "exact (stateful, resets per request): the request's penalty counts are two count vectors "
            "updated with every emitted token (bonus included), and row i adds the counts of xs[:i]; "
            "histories recomputed where a window or a prompt-free repetition count is set."
        ),
        "source": "written for the study: the exact twin of state:penalty_counts_miss_bonus_tokens",
    },
    {
        "spec": "study_bugs10.correct:temperature_applied_to_log_softmax",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": (
            "exact: bias and penalties are applied, the row is turned into log-probabilities "
            "(log_softmax) and temperature and the filters are applied to those; log_softmax shifts a row"
            " by a constant no later stage sees (greedy requests take the plain pipeline)."
        ),
        "source": ("written for the study: looks like temperature applied to log-probabilities instead of logits"),
    },
]
