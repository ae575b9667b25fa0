"""Round steps for a sixth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any earlier study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages, without reading the
diagnosis sections of ``docs/verdict.md``, and without reading any diagnosis output (every audit ran
with ``--no-diagnosis``). What was read: ``tests/study_bugs/_util.py`` (the correct helpers the
steps use), the module docstring of ``tests/study_bugs5/__init__.py`` and the format of its STUDY
entries (more entries than the two or three needed were skimmed, which only helped to avoid their
mechanisms), the head of ``tests/study_bugs5/rows.py``, the function and class names only of the
earlier sets (to avoid their mechanisms), ``docs/adapters.md`` and ``docs/examples/round_step_logits.py``
(the ``--logits`` signature), ``specverify/dists`` (the processing pipeline, for the ``--logits``
steps), the plan's settings grid (``specverify/audit/pipeline/plan.py``), and the research notes
(``/work/shared/research/real-bugs-2024-2026.md``). ``exact_checks.py`` was not opened; the
stateful steps reset per request as study_bugs5's docstring says.

Buggy speculative-decoding round steps, each one mistake modelled on a real report from the research
notes (tracker reference) or written for the study with the reason it is plausible, chosen to differ
from the mechanisms of ``tests/study_bugs`` to ``tests/study_bugs5``, and exact round steps written
in unusual ways, several of which look like bugs. ``STUDY`` lists them; the ``family`` labels are the
writer's own. Every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util`` and
``study_bugs6._common`` (correct building blocks); every mistake lives in its step, on the line marked
``# BUG:``. Stateful steps (``state.py``, one in ``correct.py``) are module-level objects whose
``__call__`` is the step; they reset when a round's prefix does not continue the previous round's
output (a new request).
"""

STUDY = [
    # ---- target and draft rows ---------------------------------------------------------------
    {
        "spec": "study_bugs6.rows:target_block_rows_reversed",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "the verification pass's rows are reversed before use: position i is verified against p(. | prefix + xs[:gamma - i]) and the bonus is drawn from p(. | prefix) (row 0); drafts and draft rows are right.",
        "source": "written for the study: an output layout assumed to be last-position-first (a flip of rows that were already in order)",
    },
    {
        "spec": "study_bugs6.rows:target_vocab_shifted_by_one",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": "every target row is rolled by one id along the vocabulary (p'(v) = p(v - 1), p'(0) = p(V - 1)) and used for the ratio, the residual and the bonus; draft rows are right.",
        "source": "written for the study: a reserved/padded vocabulary offset applied to a head without one, next to vllm#44744 (vocabulary size not a multiple of the tile: recovered ids out of range)",
    },
    {
        "spec": "study_bugs6.rows:verify_context_holds_draft_argmax",
        "buggy": True,
        "flags": [],
        "family": "target_context",
        "mechanism": "drafts are sampled from q but the verification pass is fed the argmax of each draft row: target row j is p(. | prefix + a[:j]) with a_k = argmax q_k instead of p(. | prefix + xs[:j]) (row 0 right); ratio, residual and bonus use these rows.",
        "source": "transformers#32867 / PR #33534 and transformers#47932 (the assistant's greedy token buffer and its sampled tokens mixed up); vllm#46899 (the wrong token buffer fed to verification)",
    },
    {
        "spec": "study_bugs6.rows:q0_row_taken_from_target_pass",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "x_0 is sampled from the draft row q_0 but the verifier uses the target's row p_0 as q_0: x_0 is accepted whenever p_0(x_0) > 0 (ratio 1) and otherwise replaced from p_0 (empty residual fallback), so the first token follows q_0 restricted to p_0's support; later positions are standard.",
        "source": "written for the study: self-speculation / MTP code that reuses the model's own first row as the draft row (the q-provenance class of transformers#47932)",
    },
    # ---- acceptance test ---------------------------------------------------------------------
    {
        "spec": "study_bugs6.acceptance:additive_acceptance_one_plus_p_minus_q",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted with probability min(1, 1 + p(x) - q(x)) = 1 - (q(x) - p(x))+ (a linearised ratio) instead of min(1, p(x)/q(x)); replacement from (p - q)+ and bonus are standard.",
        "source": "written for the study: the first-order approximation exp(log p - log q) ~ 1 + p - q taken for the ratio",
    },
    {
        "spec": "study_bugs6.acceptance:ratio_branch_forgets_division",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "min(1, p/q) written as a branch whose second arm lacks the division: accepted surely when p(x) >= q(x), otherwise with probability p(x) instead of p(x)/q(x) (too few acceptances); replacement and bonus standard.",
        "source": "written for the study: a hand-expanded min() with one arm mistyped",
    },
    {
        "spec": "study_bugs6.acceptance:acceptance_floor_for_supported_drafts",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft with p(x) > 0 is accepted with probability max(min(1, p(x)/q(x)), 0.3) (a floor on the acceptance probability), one with p(x) = 0 is rejected; replacement from (p - q)+ and bonus standard.",
        "source": "written for the study: a 'lenient acceptance' knob of the typical-acceptance kind (engines notes: relaxed acceptance modes) wired into the exact path",
    },
    {
        "spec": "study_bugs6.acceptance:textbook_rejection_constant",
        "buggy": True,
        "flags": [],
        "family": "acceptance_form",
        "mechanism": "a draft is accepted with probability (p(x)/q(x)) / M with M = max over q(v) > 0 of p(v)/q(v) (textbook rejection sampling's envelope constant) instead of min(1, p(x)/q(x)); on rejection the replacement is drawn from (p - q)+; bonus standard.",
        "source": "written for the study: speculative sampling confused with classic rejection sampling (accept with p / (M q))",
    },
    # ---- accepted count and the emitted tokens -----------------------------------------------
    {
        "spec": "study_bugs6.counting:kept_slice_negative_index",
        "buggy": True,
        "flags": [],
        "family": "accept_count",
        "mechanism": "the kept drafts are xs[:n - gamma]: right after a rejection (n < gamma), but on a full acceptance xs[:0] is empty and the round emits only the bonus drawn from p_gamma = p(. | prefix + xs), whose drafts are not emitted.",
        "source": "written for the study: a negative slice meant to drop the rejected tail, which is empty when nothing is rejected",
    },
    {
        "spec": "study_bugs6.counting:coins_sorted_before_test",
        "buggy": True,
        "flags": [],
        "family": "acceptance_coins",
        "mechanism": "the gamma acceptance coins are drawn at once and sorted ascending: position i is tested with the i-th order statistic of gamma uniforms (small coins early, large late) instead of an independent uniform; replacement and bonus standard.",
        "source": "written for the study: the sorted-uniforms trick of batched inverse-CDF sampling misapplied to the acceptance coins",
    },
    {
        "spec": "study_bugs6.counting:replacement_matching_next_draft_continues",
        "buggy": True,
        "flags": [],
        "family": "verification_stops",
        "mechanism": "after a rejection at i whose replacement r equals x_{i+1}, the round does not stop: it skips x_{i+1} (r stands for it) and keeps verifying x_{i+2}, ... (and the bonus) against rows conditioned on xs (x_i and x_{i+1} in context) while the emitted context is xs[:i] + [r]; otherwise standard.",
        "source": "written for the study: a 'draft recovery' shortcut that resynchronises the draft after a replacement, in the spirit of recycled-draft heuristics (vllm#46899: stale tokens fed back)",
    },
    # ---- replacement law ---------------------------------------------------------------------
    {
        "spec": "study_bugs6.replacement:residual_scaled_by_acceptance_prob",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from (p - a q)+ with a = min(1, p(x)/q(x)) the rejected draft's acceptance probability, instead of (p - q)+ (p when empty).",
        "source": "written for the study: the rejection probability conflated with the weight of the draft row in the residual",
    },
    {
        "spec": "study_bugs6.replacement:residual_against_block_mean_draft_row",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "after a rejection at i the replacement is drawn from (p_i - qbar)+ with qbar the mean of the block's gamma draft rows, instead of (p_i - q_i)+; exact only for gamma = 1.",
        "source": "written for the study: a block-level 'draft distribution' reused for the residual (vllm-ascend#7807 / #7808: block verification with an unadjusted residual)",
    },
    {
        "spec": "study_bugs6.replacement:replacement_resampled_from_p_until_not_draft",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is resampled from p_i until it differs from the rejected draft: law p_i(v) 1[v != x_i] / (1 - p_i(x_i)) instead of (p_i - q_i)+ normalised.",
        "source": "written for the study: the common misreading 'on rejection, sample the target again but not the rejected token'",
    },
    {
        "spec": "study_bugs6.replacement:residual_truncated_to_top3",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": "the replacement is drawn from (p_i - q_i)+ restricted to its 3 largest entries (renormalised); the residual's remaining support is never produced.",
        "source": "written for the study: a top-k sampling kernel reused for the recovered token (vLLM's apply_top_k_top_p beside the recovered-token kernels, engines notes)",
    },
    # ---- bonus -------------------------------------------------------------------------------
    {
        "spec": "study_bugs6.bonus:bonus_best_of_two_draws",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "after a full acceptance two candidates are drawn from p_gamma and the one with the larger p_gamma (the first on a tie) is emitted: P(v) = p(v) (p(v) + 2 P_{B ~ p}(p(B) < p(v))) for distinct probabilities, a sharpened p_gamma; verified positions are standard.",
        "source": "written for the study: a best-of-n 'quality' heuristic on the free token only; replaces two first versions (no-repeat guards removing the last draft, then the last 8 tokens, from p_gamma) that the audit passed at eps 0.1",
    },
    {
        "spec": "study_bugs6.bonus:bonus_smoothed_with_uniform",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "the bonus is drawn from 0.8 p_gamma + 0.2 / V (uniform smoothing) instead of p_gamma; verified positions are standard.",
        "source": "written for the study: an epsilon-smoothing meant for the drafter applied on the target's bonus sampler",
    },
    {
        "spec": "study_bugs6.bonus:bonus_ensembled_with_draft_row",
        "buggy": True,
        "flags": [],
        "family": "bonus_law",
        "mechanism": "after a full acceptance the bonus is drawn from p_gamma * q_gamma normalised (q_gamma = draft(prefix + xs), a product of the two models' rows; p_gamma when the product is 0) instead of p_gamma; verified positions are standard.",
        "source": "written for the study: draft/target ensembling (product of experts) applied to the free token; replaces a first version (the bonus b ~ p_gamma pushed through the acceptance test against q_gamma) that the audit passed at eps 0.1",
    },
    # ---- numerics ----------------------------------------------------------------------------
    {
        "spec": "study_bugs6.numerics:rows_rounded_to_two_decimals",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "drafts are sampled from the true draft rows, but ratio, residual and bonus use draft and target rows rounded to two decimals (entries below 0.005 become 0; a draft with rounded q = 0 is accepted, rounded p = 0 rejected).",
        "source": "written for the study: probabilities serialised with round(p, 2) between the drafter/target service and the verifier (llama.cpp#27972: reported probabilities wrong with speculation on)",
    },
    {
        "spec": "study_bugs6.numerics:residual_normalised_by_l2_norm",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the residual is divided by its L2 norm instead of its sum and sampled by inverse CDF against u in [0, 1): the cumulative weights exceed 1, so the replacement is biased to low ids (ids whose cumulative value before them is >= 1 are never drawn).",
        "source": "written for the study: np.linalg.norm used as the normaliser (F.normalize's default p = 2 instead of p = 1)",
    },
    {
        "spec": "study_bugs6.numerics:coin_from_normal_not_uniform",
        "buggy": True,
        "flags": [],
        "family": "acceptance_coins",
        "mechanism": "the acceptance coin is a standard normal Z: a draft is accepted with probability Phi(min(1, p/q)) (between 0.5 and 0.84) instead of min(1, p/q); replacement and bonus standard.",
        "source": "written for the study: torch.randn_like typed for torch.rand_like",
    },
    {
        "spec": "study_bugs6.numerics:probs_treated_as_logprobs_in_ratio",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": "the ratio is computed as exp(p(x) - q(x)) on probabilities (a log-prob code path fed probabilities): accepted with probability min(1, exp(p(x) - q(x))), near 1 for every draft; replacement and bonus standard.",
        "source": "written for the study: vllm-ascend#6685 (the plugin kept probabilities when upstream moved to logits) and vllm#30846 (logprobs vs modified logits): units mixed between log and linear",
    },
    # ---- state across rounds -----------------------------------------------------------------
    {
        "spec": "study_bugs6.state:target_cache_drops_bonus",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "the target's context is a cache advanced by the kept drafts plus the replacement after a rejection, but by the drafts only after a full acceptance: every later pass of the request lacks each earlier bonus token (row j = p(. | committed tokens minus the bonuses + xs[:j])); drafts use the true prefix.",
        "source": "written for the study from KV-cache bookkeeping (mlx-lm#846 / #1109: the cache does not hold what is assumed; vllm#52071: a computed-token field not updated)",
    },
    {
        "spec": "study_bugs6.state:committed_length_advanced_without_final_token",
        "buggy": True,
        "flags": [],
        "family": "state_across_rounds",
        "mechanism": "the target's context is prefix[:pos] with pos advanced by the kept drafts only (len(out) - 1) per round: after k rounds of a request the target misses the last k committed tokens (the context is truncated from the end); the first round is right.",
        "source": "written for the study: a num-computed-tokens counter that forgets the sampled token (vllm#52071, vllm#53488)",
    },
    {
        "spec": "study_bugs6.state:prefetched_first_draft_with_fresh_row",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": "from the second round of a request x_0 is prefetched from the stale draft row q(. | prefix without its last token) but the verifier is given the fresh row q(. | prefix) as q_0: the first ratio and residual use a row the draft was not drawn from.",
        "source": "written for the study: overlapped/asynchronous drafting that proposes before the final token is known (engines notes: async scheduling; vllm#52071) with q recomputed afterwards",
    },
    {
        "spec": "study_bugs6.state:adaptive_sharpening_reports_raw_q",
        "buggy": True,
        "flags": [],
        "family": "draft_law",
        "mechanism": "drafts are sampled from q^s / Z with s = 1 + 2 * (the request's acceptance rate so far), but the raw row q is reported for ratio and residual; the first round of a request (s = 1) is standard.",
        "source": "transformers#47932 / #32867 (the drafter samples from a processed row and reports the unprocessed one), here with a stateful, acceptance-adaptive sharpening",
    },
    # ---- parity of the sampling settings (--logits) ------------------------------------------
    {
        "spec": "study_bugs6.parity:target_top_p_before_top_k",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the target's rows apply top-p to the full temperature-scaled row and top-k afterwards (then min-p), instead of top-k then top-p on the top-k row; draft rows follow the request's order; differs only where both top-k and top-p are set.",
        "source": "written for the study: engines differ in filter order (HF top-k then top-p; some kernels fuse them in the other order); sglang#10617 (min_p not applied with EAGLE: the speculative path's own filter code)",
    },
    {
        "spec": "study_bugs6.parity:frequency_penalty_normalised_by_generated_length",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the target's frequency penalty subtracts penalty * count / (number of generated tokens) instead of penalty * count; presence and repetition penalties right; draft rows are right.",
        "source": "vllm#18902 (frequency penalty mishandled with speculative decoding) and sglang#33643 (a frequency penalty acting at about nominal / accepted length); here written as a normalised frequency",
    },
    {
        "spec": "study_bugs6.parity:repetition_penalty_ignores_prompt",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the target's repetition penalty counts the generated tokens only (the presence/frequency history reused), not prompt + generated; draft rows count the whole history.",
        "source": "TensorRT-LLM#17701 (penalties on the speculative path) and sglang#22049 / #28242 (penalties handled differently by drafters); the OpenAI output-only history applied to the wrong penalty",
    },
    {
        "spec": "study_bugs6.parity:logit_bias_missing_after_first_row",
        "buggy": True,
        "flags": ["--logits"],
        "family": "settings_parity",
        "mechanism": "the logit bias is applied to the verification pass's row 0 only; target rows 1 .. gamma (bonus row included) are processed without it, while the draft rows carry it.",
        "source": "sglang#10617 (logit_bias not applied with EAGLE)",
    },
    # ---- exact steps written in unusual ways ------------------------------------------------
    {
        "spec": "study_bugs6.correct:target_rows_one_position_at_a_time",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: each target row j fetched on its own as target(prefix + xs[:j], [])[0]; the standard rule.",
        "source": "written for the study: non-batched verification",
    },
    {
        "spec": "study_bugs6.correct:drafts_from_unconditioned_first_row",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: every draft drawn i.i.d. from q(. | prefix) and that row reported as q at every position (any proposal is exact when the reported row is the one sampled from).",
        "source": "written for the study: a parallel drafter that never conditions on its own drafts (looks like a stale-row bug)",
    },
    {
        "spec": "study_bugs6.correct:residual_as_p_times_one_minus_ratio",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the residual written as p * (1 - q/p)+ (0 where p = 0), equal to (p - q)+.",
        "source": "written for the study",
    },
    {
        "spec": "study_bugs6.correct:acceptance_via_exponential_clock",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: accept iff E > log(q(x)/p(x)) with E = -log(1 - u) ~ Exp(1), i.e. with probability min(1, p(x)/q(x)).",
        "source": "written for the study: the log-space test written with an exponential clock",
    },
    {
        "spec": "study_bugs6.correct:bonus_as_residual_against_zero_row",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: a zero draft row is appended at position gamma so the bonus comes out of the replacement path as (p_gamma - 0)+ = p_gamma.",
        "source": "written for the study: the bonus unified with the recovered-token path (as in vLLM's batched layout)",
    },
    {
        "spec": "study_bugs6.correct:break_after_first_acceptance",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: the verify loop breaks at the first acceptance and then samples from the next target row p(. | prefix + [x_0]), the right row for that context (the other drafts are wasted).",
        "source": "written for the study: a misplaced break that is nevertheless lossless",
    },
    {
        "spec": "study_bugs6.correct:stale_first_draft_row_used_consistently",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact (stateful, resets per request): the next round's first draft is prefetched from the stale row q(. | prefix without its last token) and that same stale row is reported as q_0.",
        "source": "written for the study: the consistent twin of state:prefetched_first_draft_with_fresh_row",
    },
]
