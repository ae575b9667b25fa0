"""Round steps for a twelfth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages, ``docs/verdict.md`` or
``docs/protocol.md``, and without reading any diagnosis output (every audit ran with
``--no-diagnosis``). Nothing was grepped across the repository.
What was read: the whole of ``tests/study_bugs11/__init__.py`` (docstring, format and entries),
``tests/study_bugs11/_common.py`` and ``tests/study_bugs11/state.py`` (how a step module looks), the
first 60 lines of ``tests/study_bugs11/parity.py`` and the first 40 of ``tests/study_bugs11/correct.py``;
``tests/study_bugs/_util.py`` and ``tests/study_bugs10/_common.py`` (the correct helpers the steps
use); the ``"mechanism"`` sentences of ``tests/study_bugs`` to ``tests/study_bugs11`` (``grep -A2`` /
``-A4`` / ``-A6`` on ``"mechanism"``, only to avoid duplicating them; those greps also showed, in
passing, a few lines of the earlier sets' docstrings that mention ``"mechanism"``);
``docs/examples/round_step.py`` and ``docs/examples/round_step_logits.py`` (the two signatures);
the first 5 lines of ``docs/adapters.md``; the whole of ``specverify/dists/_processing.py``, lines
1-200 of ``specverify/dists/_settings.py`` and ``validate_logits`` in ``specverify/dists/_validate.py``
(the settings pipeline, for the ``--logits`` steps); the first 80 lines of ``specverify audit
--help``; the research notes ``/work/shared/research/real-bugs-2024-2026.md`` (whole) and
``/work/shared/research/engines-and-bugs.md`` (the lines citing a tracker reference); the trackers
cited in ``source`` come from those notes (no issue thread was opened for this set). The function
and class names of the earlier sets were not listed. Seen in passing, not opened: the file names
under ``tests/`` and ``tests/study_bugs11/`` (directory listings), the output of ``git status
--short`` (empty), the commit id and the machine's CPU line (for RESULTS.md). Before the audits every
step was run on a toy pair of hashed tables outside specverify (a smoke test for crashes; not an
audit), and ruff (check and format) was run on this set's files only.

Buggy speculative-decoding round steps, each one mistake modelled on a real report (tracker
reference) or written for the study with the reason it is plausible, chosen to differ from the
mechanisms of ``tests/study_bugs`` to ``tests/study_bugs11``, and six exact round steps written in
unusual ways that look like bugs (a bonus skipped on a condition, plain decoding after a round that
kept nothing, a coin made of two uniforms mod 1, the kept count from np.trim_zeros, a drafter that
masks its repeats, a presence penalty on clipped counts; several are twins of buggy steps of this
set). ``STUDY`` lists them; the ``family`` labels are the writer's own and ``mechanism`` says
exactly what each step does wrong (or why it is exact). Every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util``,
``study_bugs10._common`` and this set's ``_common`` (correct building blocks); every mistake lives
in its step, on the line marked ``# BUG:``. Stateful steps (``state.py``, and one exact step of
``correct.py``) are module-level objects whose ``__call__`` is the step; they treat a round whose
prefix does not continue the previous round's output as the start of a new request, and keep
state of one request at most.
Eight buggy steps of a first draft passed the audit (their effect on the audit's model pairs
was below its resolution, a TV of about 0.1 per unit) and were replaced by the steps now in STUDY:
``rows:drafter_blocks_repeats_within_block`` (a drafter that never repeats an id within a block,
reporting the unmasked row) by ``rows:draft_row_reported_sharpened``;
``acceptance:ratio_running_minimum`` (the running minimum of the round's ratios) by
``acceptance:coin_drawn_from_normal_not_uniform``; ``acceptance:coin_truncated_to_tenths`` (the coin
floor(10 u) / 10) by ``acceptance:ratio_of_cumulative_rows``;
``replacement:replacement_excludes_every_draft_of_the_round`` (every drafted id zeroed in the
residual) by ``replacement:residual_in_ratio_space``; ``replacement:residual_mixed_with_target_row``
(0.8 residual + 0.2 p) by ``replacement:replacement_best_of_three_draws``;
``bonus:bonus_excludes_last_draft`` (p_gamma without the last draft's id) by
``bonus:bonus_best_of_two_draws``; ``bonus:bonus_icdf_reuses_last_acceptance_coin`` (the accepting
coin reused for the bonus's inverse CDF) by ``bonus:bonus_residual_against_uniform_placeholder``;
and ``parity:target_presence_and_frequency_swapped`` (the two additive penalties' values swapped on
the target, --logits) by ``parity:target_temperature_multiplies_logits``. Their code was removed;
RESULTS.md lists them with their verdicts. The exact step
``correct:drafter_blocks_repeats_and_reports_the_masked_rows`` is the twin of the first of them.
Of the audits' output only the verdict lines (which units PASS or FAIL, and the line naming the
first failing test) and the exit codes were looked at; with ``--no-diagnosis`` they carry no
diagnosis.
"""

_NOTES = "research notes (/work/shared/research/engines-and-bugs.md)"

STUDY = [
    # ---- rows ----------------------------------------------------------------------------------
    {
        "spec": "study_bugs12.rows:draft_rows_alias_one_buffer",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "the drafter writes every draft row into one preallocated buffer and stores a reference to "
        "it as the row of the token just drawn: after the loop every stored row is q_{gamma-1}, so "
        "draft i (drawn from q_i) is tested, and its residual formed, with the last draft row.",
        "source": "vllm-project/vllm#30846 (logits modified in place while other code still held them; "
        + _NOTES
        + " B14); written for the study as a reused numpy buffer appended without a copy",
    },
    {
        "spec": "study_bugs12.rows:draft_row_reported_sharpened",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "each draft is drawn from q_i, but the row reported to the verifier is q_i squared and "
        "renormalised (a temperature-0.5 copy of the row): the ratio and the residual use q_i^2 / sum "
        "q_i^2 instead of q_i.",
        "source": "vllm-project/vllm-ascend#6685 (temperature misapplied where probabilities were kept) and "
        "huggingface/transformers#32867 (q reported from another law than the one sampled); written for "
        "the study as a sharpened reported row",
    },
    {
        "spec": "study_bugs12.rows:drafter_samples_its_nucleus_reports_full_row",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "each draft is drawn from the nucleus of q_i (the most likely ids whose preceding mass is "
        "below 0.8, renormalised) while the full q_i is reported as its law.",
        "source": "huggingface/transformers#47932 / #47961 (DFlash/MTP generators sample from top-k/top-p "
        "processed logits and return raw ones as q), here a nucleus of the drafter's own row without "
        "--logits",
    },
    {
        "spec": "study_bugs12.rows:verify_pass_fed_tree_path_unreversed",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the drafts are kept as a parent-linked path and the verification pass is fed the path "
        "collected from the leaf up, xs reversed: row 0 is right, row j >= 1 (the bonus row included) "
        "is p(. | prefix + xs[::-1][:j]) instead of p(. | prefix + xs[:j]); ratio, residual and "
        "emitted tokens use the drafts in order.",
        "source": "written for the study: a tree path walked with parent pointers and not reversed (tree "
        "verification as in SafeAILab/EAGLE#183 and ggml-org/llama.cpp#5625)",
    },
    {
        "spec": "study_bugs12.rows:verify_context_aliased_with_draft_list",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the drafting loop appends each draft to its context list, which is the prefix list itself, "
        "and that list is then passed to the verification pass as the committed prefix: target row j "
        "is p(. | prefix + xs + xs[:j]) instead of p(. | prefix + xs[:j]); the drafter's rows are right.",
        "source": "written for the study: Python list aliasing (ctx = prefix instead of list(prefix)); the "
        "context-doubling class of ml-explore/mlx-lm#1175",
    },
    # ---- acceptance ----------------------------------------------------------------------------
    {
        "spec": "study_bugs12.acceptance:ratio_divided_by_envelope_constant",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "a draft is accepted with probability (p(x) / q(x)) / M, M = max_v p(v) / q(v) over the ids "
        "with q > 0 (M >= 1), the textbook rejection sampler's envelope, instead of min(1, p(x) / "
        "q(x)); the replacement is (p - q)+ and the bonus standard.",
        "source": "written for the study: plain rejection sampling (accept with p / (M q)) mixed into the "
        "speculative rule",
    },
    {
        "spec": "study_bugs12.acceptance:coin_drawn_from_normal_not_uniform",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "the coin is rng.standard_normal() where rng.random() was meant: a draft with ratio r = min(1, "
        "p(x) / q(x)) is accepted with probability Phi(r) >= 1/2 (r = 0 -> 0.5, r = 1 -> 0.84) instead of "
        "r. Replacement and bonus are standard.",
        "source": "written for the study: randn written for rand (torch.randn / torch.rand); the coin class of "
        "vllm-project/vllm-ascend#13470 / #13730",
    },
    {
        "spec": "study_bugs12.acceptance:coins_sorted_ascending",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "the round's gamma coins are drawn at once and sorted ascending, so draft i is tested with the "
        "i-th smallest of gamma uniforms: early drafts are accepted too often, later ones too rarely; "
        "replacement and bonus are standard.",
        "source": "written for the study: np.sort applied to the coin array (flashinfer-ai/flashinfer#424 / #425: "
        "uniforms not unique per position in a kernel)",
    },
    {
        "spec": "study_bugs12.acceptance:ratio_of_cumulative_rows",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "a draft is accepted with probability min(1, P(x) / Q(x)), P and Q the running sums (CDFs) of p "
        "and q up to x, instead of min(1, p(x) / q(x)). Replacement and bonus are standard.",
        "source": "written for the study: the verifier keeps CDF rows for inverse-CDF sampling and the test reads them",
    },
    # ---- counting ------------------------------------------------------------------------------
    {
        "spec": "study_bugs12.counting:kept_count_via_trim_zeros",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": "n = len(np.trim_zeros(mask, 'b')): the drafts up to the last accepted one are kept (rejected "
        "ones before it included), then a draw from (p_n - q_n)+ (n < gamma) or the bonus from p_gamma.",
        "source": "written for the study: np.trim_zeros on the accept mask where its cumprod was meant (the exact "
        "twin is correct:kept_count_via_trim_zeros_of_cumprod)",
    },
    {
        "spec": "study_bugs12.counting:output_overlap_with_prefix_dropped",
        "buggy": True,
        "flags": [],
        "family": "tokens_emitted",
        "mechanism": "the round's output is stitched to the prefix with an overlap check: when its first token "
        "equals the prefix's last token (and more tokens follow) it is dropped, so a repeated token is "
        "lost whenever a round starts with it.",
        "source": "written for the study: overlap removal when joining a round's tokens to the stream (the "
        "token-bookkeeping spot of openvinotoolkit/openvino.genai#4190)",
    },
    # ---- replacement ---------------------------------------------------------------------------
    {
        "spec": "study_bugs12.replacement:residual_shifted_by_its_minimum",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from w = (p - q) - min(p - q) (the difference shifted to be "
        "non-negative) instead of (p - q)+: every id gets weight, those the drafter over-proposed "
        "least the most. Test and bonus are standard.",
        "source": "written for the study: 'make it non-negative' done by a shift instead of a clamp",
    },
    {
        "spec": "study_bugs12.replacement:residual_in_ratio_space",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from (p / q - 1)+ (q floored at 1e-6) instead of (p - q)+: each id's "
        "weight is divided by q, so ids the drafter rarely proposes dominate. Test and bonus are "
        "standard.",
        "source": "written for the study: the residual formed in the acceptance test's units (ratios)",
    },
    {
        "spec": "study_bugs12.replacement:replacement_best_of_three_draws",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "after a rejection three candidates are drawn from (p - q)+ and the one with the largest p is "
        "emitted (best of three) instead of one draw. Test and bonus are standard.",
        "source": "written for the study: a best-of-n 'quality' pick on the correction token; the multi-candidate "
        "selection class of foundation-model-stack/fms-extras#12",
    },
    # ---- bonus ---------------------------------------------------------------------------------
    {
        "spec": "study_bugs12.bonus:bonus_best_of_two_draws",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": "after a full acceptance two candidates are drawn from p_gamma and the more likely one is emitted "
        "(best of two) instead of one draw. Verified positions are standard.",
        "source": "written for the study: a best-of-n pick on the bonus token",
    },
    {
        "spec": "study_bugs12.bonus:bonus_residual_against_uniform_placeholder",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": "the bonus goes through the replacement kernel with a placeholder draft row of 1/V: it is drawn "
        "from (p_gamma - 1/V)+ (p_gamma when empty) instead of p_gamma, so only ids above 1/V can be a "
        "bonus. Verified positions are standard.",
        "source": "written for the study: a 'neutral' placeholder draft row for the undrafted bonus position "
        "(vllm-project/vllm#40149: the path without draft probabilities)",
    },
    # ---- numerics ------------------------------------------------------------------------------
    {
        "spec": "study_bugs12.numerics:log_probabilities_via_log1p",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the test is done in log space with the log-probabilities taken by np.log1p instead of np.log: "
        "a draft is accepted with probability min(1, (1 + p(x)) / (1 + q(x))) >= 1/2 instead of min(1, "
        "p(x) / q(x)), p(x) = 0 included. Replacement and bonus are standard.",
        "source": "written for the study: log1p used 'for accuracy near 0' on probabilities",
    },
    {
        "spec": "study_bugs12.numerics:target_rows_scaled_by_their_max",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the target's rows are divided by their largest entry (p / max p) and used for the ratio "
        "(inflated by 1 / max p) and the residual (p / max p - q)+; the bonus sampler renormalises its row.",
        "source": "written for the study: a max-normalisation meant for logits applied to probabilities (the "
        "unnormalised-row class of deepseek-ai/DeepSpec#31)",
    },
    # ---- parity (--logits) ---------------------------------------------------------------------
    {
        "spec": "study_bugs12.parity:target_repetition_penalty_skips_prompt",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier's repetition penalty counts the generated tokens only (not the prompt), while "
        "the request's counts both; the other knobs and the drafts are right.",
        "source": "llama-cpp-python's convention (penalize_prompt=False) on the verifier only; NVIDIA/TensorRT-LLM"
        "#17701 (penalties mishandled on the one-model speculative path)",
    },
    {
        "spec": "study_bugs12.parity:target_frequency_penalty_follows_logit_sign",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier applies the frequency penalty with the repetition penalty's sign rule: a negative "
        "logit gets + frequency * count instead of - frequency * count; presence and repetition "
        "penalties, the rest of the pipeline and the drafts are right.",
        "source": "written for the study: the multiplicative penalty's sign branch copied into the additive one; "
        "vllm-project/vllm#18902 (frequency penalty on the speculative path)",
    },
    {
        "spec": "study_bugs12.parity:target_penalty_history_includes_scored_token",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "target row i is penalised over prefix + xs[:i + 1] (the history slice includes the draft the "
        "row scores) instead of prefix + xs[:i]; the bonus row and the drafts are right.",
        "source": "written for the study: a history slice one too long; sgl-project/sglang#40244 (penalty state "
        "across the positions of a verify block)",
    },
    {
        "spec": "study_bugs12.parity:target_repetition_penalty_inverted",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier uses 1 / repetition_penalty (an engine convention where values below 1 penalise): "
        "seen tokens are favoured instead of penalised on the target rows; the other knobs and the "
        "drafts are right.",
        "source": "written for the study: a penalty convention converted twice; sgl-project/sglang#21258 "
        "(repetition penalty mishandled on a speculative path)",
    },
    {
        "spec": "study_bugs12.parity:target_temperature_multiplies_logits",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_temperature",
        "mechanism": "the verifier applies temperature as logits * T instead of logits / T (sampling rows only; greedy "
        "rows are right); bias, penalties, filters and the drafts are right.",
        "source": "written for the study: * for / in the temperature step; ohdearquant/lattice#388 (temperature "
        "missing in the verifier's softmax)",
    },
    {
        "spec": "study_bugs12.parity:target_top_k_set_from_raw_logits",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_k",
        "mechanism": "the verifier's top-k set is computed on the raw target logits (before bias and penalties) and "
        "applied as a mask in place of top-k on the processed logits; bias, penalties, temperature, "
        "top-p, min-p and the drafts are right.",
        "source": "sgl-project/sglang#36173 (the verifier's filters differ from the sampler's), here top-k "
        "computed before the bias and penalties",
    },
    {
        "spec": "study_bugs12.parity:target_top_p_applied_twice",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_p",
        "mechanism": "the verifier runs the request's pipeline and then top-p once more on the renormalised result "
        "(min_tokens_to_keep respected); greedy rows, requests without top-p and the drafts are right.",
        "source": "sgl-project/sglang#36173 (top_p_renorm_prob on the verify path besides the sampler's own "
        "filters), here the nucleus cut twice",
    },
    # ---- state across the rounds of a request --------------------------------------------------
    {
        "spec": "study_bugs12.state:target_cache_trimmed_one_too_many_after_rejection",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: the target's context is a per-request cache; after a round with a rejection it is "
        "rolled back one entry past the rejected drafts (the last kept token, or the last committed one "
        "when nothing was kept, is lost) before the replacement is written, so every later target row "
        "of the request conditions on a context missing one token per such round; the drafter sees the "
        "true prefix.",
        "source": "lablup/mlxcel#994 / #1002 (a KV rewind that trimmed too many entries, there on the drafter "
        "where it is exact), here on the target's cache",
    },
    {
        "spec": "study_bugs12.state:target_cache_keeps_rejected_draft_in_replacement_slot",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: the target's context is a per-request cache; after a rejection at n the slot of "
        "x_n (written by the verification pass) is kept as committed, so the cache holds the rejected "
        "draft where the replacement was emitted and every later target row of the request conditions "
        "on x_n in its place.",
        "source": "huggingface/text-generation-inference#2711 (KV slots written wrong with speculation) and "
        "ml-explore/mlx-lm#1109 (rejected drafts left in the state), here the replacement's slot",
    },
    {
        "spec": "study_bugs12.state:draft_rows_cached_by_position",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: draft rows are cached per request under their absolute position; each draft is "
        "sampled from its fresh row, but the row reported to the verifier is the cached one when the "
        "position was drafted in an earlier round (computed on that round's drafts, rejected ones "
        "included).",
        "source": "vllm-project/vllm MRV2 cached draft logits (#35461; " + _NOTES + ") keyed by position and not "
        "invalidated after a rejection; written for the study",
    },
    {
        "spec": "study_bugs12.state:first_target_row_reused_from_previous_bonus_row",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: after a full acceptance the pass's bonus row p(. | prefix + xs) is kept and used as "
        "row 0 of the request's next round, whose context is prefix + xs + [bonus]: that round's first "
        "draft is tested (ratio, residual) with a row one token short; other rows, and rounds after a "
        "rejection, are right.",
        "source": "written for the study: the last row's logits reused as the next step's first row (the reuse "
        "of vllm-project/vllm#42744's bonus-row path), here one round late",
    },
    {
        "spec": "study_bugs12.state:first_draft_trusted_after_full_acceptance",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: after a fully accepted round, the request's next round accepts its first draft "
        "without its coin; every other test is standard and the flag clears after a rejection.",
        "source": "written for the study: an adaptive 'hot streak' heuristic; alibaba/rtp-llm#1295 (a fast path "
        "OR-ed with the test)",
    },
    # ---- correct, unusual ----------------------------------------------------------------------
    {
        "spec": "study_bugs12.correct:bonus_skipped_when_last_ratio_below_one",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: after a full acceptance the bonus is drawn from p_gamma only when the last draft had "
        "p(x) >= q(x), otherwise the round ends with its drafts; the choice depends only on the emitted "
        "context, and the next token then comes from the next round with the same law.",
        "source": "written for the study: looks like a lost bonus (a fully accepted round without a bonus is exact "
        "in an earlier set; here the bonus is dropped on a condition)",
    },
    {
        "spec": "study_bugs12.correct:plain_decoding_after_a_nothing_accepted_round",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact (stateful, resets per request): after a round that kept no draft, the request's next "
        "round does not speculate and emits one token drawn from p(. | prefix); the round after it "
        "speculates again.",
        "source": "written for the study: speculation switched off after a bad round (adaptive drafting as in "
        "transformers' heuristic schedule), looks like state that changes the law",
    },
    {
        "spec": "study_bugs12.correct:coin_as_sum_of_two_uniforms_mod_one",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the coin is (u1 + u2) mod 1, uniform on [0, 1) (a uniform shifted by an independent "
        "one and wrapped).",
        "source": "written for the study: the exact twin of an earlier set's coin u1 + u2",
    },
    {
        "spec": "study_bugs12.correct:kept_count_via_trim_zeros_of_cumprod",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: n = len(np.trim_zeros(np.cumprod(mask), 'b')); the running product is 1 up to the first "
        "rejection and 0 after it, so n is the number of leading accepts.",
        "source": "written for the study: the exact twin of counting:kept_count_via_trim_zeros",
    },
    {
        "spec": "study_bugs12.correct:drafter_blocks_repeats_and_reports_the_masked_rows",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the drafter does not propose an id already drafted in this round and reports the masked, "
        "renormalised row it drew from as q (any proposal is exact when q is its law).",
        "source": "written for the study: the exact twin of rows:drafter_blocks_repeats_within_block (a buggy step "
        "that passed the audit and was replaced)",
    },
    {
        "spec": "study_bugs12.correct:target_presence_penalty_from_clipped_counts",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": "exact: the verifier applies the presence penalty as presence * min(count, 1); bias, repetition "
        "and frequency penalties, temperature and filters as the request says.",
        "source": "written for the study: looks like an earlier set's frequency penalty on clipped counts",
    },
]
