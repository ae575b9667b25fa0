"""Round steps for an eighth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages or ``docs/verdict.md`` (no part
of it was opened), and without reading any diagnosis output (every audit ran with
``--no-diagnosis``). Nothing was grepped across the repository.
What was read: ``tests/study_bugs/_util.py`` (the correct helpers the steps use); the module
docstring of ``tests/study_bugs7/__init__.py``, its first three STUDY entries (the format), its
``"spec"`` lines and ``"family"`` labels, and its ``"mechanism"`` sentences (only to avoid
duplicating them); the whole of ``tests/study_bugs7/_common.py`` and ``tests/study_bugs7/counting.py``
(how a step module looks); the function and class names only of the earlier sets
(``grep -n "^def \\|^class " tests/study_bugs*/*.py``, to avoid their mechanisms);
``docs/examples/round_step.py`` and ``docs/examples/round_step_logits.py`` (the two signatures);
lines 50-80 of ``docs/adapters.md`` and the lines of it matching "tables", "context" or "vocab"
(the audit's model pairs: hashed order-2, position-dependent tables, a zero-heavy low-overlap pair
and a high-overlap pair); ``specverify/dists/_processing.py`` (softmax to probs_from_logits) and
the field list and lines 95-125 and 236-270 of ``specverify/dists/_settings.py`` (the settings pipeline, for the
``--logits`` steps); ``specverify audit --help`` (its first 60 lines); and the research notes
``/work/shared/research/real-bugs-2024-2026.md`` and ``/work/shared/research/engines-and-bugs.md``
(its first 150 lines). ``docs/protocol.md`` was not opened. Before writing,
``docs/examples/round_step.py`` was audited once (``--no-diagnosis``) to time an audit.

Buggy speculative-decoding round steps, each one mistake modelled on a real report from the research
notes (tracker reference) or written for the study with the reason it is plausible, chosen to differ
from the mechanisms of ``tests/study_bugs`` to ``tests/study_bugs7``, and exact round steps written
in unusual ways, several of which look like bugs (an OR-ed fast path, a recycled coin, one coin per
round, a bonus drafted and verified, a drafter with a short window, a row memo across rounds; some are
twins of buggy steps of this set). ``STUDY`` lists them; the ``family`` labels are the writer's own
and ``mechanism`` says exactly what each step does wrong (or why it is exact). Every spec is audited
with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util`` and
``study_bugs8._common`` (correct building blocks); every mistake lives in its step, on the line marked
``# BUG:``. Stateful steps (three in ``state.py``, one in ``correct.py``) are module-level objects
whose ``__call__`` is the step; they reset when a round's prefix does not continue the previous
round's output (a new request).
"""

STUDY = [
    # ---- target and draft rows --------------------------------------------------------------------------
    {
        "spec": "study_bugs8.rows:target_fed_drafts_in_reverse_order",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the verification pass is fed the drafts in reverse order, so row i is p(. | prefix + "
            "reversed(xs)[:i]) and the bonus row p(. | prefix + reversed(xs)); row 0 is right, the ratio, "
            "residual and bonus of later positions use rows of a context that was never emitted."
        ),
        "source": (
            "written for the study: drafts popped off a stack (LIFO) into the verification batch; the "
            "row-ordering class of HabanaAI/vllm-fork#1780 (batch-expansion ordering wrong)"
        ),
    },
    {
        "spec": "study_bugs8.rows:draft_row_zeroed_at_its_sample_in_place",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "after each draft is sampled, its entry in the draft row is set to 0 in place (a no-repeat mask) and "
            "that mutated row is the q handed to the verifier: q_i(x_i) reads 0, so every draft is accepted (the "
            "ratio is infinite or 0/0), and the residual is never used."
        ),
        "source": (
            "vllm#30846 (logits modified in place before being read for another purpose) and "
            "osaurus-ai/vmlx-swift#357 (shared state mutated by the draft loop): the reported q mutated after "
            "sampling"
        ),
    },
    {
        "spec": "study_bugs8.rows:draft_sampled_on_window_context",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "each draft is sampled from q(. | ctx[-4:]) (a sliding window of the last 4 tokens, so another "
            "position of the order-2 tables) while the verifier is given q(. | ctx) for the ratio and the "
            "residual."
        ),
        "source": (
            "ml-explore/mlx-lm#1423 (a RotatingKVCache window) on the drafter, with transformers#47932 (the "
            "reported q is not the law the drafts were sampled from)"
        ),
    },
    {
        "spec": "study_bugs8.rows:draft_sampled_from_mirrored_cumsum",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "each draft is drawn by inverse CDF over the reversed draft row and the index found in the reversed "
            "row is kept as the id, so the draft is id j with probability q(V - 1 - j), while q is reported as "
            "its law for the ratio and the residual."
        ),
        "source": (
            "written for the study: a descending-id scan whose index is not mapped back; the class of llama.cpp "
            "examples/speculative (engines-and-bugs.md B32: the drafted token is not the one whose q is used)"
        ),
    },
    # ---- acceptance test --------------------------------------------------------------------------------
    {
        "spec": "study_bugs8.acceptance:ratio_of_peak_normalised_rows",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "the acceptance probability is min(1, (p(x) / max p) / (q(x) / max q)): both rows are divided by "
            "their own peak before the ratio, so the test is off by the factor max q / max p; replacement and "
            "bonus are standard."
        ),
        "source": (
            "written for the study: a 'confidence relative to the top token' normalisation (as typical-acceptance"
            " code computes) put into the exact test"
        ),
    },
    {
        "spec": "study_bugs8.acceptance:rejected_draft_given_second_coin",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "a draft that fails its coin is retried once with a second coin, so it is accepted with probability 1"
            " - (1 - r)^2 instead of r = min(1, p(x) / q(x)); replacement and bonus are standard."
        ),
        "source": (
            "written for the study: a 'retry once' before resampling; the over-acceptance class of "
            "alibaba/rtp-llm#1295 (acceptance double-counted)"
        ),
    },
    {
        "spec": "study_bugs8.acceptance:target_prob_maxed_over_block_rows",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "the target probability of draft x_i is read from ps.max(axis=0)[x_i], the maximum of x_i's "
            "probability over all gamma + 1 rows of the pass, instead of ps[i, x_i]: the test is u < min(1, max_j"
            " p_j(x_i) / q_i(x_i)); replacement and bonus use the right rows."
        ),
        "source": (
            "written for the study: an axis slip in a vectorised gather; vllm-project/vllm#51812 (tensors not "
            "gathered with the spec-token indices)"
        ),
    },
    {
        "spec": "study_bugs8.acceptance:rows_agreeing_on_top_token_accept_any_draft",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "a draft is accepted without the test whenever argmax p_i == argmax q_i (the rows agree on their top "
            "token), whatever token was drafted; otherwise u < min(1, p/q). Replacement and bonus are standard."
        ),
        "source": (
            "alibaba/rtp-llm#1295 (an exact-match fast path OR-ed with the ratio test), with the match taken "
            "between the two rows' argmaxes instead of between the draft and the target's argmax"
        ),
    },
    {
        "spec": "study_bugs8.acceptance:repeat_of_previous_token_accepted_outright",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "a draft equal to the token before it (the last prefix token for x_0, x_{i-1} otherwise) is accepted "
            "without the test; every other draft gets u < min(1, p/q). Replacement and bonus are standard."
        ),
        "source": (
            "written for the study: a prompt-lookup / n-gram repetition heuristic (vllm#39273, n-gram drafting) "
            "leaking into verification as an accept-without-test fast path"
        ),
    },
    # ---- number of accepted drafts ----------------------------------------------------------------------
    {
        "spec": "study_bugs8.counting:first_rejection_by_binary_search_on_unsorted_mask",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "the number kept is np.searchsorted(~accept, True), a binary search that assumes the rejection mask "
            "is sorted; after the first rejection the mask is arbitrary, so with a rejection followed by an "
            "acceptance the search can return a later index, keeping rejected drafts and drawing the replacement "
            "at that later position."
        ),
        "source": (
            "written for the study: np.searchsorted on a mask that is monotone only up to the first rejection (a "
            "vectorised first-rejection idiom)"
        ),
    },
    {
        "spec": "study_bugs8.counting:first_rejection_as_most_negative_margin",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "with the margins m_i = min(1, p_i(x_i) / q_i(x_i)) - u_i, the rejection handled is argmin(m) (the "
            "most negative margin) instead of the first negative one: with two or more rejections the later one "
            "can be taken, and the rejected drafts before it are emitted."
        ),
        "source": (
            "written for the study: the 'worst' rejection for the first; openvinotoolkit/openvino.genai#4190 (a "
            "rejection handled at the wrong iteration) is the same spot"
        ),
    },
    {
        "spec": "study_bugs8.counting:first_rejection_via_str_find",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "the first rejection is found with str.find('0') on the mask written as a string, which returns -1 "
            "when every draft is accepted: such a round emits xs[:-1] and a replacement from (p_gamma - "
            "q_{gamma-1})+ instead of every draft and the bonus; rounds with a rejection are right."
        ),
        "source": (
            "written for the study: str.find's -1 for 'not found' taken as a count; the sentinel class of "
            "vllm#46899 (stale -1 placeholders fed back)"
        ),
    },
    {
        "spec": "study_bugs8.counting:leading_run_length_ignores_run_value",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "the number kept is the length of the mask's first run (first index where np.diff is non-zero, plus "
            "one; gamma when the mask is constant), whatever the run's value: a leading run of rejections is kept"
            " as if accepted, and an all-rejected mask keeps every draft and draws the bonus."
        ),
        "source": (
            "written for the study: run-length encoding of the accept mask without checking the first run's value"
        ),
    },
    # ---- replacement law --------------------------------------------------------------------------------
    {
        "spec": "study_bugs8.replacement:residual_computed_once_before_loop",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the residual is computed once, for position 0, before the verification loop: a rejection at position"
            " k > 0 replaces from (p_0 - q_0)+ instead of (p_k - q_k)+."
        ),
        "source": (
            "written for the study: a loop-invariant hoist of the residual; vllm-project/vllm-ascend#7807 (a "
            "residual not adjusted for the position's rule) is the same spot"
        ),
    },
    {
        "spec": "study_bugs8.replacement:residual_weights_squared",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn proportionally to ((p - q)+)^2 instead of (p - q)+.",
        "source": (
            "written for the study (squared entries taken from a norm computation); transformers#28508 (the "
            "residual renormalised wrongly) is the same spot"
        ),
    },
    {
        "spec": "study_bugs8.replacement:residual_divided_by_draft_row",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the residual is divided entrywise by the draft row where q > 0: the replacement is drawn "
            "proportionally to (p - q)+ / q (and p where q = 0) instead of (p - q)+."
        ),
        "source": (
            "written for the study: the ratio's division by q carried into the residual; transformers#28508 (a "
            "wrong residual normalisation) is the same spot"
        ),
    },
    {
        "spec": "study_bugs8.replacement:residual_written_as_elementwise_max_of_rows",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is drawn proportionally to np.maximum(p, q) instead of np.maximum(p - q, 0), which "
            "gives mass to the rejected draft and to tokens the target never emits."
        ),
        "source": (
            "written for the study: the clamp's arguments slipped; the residual-clamp spot of vllm#2336 and "
            "transformers#28508"
        ),
    },
    # ---- bonus token ------------------------------------------------------------------------------------
    {
        "spec": "study_bugs8.bonus:bonus_from_mean_of_pass_rows",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "when every draft is accepted, the bonus is drawn from the mean of the pass's gamma + 1 rows instead "
            "of from p_gamma; rounds with a rejection are right."
        ),
        "source": (
            "written for the study: a pooled row over the verify block; sglang#40244 (state applied identically "
            "across the positions of a verify block)"
        ),
    },
    {
        "spec": "study_bugs8.bonus:bonus_inverse_cdf_on_exclusive_cumsum",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the bonus is drawn by inverse CDF against the exclusive prefix sums (0, p_0, p_0 + p_1, ...) with "
            "side='right', so the id emitted is one past the id the uniform selects (clipped at V - 1): the "
            "bonus's law is p_gamma shifted up by one id."
        ),
        "source": (
            "written for the study: an exclusive scan (as GPU prefix-sum kernels return) searched like an "
            "inclusive one; vllm#44744 (a recovered id off by the tile end) is the same kind of sampler-index "
            "slip"
        ),
    },
    {
        "spec": "study_bugs8.bonus:bonus_inserted_at_minus_one",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the bonus is added with out.insert(-1, bonus), which inserts it before the last element: a fully "
            "accepted round emits x_0 .. x_{gamma-2}, the bonus, then x_{gamma-1}; the bonus itself is drawn from"
            " p_gamma."
        ),
        "source": (
            "written for the study: Python's list.insert(-1, x) is not append; transformers#47912 (tokens of a "
            "block emitted in the wrong place) is the emission spot"
        ),
    },
    # ---- numerics ---------------------------------------------------------------------------------------
    {
        "spec": "study_bugs8.numerics:log_coin_in_base_ten_against_natural_log_ratio",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the test compares log10(u) with min(0, ln p(x) - ln q(x)), so a draft is accepted with probability "
            "min(1, r^ln(10)) (about r^2.3) instead of min(1, r); replacement and bonus are standard."
        ),
        "source": "written for the study: log-space acceptance with mismatched bases (np.log10 for np.log)",
    },
    {
        "spec": "study_bugs8.numerics:draft_prob_buffer_allocated_with_token_dtype",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the [gamma, V] draft-probability buffer is allocated with the token buffer's dtype (int64), so every"
            " q entry below 1 is truncated to 0: the ratio is infinite and every draft is accepted (the residual,"
            " p, is never reached except where q(x) = 1 and p(x) = 0)."
        ),
        "source": (
            "written for the study: np.empty(..., dtype=tokens.dtype); deepseek-ai/DeepSpec#31 (q held in another"
            " dtype than the law sampled from) is the same spot"
        ),
    },
    {
        "spec": "study_bugs8.numerics:log_of_zero_probabilities_left_at_zero",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the ratio is exp(log p(x) - log q(x)) with logs from np.log(w, out=zeros, where=w > 0), so a target "
            "probability of 0 reads as log 0 = 0 (probability 1): a draft the target never emits is accepted with"
            " probability min(1, 1 / q(x)) = 1; replacement and bonus are standard."
        ),
        "source": (
            "written for the study: np.log with where= into a zero buffer to silence log(0) warnings; "
            "sgl-project/sglang#35771 (a draft with target probability 0 accepted) is the same effect"
        ),
    },
    {
        "spec": "study_bugs8.numerics:residual_normalised_with_floor_division",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the residual is normalised with // (floor division), so every entry becomes 0 unless the residual "
            "has one token, and the empty-row fallback draws the replacement from p instead of (p - q)+ / sum."
        ),
        "source": "written for the study: // for /; transformers#28508 (residual normalisation) is the same spot",
    },
    # ---- state across rounds ----------------------------------------------------------------------------
    {
        "spec": "study_bugs8.state:target_cache_trimmed_one_too_many",
        "buggy": True,
        "flags": [],
        "family": "target_cache",
        "mechanism": (
            "after a rejection at position k the target's context cache is trimmed by gamma - k + 1 entries "
            "instead of gamma - k before the replacement is appended, so the token before the replacement "
            "(x_{k-1}, or the prefix's last token when k = 0) is lost; every later round of the request is "
            "verified (ratio, residual, bonus) against rows of that corrupted context."
        ),
        "source": (
            "lablup/mlxcel#994 (a KV rewind that trimmed too many entries, there on the drafter) and "
            "ml-explore/mlx-lm#1109 / #1423 (target cache rollback)"
        ),
    },
    {
        "spec": "study_bugs8.state:first_target_row_reused_from_previous_pass",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the row that drew the previous round's final token (the rejected position's row or the bonus row) is"
            " cached and used as row 0 of the next round of the request, instead of p(. | prefix): position 0's "
            "ratio and residual use a row one token stale."
        ),
        "source": (
            "written for the study: caching the 'next-token row' of a pass, off by one token; transformers#30042 "
            "(cache_position not advanced correctly in assisted decoding)"
        ),
    },
    {
        "spec": "study_bugs8.state:target_row_memo_keyed_by_context_tail",
        "buggy": True,
        "flags": [],
        "family": "target_cache",
        "mechanism": (
            "target rows are memoised across the rounds of a request under the last two tokens of their context, "
            "so a context whose tail was seen at an earlier position reuses that position's row (the audit's "
            "tables are position-dependent) for the ratio, residual and bonus."
        ),
        "source": (
            "huggingface/text-generation-inference#2711 (prefix caching with a wrong slot assumption) with a memo"
            " key that is only the context's tail"
        ),
    },
    # ---- parity (--logits) ------------------------------------------------------------------------------
    {
        "spec": "study_bugs8.parity:target_temperature_multiplies_logits",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_temperature",
        "mechanism": (
            "the target's temperature stage multiplies the penalised logits by T instead of dividing by T (before"
            " top-k, top-p and min-p); greedy and T = 1 rows and the drafts are right."
        ),
        "source": (
            "vllm-project/vllm-ascend#6685 (temperature misapplied on the verification path) and "
            "ohdearquant/lattice#388 (verifier softmaxes without the temperature)"
        ),
    },
    {
        "spec": "study_bugs8.parity:frequency_penalty_counts_distinct_tokens",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "the target's generated-token counts are clipped at 1, so the frequency penalty subtracts "
            "frequency_penalty once per distinct generated token instead of once per occurrence; presence and "
            "repetition penalties and the drafts are right."
        ),
        "source": (
            "vllm#18902 (frequency penalty without effect on the rejection path) and sglang#33643 (a frequency "
            "penalty acting at a fraction of its nominal size)"
        ),
    },
    {
        "spec": "study_bugs8.parity:target_min_p_mask_from_unprocessed_logits",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_min_p",
        "mechanism": (
            "the target's min-p mask removes tokens with softmax(raw logits) < min_p * its max (before the bias, "
            "the penalties, temperature, top-k and top-p) and is applied to the otherwise processed row, instead "
            "of being computed on the processed row; the drafts are right."
        ),
        "source": (
            "sgl-project/sglang#10617 (min_p not applied right with EAGLE) and sgl-project/sglang#36173 (the "
            "verifier's filter pipeline differing from the sampler's)"
        ),
    },
    # ---- correct steps ----------------------------------------------------------------------------------
    {
        "spec": "study_bugs8.correct:accept_or_target_probability_fast_path",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the fast path accepts when u < p(x), OR-ed with u < min(1, p(x) / q(x)); since q(x) <= 1, "
            "p(x) <= min(1, p(x) / q(x)), so the fast path never accepts a draft the test would reject."
        ),
        "source": (
            "written for the study: looks like alibaba/rtp-llm#1295 (an OR-ed fast path) but is implied by the test"
        ),
    },
    {
        "spec": "study_bugs8.correct:coin_rescaled_after_acceptance",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: one coin per round, recycled as u / r after each acceptance with probability r; given u < r, "
            "u / r is uniform on [0, 1) and independent of everything drawn before, and the replacement and bonus"
            " use fresh draws."
        ),
        "source": (
            "written for the study: looks like the coin reuse of vllm-ascend#16370 and flashinfer#424, but the "
            "rescaled coin is again uniform"
        ),
    },
    {
        "spec": "study_bugs8.correct:one_coin_against_running_product_of_ratios",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: one coin per round against the running products of min(1, p_i / q_i); the first k drafts "
            "survive iff u < prod_{j < k} r_j, the same probability as k independent coins passing, and the "
            "replacement and bonus use fresh draws."
        ),
        "source": (
            "written for the study: looks like one uniform per round (flashinfer#424), exact because the survival"
            " products decrease"
        ),
    },
    {
        "spec": "study_bugs8.correct:bonus_as_one_more_verified_draft",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: when every draft is accepted, one more token y is drafted from q(. | prefix + xs) and "
            "verified against p_gamma (u < min(1, p/q), else the residual (p_gamma - q)+), which emits a token "
            "distributed exactly as p_gamma."
        ),
        "source": (
            "written for the study: looks like a bonus taken from the draft (transformers#32867 class), but the "
            "extra draft is verified"
        ),
    },
    {
        "spec": "study_bugs8.correct:draft_on_window_context_reported_consistently",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the drafter sees only the last 4 tokens of its context, and the rows it samples from are the "
            "rows given to the verifier; a different proposal, but q is exactly each draft's law."
        ),
        "source": (
            "the consistent twin of rows:draft_sampled_on_window_context; lablup/mlxcel#994 (a drafter whose "
            "context lags: lower acceptance, still lossless)"
        ),
    },
    {
        "spec": "study_bugs8.correct:target_rows_memoised_by_full_context",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact (stateful, resets per request): target rows are memoised across the rounds of a request under "
            "their whole context (prefix + drafts before the position), so a reused row is a row of exactly that "
            "context."
        ),
        "source": "the correctly keyed twin of state:target_row_memo_keyed_by_context_tail",
    },
]
