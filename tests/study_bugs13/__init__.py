"""Round steps for a thirteenth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any study's results other
than the format of ``tests/study_bugs12/RESULTS.md``, without reading git log messages,
``docs/verdict.md`` or ``docs/protocol.md``, and without reading any diagnosis output (every audit
ran with ``--no-diagnosis``). Nothing was grepped across the repository.
What was read: the whole of ``tests/study_bugs12/__init__.py``, ``_common.py``, ``state.py``,
``parity.py`` and ``correct.py`` (how a step module looks), ``tests/study_bugs12/RESULTS.md`` (for its
format); ``tests/study_bugs/_util.py`` and ``tests/study_bugs10/_common.py`` (the correct helpers the
steps import); the ``"mechanism"`` sentences of ``tests/study_bugs`` to ``tests/study_bugs12``
(``grep -A6 '"mechanism"' tests/study_bugs*/__init__.py``, only to avoid duplicating them; the grep
also showed, in passing, parts of the ``source`` strings and a few docstring lines that mention
``"mechanism"``); ``docs/examples/round_step.py`` and ``docs/examples/round_step_logits.py`` (the two
signatures); the whole of ``specverify/dists/_processing.py`` and ``specverify/dists/_settings.py``
and ``validate_logits`` in ``specverify/dists/_validate.py`` (the settings pipeline, for the
``--logits`` steps); ``specverify audit --help``; the research notes
``/work/shared/research/real-bugs-2024-2026.md`` (whole) and ``/work/shared/research/engines-and-bugs.md``
(its lines citing a tracker reference, ``grep '#[0-9]'``). The trackers cited in ``source`` come from
those notes (no issue thread was opened for this set). Seen in passing, not opened: the file names
under ``tests/`` and ``tests/study_bugs12/`` (directory listings), the output of ``git status
--short`` (this set, and the name of one modified file of another session), the commit id, the
machine's core count and load (for RESULTS.md). Before the audits every step was run on a toy pair
of hashed tables outside specverify (a smoke test for crashes, with stateful steps run over several
requests; not an audit), the staged settings pipeline of ``_common`` was compared with
``process_logits`` on random logits, and the rows of the two exact ``--logits`` steps with the
library's processed rows (equal to rounding); ruff (check and format) was run on this set's files
only.

Thirty buggy speculative-decoding round steps, each one mistake modelled on a real report (tracker
reference) or written for the study with the reason it is plausible, chosen to differ from the
mechanisms of ``tests/study_bugs`` to ``tests/study_bugs12``, and six exact round steps written in
unusual ways that look like bugs (a residual written as max(p, q) - q, a round cut after an emitted
EOS, a bonus carried into the next round as a one-hot draft, temperature applied before the
penalties with the additive ones scaled, a min-p mask taken before top-k and top-p, a coin stream
whose offset skips the bonus's uniform; two are twins of buggy steps replaced below). ``STUDY``
lists them; the ``family`` labels are the writer's own and ``mechanism`` says exactly what each step
does wrong (or why it is exact). Every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

one at a time, and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util``,
``study_bugs10._common`` and this set's ``_common`` (correct building blocks; its staged pipeline
equals ``process_logits`` with every stage at its default); every mistake lives in its step, on the
line marked ``# BUG:``. The audit's stop unit makes the last id heavy, so the steps that treat a
special token take the last id as EOS. Stateful steps (``counting.py``'s accept buffer,
``state.py``, and two exact steps of ``correct.py``) are module-level objects whose ``__call__`` is
the step; they treat a round whose prefix does not continue the previous round's output as the
start of a new request, and keep state of one request at most.
Seven buggy steps passed the audit (their effect on the audit's model pairs was below its
resolution, a TV of about 0.1 per unit) and were replaced by the steps now in STUDY: six of the
first draft, ``acceptance:coins_antithetic_pairs`` (position 2k + 1 tested with 1 - u of position
2k), replaced by ``acceptance:eos_draft_kept_only_as_target_argmax`` (a drafted EOS kept only when
it is the target's argmax, else rejected without its coin), which passed as well and was replaced
by ``acceptance:ratio_against_target_row_mixed_with_draft_row``;
``counting:stop_token_stripped_from_round_output`` (a final EOS dropped from a round's output) by
``parity:target_repetition_skips_ids_drafted_this_round``;
``replacement:residual_taken_twice_for_padded_candidate_slot`` (the replacement drawn from
((p - q)+ / Z - q)+) by ``replacement:residual_subtracts_sparse_draft_row_at_leading_ids``;
``bonus:bonus_row_keeps_min_tokens_eos_mask`` (EOS banned on the bonus row while the sequence is
shorter than 32 tokens) by ``bonus:bonus_row_sampled_without_penalties``;
``bonus:bonus_uniform_recycled_from_unclamped_ratio`` (the bonus's inverse-CDF uniform u / (p(x) /
q(x)) of the last coin, the min(1, .) lost) by ``parity:target_penalties_over_fixed_recent_window``;
and ``state:coin_offset_advances_by_gamma_bonus_coin_reused`` (a request's coin stream advanced by
gamma, so a bonus's uniform is the next round's first coin) by
``state:target_cache_trimmed_one_too_few_after_rejection``. Their code was removed; RESULTS.md lists
them with their verdicts. The exact steps ``correct:round_cut_after_emitted_stop_id`` and
``correct:coin_offset_advances_past_bonus_coin`` are the twins of the second and the last of them.
Of the audits' output only the verdict lines (which units PASS or FAIL, and the line naming the
first failing test) and the exit codes were looked at; with ``--no-diagnosis`` they carry no
diagnosis.
"""

_NOTES = "research notes (/work/shared/research/engines-and-bugs.md)"

STUDY = [
    # ---- rows ----------------------------------------------------------------------------------
    {
        "spec": "study_bugs13.rows:verify_rows_read_in_strided_layout",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the pass's gamma + 1 rows are gathered with the index of a two-way interleaved layout (even "
        "slots first, then odd: 0, 2, 4, 1, 3 for gamma = 4) although the pass returns them in position order: "
        "position 0 is right, position i >= 1 (the bonus included) is verified (ratio, residual, bonus) "
        "against the row of another prefix of the drafts.",
        "source": "HabanaAI/vllm-fork#1780 (batch-expansion ordering of rows wrong) and vllm-project/vllm#41768 "
        "(row misalignment on the speculative path); written for the study as a strided gather",
    },
    {
        "spec": "study_bugs13.rows:draft_row_special_ids_not_remapped",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "the drafter's vocabulary has the first and the last id swapped with respect to the target's; "
        "each draft is drawn in the drafter's ids and mapped to the target's, but the reported row is left in "
        "the drafter's order: the ratio and the residual read q(0) where q(V - 1) is meant and the reverse.",
        "source": "huggingface/transformers#46124 (assisted generation across tokenizers: special tokens "
        "handled differently on the two sides); written for the study as an id map applied to the drafts "
        "and not to the reported rows",
    },
    {
        "spec": "study_bugs13.rows:drafter_mixes_uniform_exploration",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "each draft is drawn from 0.7 q_i + 0.3 / V (a uniform exploration share) while the plain row "
        "q_i is reported as its law (ratio and residual).",
        "source": "huggingface/transformers#47932 / #47961 (drafts sampled from another law than the q "
        "returned); written for the study as epsilon exploration in the drafter",
    },
    {
        "spec": "study_bugs13.rows:target_attention_reset_after_eos",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the target's attention restarts at each EOS (the last id), as packed-sequence document "
        "masking does: its context is the prefix from its last EOS on, so once a request has emitted an EOS "
        "every target row (ratio, residual, bonus) conditions on a shorter context at another position; the "
        "drafter sees the whole prefix.",
        "source": "written for the study: document masking of packed training sequences reused at inference; "
        "huggingface/transformers#47912 (EOS handling inside a speculative block) is the EOS spot",
    },
    # ---- acceptance ----------------------------------------------------------------------------
    {
        "spec": "study_bugs13.acceptance:ratio_gathered_at_index_clamped_below_vocab",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "the test's gather index is clamped to [0, V - 2]: a drafted last id (EOS) is accepted with "
        "min(1, p(V - 2) / q(V - 2)) instead of its own ratio; other ids, the residual and the bonus are "
        "standard.",
        "source": "vllm-project/vllm#44744 (GHSA-8wr5-jm2h-8r4f: ids at the vocabulary's edge mishandled in the "
        "rejection kernel); written for the study as a clamp bound one id short",
    },
    {
        "spec": "study_bugs13.acceptance:ratio_looked_up_in_dict_keyed_by_token",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "the block's (p_i(x_i), q_i(x_i)) pairs are stored in a dict keyed by the drafted id, so a "
        "draft whose id recurs later in the block is tested with the later position's p and q; the residual "
        "and the bonus use the right rows.",
        "source": "written for the study: a dict keyed by token where a per-position array was meant; "
        "vllm-project/vllm#51812 (values gathered with the wrong indices) is the class",
    },
    {
        "spec": "study_bugs13.acceptance:ratio_against_target_row_mixed_with_draft_row",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": "a relaxed test: a draft is accepted with min(1, p'(x) / q(x)), p' = (p + q) / 2 (the target's "
        "row mixed with the drafter's), i.e. 1/2 + p(x) / (2 q(x)) when p(x) < q(x), instead of min(1, p(x) / "
        "q(x)); the replacement (p - q)+ and the bonus are standard.",
        "source": "NVIDIA/TensorRT-LLM's lossy relaxed acceptance for MTP (" + _NOTES + ", the "
        "use_relaxed_acceptance_for_thinking path) left on an exact path; written for the study as a soft "
        "target row",
    },
    # ---- counting ------------------------------------------------------------------------------
    {
        "spec": "study_bugs13.counting:kept_tokens_read_from_greedy_buffer",
        "buggy": True,
        "flags": [],
        "family": "tokens_emitted",
        "mechanism": "the drafter returns its sampled tokens and the argmax of each row; the round emits the n kept "
        "positions from the argmax list (argmax q_i instead of x_i), then the right final token (residual "
        "draw at n or bonus, computed from the sampled drafts).",
        "source": "huggingface/transformers#32867 (greedy and sampled drafter outputs mixed up); written for the "
        "study as the wrong token list sliced",
    },
    {
        "spec": "study_bugs13.counting:accept_buffer_not_cleared_between_rounds",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": "stateful: the accept flags live in a [gamma] buffer zeroed only when a request starts; the "
        "verify loop writes True on an acceptance and breaks on a rejection without writing False, and n is "
        "the cumulative product of the whole buffer: an entry left True by an earlier round extends n past the "
        "first rejection (rejected drafts kept, the final token drawn at that later position).",
        "source": "vllm-project/vllm#46899 (stale placeholders from an earlier step fed back) and "
        "flashinfer-ai/flashinfer#879 / #3551 (accept buffers read past the valid entries); written for the "
        "study as a reused numpy buffer",
    },
    # ---- replacement ---------------------------------------------------------------------------
    {
        "spec": "study_bugs13.replacement:residual_subtracts_draft_logprobs",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the residual subtracts the drafter's log-probabilities (floored at log 1e-12) instead of its "
        "probabilities: the replacement is drawn from (p - log q)+ = p + |log q|, heaviest where the drafter "
        "gave least mass, instead of (p - q)+. Test and bonus are standard.",
        "source": "vllm-project/vllm-ascend#6685 (probabilities kept where logits were expected); written for the "
        "study as draft logprobs passed where probabilities were meant",
    },
    {
        "spec": "study_bugs13.replacement:residual_subtracts_sparse_draft_row_at_leading_ids",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the drafter exports each row as its 16 most likely (id, probability) pairs; the test reads "
        "q(x) from the dense row, but the residual densifies the sparse row with dense[:16] = probs (the largest "
        "probabilities on ids 0 .. 15) instead of dense[ids] = probs, and the replacement is drawn from "
        "(p - dense)+. Bonus standard.",
        "source": "ggml-org/llama.cpp examples/speculative (" + _NOTES + " B32: the residual subtracts "
        "index-aligned entries of two candidate lists); written for the study as a sparse row densified at the "
        "wrong ids",
    },
    {
        "spec": "study_bugs13.replacement:replacement_race_reduced_within_first_nonempty_tile",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is the exponential race argmax((p - q)+ / E) computed per tile of 16 ids, and "
        "the tiles' winners are never compared: the winner of the lowest tile holding residual mass is emitted. "
        "Test and bonus are standard.",
        "source": "vllm-project/vllm#44744 (tile handling in the recovered-token Triton kernel) and "
        "flashinfer-ai/flashinfer#424 (a block reduction not combined); written for the study",
    },
    # ---- bonus ---------------------------------------------------------------------------------
    {
        "spec": "study_bugs13.bonus:bonus_from_target_draft_mixture",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": "after a full acceptance the bonus is drawn from (p_gamma + q_gamma) / 2, q_gamma = q(. | "
        "prefix + xs) the drafter's next row (an 'ensemble' bonus), instead of from p_gamma. Verified positions "
        "are standard.",
        "source": "written for the study: an ensemble of the two models' next rows on the bonus path; "
        "huggingface/transformers#32867 (the drafter's law leaking into emitted tokens) is the class",
    },
    {
        "spec": "study_bugs13.bonus:bonus_row_sampled_without_penalties",
        "buggy": True,
        "flags": ["--logits"],
        "family": "bonus",
        "mechanism": "the verified rows get the request's whole pipeline, but the bonus row is processed without "
        "the repetition, presence and frequency penalties (bias, temperature and filters applied), as a plain "
        "sampler would; the drafts are right.",
        "source": "vllm-project/vllm#42744 / #42802 (processors applied differently to verified positions and the "
        "bonus) and NVIDIA/TensorRT-LLM#17701 (penalties ignored on the speculative path), here on the bonus "
        "row only",
    },
    # ---- numerics ------------------------------------------------------------------------------
    {
        "spec": "study_bugs13.numerics:draft_rows_normalised_with_l2_default",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the draft rows are renormalised with a normalize helper whose default is the L2 norm: the "
        "verifier gets q / ||q||_2 >= q, so the ratio is p(x) ||q||_2 / q(x) (too few acceptances) and the "
        "residual (p - q / ||q||_2)+; the drafts are drawn from q.",
        "source": "written for the study: sklearn.preprocessing.normalize (norm='l2' by default) used on "
        "probability rows; deepseek-ai/DeepSpec#31 (q not the law the draft was sampled from) is the class",
    },
    {
        "spec": "study_bugs13.numerics:target_softmax_denominator_untempered",
        "buggy": True,
        "flags": ["--logits"],
        "family": "numerics",
        "mechanism": "the verifier's softmax divides exp(y), y the processed (tempered, filtered) logits, by the sum "
        "of exp(T y), the normaliser before temperature: at T != 1 the target's rows do not sum to 1 (ratio and "
        "residual use them so; the bonus sampler renormalises). Greedy and T = 1 rows and the drafts are right.",
        "source": "ohdearquant/lattice#388 (temperature missing in the verifier's softmax) and "
        "vllm-project/vllm-ascend#6685 (temperature misapplied on the verification path); written for the "
        "study as the temperature dropped from the normaliser only",
    },
    {
        "spec": "study_bugs13.numerics:target_filter_mask_applied_after_normalisation",
        "buggy": True,
        "flags": ["--logits"],
        "family": "numerics",
        "mechanism": "the verifier normalises the target's row after bias, penalties and temperature and then zeroes "
        "the tokens top-k, top-p and min-p remove, without renormalising: the rows sum to the kept mass (ratio "
        "and residual use them so; the bonus sampler renormalises). Rows without a filter, greedy rows and the "
        "drafts are right.",
        "source": "sgl-project/sglang#36173 (the verifier's filtering differs from the sampler's: "
        "top_k_renorm / top_p_renorm), here with the renormalisation left out",
    },
    # ---- parity (--logits) ---------------------------------------------------------------------
    {
        "spec": "study_bugs13.parity:target_presence_mapped_to_multiplicative_penalty",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier maps the presence penalty to a repetition-style factor 1 + presence over the "
        "generated tokens (logit / (1 + presence) when positive, * (1 + presence) when negative) instead of "
        "logit - presence; frequency and repetition penalties, the rest of the pipeline and the drafts are "
        "right.",
        "source": "NVIDIA/TensorRT-LLM#17701 (presence / frequency penalties mishandled on the one-model "
        "speculative path); written for the study as a backend with multiplicative penalties only "
        "(transformers has no additive ones)",
    },
    {
        "spec": "study_bugs13.parity:target_repetition_penalty_on_probabilities",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier divides the seen tokens' probabilities (of the biased logits) by the repetition "
        "penalty and renormalises, i.e. logit - log r for every seen token instead of logit / r (positive) or "
        "logit * r (negative); the other knobs and the drafts are right.",
        "source": "sgl-project/sglang#21258 (a multiplicative repetition penalty applied to the wrong tensor on a "
        "speculative path); written for the study as the penalty applied in probability space",
    },
    {
        "spec": "study_bugs13.parity:target_counts_left_padded_to_vocab",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier's penalty counts come from np.bincount without minlength and are padded to V on "
        "the left instead of the right: each count lands V - 1 - (largest id in the history) ids higher, so "
        "the repetition, presence and frequency penalties hit other tokens (right when the history holds the "
        "last id); the drafts are right.",
        "source": "sgl-project/sglang#33643 (penalty counts fed wrongly on the speculative path); written for the "
        "study as np.pad on the wrong side",
    },
    {
        "spec": "study_bugs13.parity:target_repetition_penalty_compounds_along_block",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier's penalty scale is multiplied in place by the repetition penalty at each "
        "position of the verify block, so row i applies r ** (i + 1) to its seen tokens instead of r (row 0 "
        "right, the bonus row r ** (gamma + 1)); the other knobs and the drafts are right.",
        "source": "sgl-project/sglang#40244 (penalty state across the positions of a verify block) and "
        "osaurus-ai/vmlx-swift#357 (penalty state shared and updated by every position)",
    },
    {
        "spec": "study_bugs13.parity:residual_uses_unprocessed_draft_row",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_draft_rows",
        "mechanism": "drafts are drawn from the drafter's processed law q_i and the test uses it, but the residual "
        "subtracts softmax of the drafter's raw logits (no bias, penalties, temperature or filters): the "
        "replacement is drawn from (p - softmax(raw))+ instead of (p - q)+; the target's rows and the bonus "
        "are right.",
        "source": "huggingface/transformers#47932 (raw logits returned as q while sampling from processed ones), "
        "here on the residual path only",
    },
    {
        "spec": "study_bugs13.parity:target_additive_penalties_count_prompt_not_output",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier slices the history that presence and frequency penalties count as "
        "history[:prompt_len] (the prompt) instead of history[prompt_len:] (the generated tokens); the "
        "repetition penalty, the rest of the pipeline and the drafts are right.",
        "source": "vllm-project/vllm#18902 (frequency penalty wrong on the speculative path); written for the "
        "study as an inverted slice",
    },
    {
        "spec": "study_bugs13.parity:target_min_p_relative_to_runner_up",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_min_p",
        "mechanism": "the verifier's min-p threshold is min_p times the second largest probability (sorted[-2]) "
        "instead of the largest, so fewer tokens are removed; bias, penalties, temperature, top-k, top-p and the "
        "drafts are right.",
        "source": "sgl-project/sglang#10617 (min_p not applied right with EAGLE); written for the study as an "
        "index slip",
    },
    {
        "spec": "study_bugs13.parity:target_repetition_skips_ids_drafted_this_round",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier removes the ids drafted in this round from every row's repetition-penalty set "
        "(to avoid counting the block's drafts twice): a drafted id is not penalised on any target row of the "
        "round even when the prompt or earlier output holds it; presence and frequency penalties, the rest of "
        "the pipeline and the drafts are right.",
        "source": "vllm-project/vllm#33251 (" + _NOTES + " B13: a spec-penalties kernel double-counted a "
        "token), here a de-duplication that removes too much",
    },
    {
        "spec": "study_bugs13.parity:target_penalties_over_fixed_recent_window",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": "the verifier keeps its penalty histories in a ring buffer of the last 16 tokens: repetition, "
        "presence and frequency penalties on the target's rows count only the last 16 tokens of their histories "
        "while the request counts them all (settings with a penalty window are processed as the request says); "
        "the drafts are right.",
        "source": "llama.cpp's repeat_last_n window convention (" + _NOTES + ") on the verifier only; "
        "NVIDIA/TensorRT-LLM#17701 (penalties mishandled on the speculative path)",
    },
    # ---- state across the rounds of a request --------------------------------------------------
    {
        "spec": "study_bugs13.state:penalty_counts_decremented_for_rejected_drafts",
        "buggy": True,
        "flags": ["--logits"],
        "family": "request_state",
        "mechanism": "stateful: the request's penalty counts (seen and generated) are count vectors kept across its "
        "rounds and shared by drafter and verifier (row i adds xs[:i]; the emitted tokens are added after the "
        "round); after a rejection the rollback also subtracts the rejected drafts, which were never added, so "
        "their counts go negative: later rows lose the repetition and presence penalties on them and get a "
        "frequency bonus.",
        "source": "ml-explore/mlx-lm#1175 (prev_tokens not rolled back on rejection) and osaurus-ai/vmlx-swift#357 "
        "(penalty state recording drafts), here a rollback of entries never recorded",
    },
    {
        "spec": "study_bugs13.state:target_cache_trimmed_one_too_few_after_rejection",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: the target's context is a per-request cache to which the pass appends the drafts; "
        "after a rejection at n it removes gamma - n - 1 entries instead of gamma - n, so the rejected draft "
        "x_n stays before the replacement, and every later target row of the request conditions on it; the "
        "drafter sees the true prefix.",
        "source": "ml-explore/mlx-lm#1109 (rejected drafts left in the cache) and lablup/mlxcel#994 / #1002 (a "
        "rewind off by a count), here one entry too few on the target's cache",
    },
    {
        "spec": "study_bugs13.state:target_prefix_block_registered_with_draft_tokens",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: the target's prefix cache holds blocks of 4 tokens keyed by their index in the "
        "request, not by content; a block is registered when the verification pass fills it, drafts included, "
        "and then served for that index: a block registered with drafts later rejected puts them into every "
        "later target row's context in place of the emitted tokens; the drafter sees the true prefix.",
        "source": "huggingface/text-generation-inference#2711 (prefix caching with speculation writing wrong slots) "
        "and ml-explore/mlx-lm#1423 (stale keys from rejected drafts)",
    },
    {
        "spec": "study_bugs13.state:row_memo_shared_by_draft_and_target",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": "stateful: a per-request memo of next-token rows keyed by the context alone serves both the "
        "drafter and the target: the drafter fills it for prefix + xs[:i], so the verifier reads the drafter's "
        "rows as p_i (every draft accepted) and only the bonus row is the target's.",
        "source": "written for the study: a cache keyed without the model; vllm-project/vllm#35461 (cached draft "
        "logits, " + _NOTES + ") is the cache spot",
    },
    # ---- correct, unusual ----------------------------------------------------------------------
    {
        "spec": "study_bugs13.correct:residual_as_maximum_minus_draft",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the replacement is drawn from np.maximum(p, q) - q, which equals (p - q)+.",
        "source": "written for the study: the exact twin of an earlier set's residual np.maximum(p, q)",
    },
    {
        "spec": "study_bugs13.correct:round_cut_after_emitted_stop_id",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: a round's output is cut right after its first EOS (the last id), kept; the cut depends "
        "only on emitted tokens and the next round draws the next position from the same law.",
        "source": "written for the study: the twin of counting:stop_token_stripped_from_round_output (a buggy step "
        "that passed the audit and was replaced)",
    },
    {
        "spec": "study_bugs13.correct:bonus_carried_as_one_hot_draft_into_next_round",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact (stateful, resets per request): a fully accepted round ends with its drafts; its bonus "
        "b ~ p_gamma is proposed as the next round's first draft with a one-hot row, so it is accepted with "
        "probability p(b) and otherwise replaced from p without b: the token there follows p.",
        "source": "written for the study: looks like a lost bonus and a draft with a fake q (the one-hot path of "
        "vllm-project/vllm#40149 is lossless)",
    },
    {
        "spec": "study_bugs13.correct:target_temperature_first_with_penalties_scaled",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": "exact: the verifier divides the biased logits by T first, then applies the repetition penalty "
        "(its sign rule commutes with a positive scaling) and subtracts the presence and frequency penalties "
        "divided by T, then the filters at temperature 1: (rep(z + b) - a) / T in another order (greedy and "
        "temperature-last settings take the library's pipeline).",
        "source": "written for the study: looks like penalties applied after temperature and scaled by it",
    },
    {
        "spec": "study_bugs13.correct:target_min_p_mask_taken_before_top_k_top_p",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": "exact: the verifier's min-p mask is computed on the row before top-k and top-p and applied "
        "after them; min-p compares each probability with the largest, a ratio renormalisation does not change, "
        "and top-k and top-p keep the largest token (and the min_tokens_to_keep most likely).",
        "source": "written for the study: looks like an earlier set's min-p computed at the wrong stage",
    },
    {
        "spec": "study_bugs13.correct:coin_offset_advances_past_bonus_coin",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact (stateful, resets per request): the round's uniforms come from one request stream read at "
        "an offset (coins at off .. off + gamma - 1, the bonus's inverse-CDF uniform at off + gamma) advanced by "
        "gamma + 1 every round, so no uniform is read twice.",
        "source": "written for the study: the twin of state:coin_offset_advances_by_gamma_bonus_coin_reused (a "
        "buggy step that passed the audit and was replaced); RNG offsets as in vllm-project/vllm-ascend#13608",
    },
]
