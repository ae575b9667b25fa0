"""Round steps for a ninth blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages, ``docs/verdict.md`` or
``docs/protocol.md`` (neither was opened), and without reading any diagnosis output (every audit ran
with ``--no-diagnosis``). Nothing was grepped across the repository.
What was read: ``tests/study_bugs/_util.py`` (the correct helpers the steps use); the module
docstring of ``tests/study_bugs8/__init__.py`` and its first three STUDY entries (the format), its
``"spec"`` lines and ``"family"`` labels, and the ``"mechanism"`` sentences of
``tests/study_bugs2`` to ``tests/study_bugs8`` (``grep -A4``/``-A6`` on ``"mechanism"``, only to avoid
duplicating them); the whole of ``tests/study_bugs8/_common.py`` and ``tests/study_bugs8/counting.py``
(how a step module looks); the function and class names only of the earlier sets
(``grep -n "^def \\|^class " tests/study_bugs*/*.py``, to avoid their mechanisms);
``docs/examples/round_step.py`` and ``docs/examples/round_step_logits.py`` (the two signatures);
lines 50-80 of ``docs/adapters.md`` and the lines of it matching "tables", "context" or "vocab";
the whole of ``specverify/dists/_processing.py`` and ``specverify/dists/_settings.py`` (the settings
pipeline and the penalty histories, for the ``--logits`` steps) and ``validate_logits`` in
``specverify/dists/_validate.py`` (whether -inf logits may be passed through the pipeline again);
``specverify audit --help``; the research notes ``/work/shared/research/real-bugs-2024-2026.md`` and
``/work/shared/research/engines-and-bugs.md``; and public GitHub issue and pull-request threads found
with the search tool (the trackers cited in ``source``). Before writing, the two example steps of
``docs/examples`` were audited once each (``--no-diagnosis``) to time an audit and see the units and
the ``--logits`` settings grid.

Buggy speculative-decoding round steps, each one mistake modelled on a real report (tracker
reference) or written for the study with the reason it is plausible, chosen to differ from the
mechanisms of ``tests/study_bugs`` to ``tests/study_bugs8``, and six exact round steps written in
unusual ways that look like bugs (a drafter whose context follows its own argmax, verification cut
where the target is unsure, a residual drawn in sorted order, the rejecting coin recycled for the
replacement, temperature between top-k and top-p, min-p as a log-space threshold; some are twins of
buggy steps of this set). ``STUDY`` lists them; the ``family`` labels are the writer's own and
``mechanism`` says exactly what each step does wrong (or why it is exact). Every spec is audited
with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util`` and
``study_bugs9._common`` (correct building blocks); every mistake lives in its step, on the line marked
``# BUG:``. Stateful steps (the request-level ones in ``state.py``) are module-level objects whose
``__call__`` is the step; they treat a round whose prefix does not continue the previous round's
output as the start of a new request. Six buggy steps of an earlier draft of this set passed the
audit (their effect on the audit's model pairs was below the audit's TV) and were replaced; they are
not listed.
"""

STUDY = [
    # ---- target and draft rows --------------------------------------------------------------------------
    {
        "spec": "study_bugs9.rows:verify_input_repeats_first_draft",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the verification pass is fed [x_0] + xs (x_0 twice) and its first gamma + 1 rows are used: rows 0 "
            "and 1 are right, row j >= 2 (the bonus row included) is p(. | prefix + [x_0] + xs[:j - 1]) instead "
            "of p(. | prefix + xs[:j]); ratio, residual and bonus of positions >= 2 use those rows."
        ),
        "source": (
            "written for the study: the verify input ids assembled as [input slot] + drafts after the drafter "
            "already wrote x_0 into the slot; the input-preparation class of vllm PR #29274's review (draft ids "
            "loaded at an offset of the input ids) and ohdearquant/lattice#243 (verify input off by one)"
        ),
    },
    {
        "spec": "study_bugs9.rows:draft_row_divided_by_race_noise_in_place",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "each draft is sampled by the exponential race argmax(q / E) computed in place on the draft row, so "
            "the row handed to the verifier as q is q / E (entry-wise divided by the race noise, unnormalised): "
            "the ratio is p(x) E_x / q(x) and the residual (p - q / E)+."
        ),
        "source": (
            "vllm-project/vllm#16952 ('No in-place update to draft probs': probs.div_(q) on the draft "
            "probabilities that rejection sampling reads later)"
        ),
    },
    {
        "spec": "study_bugs9.rows:target_context_drops_pad_id",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the target's context is the prefix with every token equal to id 0 removed (an attention mask "
            "derived as ids != pad id 0, which is also a real token): once a 0 has been emitted, every target row "
            "(ratio, residual, bonus) conditions on a shorter, shifted context; the drafter sees the whole prefix."
        ),
        "source": (
            "huggingface/transformers#2862 (attention mask derived as input_ids != 0) and huggingface/"
            "transformers PR #17444 (warning when the pad id equals a real token such as EOS/BOS)"
        ),
    },
    # ---- acceptance test --------------------------------------------------------------------------------
    {
        "spec": "study_bugs9.acceptance:verification_by_target_argmax_bonus_sampled",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "drafts are sampled from q but each is kept iff it equals argmax p_i, and the first mismatch emits "
            "argmax p_i (the greedy verify path for sampled requests); only the bonus is sampled from p_gamma."
        ),
        "source": (
            "ROCm/ATOM#2318 (target verification used argmax at every draft position for sampled requests; only "
            "the bonus token honoured the sampling parameters)"
        ),
    },
    {
        "spec": "study_bugs9.acceptance:best_of_two_branches_by_independent_matches",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "two draft chains are proposed and each is verified by sample-and-match with its own independent "
            "target samples t_i ~ p(. | prefix + chain[:i]) (kept while t_i == x_i, then t_m emitted), exact for "
            "one branch; the branch with the longer match (the first on a tie) is emitted, a selection on the "
            "verification's outcome that favours tokens both models like."
        ),
        "source": (
            "foundation-model-stack/fms-extras#12 -> #17 (multi-candidate sample-and-match with an independent "
            "target sample per candidate, keeping the best match; fixed with candidate-consistent sampling)"
        ),
    },
    {
        "spec": "study_bugs9.acceptance:target_only_siblings_with_fresh_coin",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "target-only tree verification whose first level holds the draft row's two most likely ids c1, c2: "
            "c1 is taken if u1 < p(c1), else c2 if a fresh coin u2 < p(c1) + p(c2) (the cumulative mass compared "
            "with a new coin instead of u1), else a draw from p without c1, c2; so c2 is emitted with probability "
            "(1 - p(c1)) min(1, p(c1) + p(c2)) instead of p(c2) (also when p(c2) = 0). Below an accepted sibling "
            "the chain of draft argmaxes is verified by the one-hot rule (right), then the bonus from p_gamma."
        ),
        "source": (
            "SGLang's target-only tree verification (sgl-kernel speculative_sampling.cuh: siblings tried in "
            "order against the cumulative target mass with one coin per level), per the research notes' "
            "exactness conditions; written for the study as a per-sibling coin"
        ),
    },
    # ---- accepted count ---------------------------------------------------------------------------------
    {
        "spec": "study_bugs9.counting:first_rejection_searchsorted_side_right",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "n = np.searchsorted(np.cumsum(~accept), 1, side='right'): the first index where the running count "
            "of rejections exceeds 1, i.e. the second rejection (gamma with at most one rejection), so a round "
            "keeps its first rejected draft (with one rejection: every draft and the bonus from p_gamma)."
        ),
        "source": (
            "written for the study: a plain numpy slip (side='right' for side='left') in the accepted-count "
            "code whose other slips vllm-project/vllm#2658 and #10604 fixed"
        ),
    },
    {
        "spec": "study_bugs9.counting:accepted_drafts_selected_by_mask",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "after a rejection at n (the first False of the mask) the kept drafts are xs[accept] (every "
            "accepted draft, those after position n included, compacted) instead of xs[:n]; the replacement "
            "from (p_n - q_n)+ is appended after them; full acceptance is right."
        ),
        "source": (
            "vllm-project/vllm#2658 and #10604 (the raw accept mask, with its True entries after a rejection, "
            "used where the prefix-accepted mask was meant)"
        ),
    },
    {
        "spec": "study_bugs9.counting:leading_accepts_counted_with_cumsum",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "n = np.count_nonzero(np.cumsum(accept)) (cumsum written for cumprod): the number of positions from "
            "the first accepted draft on, so rejected drafts before or after an acceptance are kept, and the "
            "replacement (or the bonus) is drawn at that position."
        ),
        "source": "written for the study: a plain cumsum/cumprod slip in a vectorised leading-run count",
    },
    # ---- replacement ------------------------------------------------------------------------------------
    {
        "spec": "study_bugs9.replacement:replacement_returns_index_into_support",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is drawn over the residual's support list (the ids with (p - q)+ > 0, ascending) "
            "with the right weights, but the position drawn in that list is emitted as the token id instead of "
            "support[k]: the replacement is a small id whatever the residual."
        ),
        "source": (
            "vllm-project/vllm-ascend#16396 / #16430 (sampling returned positions in a candidate list, not "
            "vocabulary ids)"
        ),
    },
    {
        "spec": "study_bugs9.replacement:residual_floored_at_eps",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the residual is np.maximum(p - q, 1e-3) instead of np.maximum(p - q, 0): every id with p <= q (the "
            "rejected draft and ids the target never emits included) keeps weight 1e-3 in the replacement's law."
        ),
        "source": (
            "vllm-project/vllm#2336 (V0's residual clamped at the smallest positive float rather than 0), here "
            "with an fp16-safe epsilon of 1e-3"
        ),
    },
    # ---- bonus ------------------------------------------------------------------------------------------
    {
        "spec": "study_bugs9.bonus:bonus_row_from_flip_without_axis",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "after a full acceptance the bonus row is np.flip(ps)[0] (meant: the last row), and np.flip without an "
            "axis also reverses the vocabulary: the bonus is id v with probability p_gamma(V - 1 - v); rounds "
            "with a rejection are right."
        ),
        "source": "written for the study: a plain numpy slip (np.flip without axis=0)",
    },
    {
        "spec": "study_bugs9.bonus:bonus_gumbel_max_with_uniform_noise",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the bonus is argmax(log p_gamma + g) with g uniform on [0, 1) instead of Gumbel noise "
            "-log(-log u): only ids within one nat of the top can win, a sharpened p_gamma; verified positions "
            "are right."
        ),
        "source": (
            "written for the study: the wrong noise in a Gumbel-max sampler (the sampling-noise class of "
            "vllm-project/vllm#47386 / #54282)"
        ),
    },
    {
        "spec": "study_bugs9.bonus:bonus_choice_without_weights",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the bonus is rng.choice(np.flatnonzero(p_gamma)) with the weights argument left out: uniform over "
            "the ids p_gamma supports instead of p_gamma; verified positions are right."
        ),
        "source": "written for the study: a plain slip (rng.choice without p=)",
    },
    # ---- numerics ---------------------------------------------------------------------------------------
    {
        "spec": "study_bugs9.numerics:coin_as_sum_of_two_uniforms",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the acceptance coin is u1 + u2 (two uniform draws mixed without the mod 1), on [0, 2): a draft is "
            "accepted with probability r^2 / 2 (r = min(1, p/q)) instead of r; replacement and bonus are right."
        ),
        "source": (
            "written for the study: two random streams combined without the wrap-around (vllm-project/"
            "vllm-ascend#13730 / #13766 emulate the coin from two random draws on NPU)"
        ),
    },
    {
        "spec": "study_bugs9.numerics:coin_from_31_bit_integer_over_two_to_32",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the acceptance coin is a 31-bit random integer divided by 2**32, uniform on [0, 0.5): a draft is "
            "accepted with probability min(1, 2 p(x) / q(x)); replacement and bonus are right."
        ),
        "source": (
            "written for the study: an integer-to-float conversion with the divisor of a 32-bit word on a 31-bit "
            "draw (the NPU uniform emulation of vllm-project/vllm-ascend#13766)"
        ),
    },
    {
        "spec": "study_bugs9.numerics:residual_negatives_cleared_on_loop_variable",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the residual's negative entries are 'cleared' with for v in w: v = max(v, 0), which rebinds the loop "
            "variable and leaves w = p - q unchanged; the replacement is np.searchsorted(cumsum(p - q), u * "
            "sum(p - q)) (capped at V - 1) on a running sum that is not monotone and totals about 0, a near "
            "deterministic id instead of a draw from (p - q)+."
        ),
        "source": "written for the study: a plain Python slip (assigning to the loop variable)",
    },
    # ---- state across rounds and requests ---------------------------------------------------------------
    {
        "spec": "study_bugs9.state:target_positions_not_reset_per_request",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": (
            "stateful: the target's position offset is not reset when a request starts but set to the previous "
            "request's final length, so from a process's second request on every target row (ratio, residual, "
            "bonus) is computed on the context left-padded by that many id-0 slots (another position of the "
            "position-dependent model); the drafter and the first request are right."
        ),
        "source": (
            "huggingface/transformers#30042 (cache_position not advanced correctly in assisted decoding), here "
            "a position counter carried over from the previous request"
        ),
    },
    {
        "spec": "study_bugs9.state:race_noise_drawn_once_per_request",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": (
            "stateful: the replacement is argmax((p - q)+ / E) (the exponential race, exact for one draw), but E "
            "is drawn once when a request starts and reused for every replacement of the request, so the "
            "request's replacements are coupled (an id with small E_v keeps winning); test and bonus are right."
        ),
        "source": (
            "vLLM V1's recovered-token race (one exponential noise vector per request and step, per the research "
            "notes) combined with TensorRT-LLM#19487 (a random stream replayed instead of advanced)"
        ),
    },
    {
        "spec": "study_bugs9.state:draft_generator_reseeded_each_round",
        "buggy": True,
        "flags": [],
        "family": "round_state",
        "mechanism": (
            "the drafter's generator is created with a fixed seed inside each round, so every round replays the "
            "same draws: each draft is a deterministic function of its draft row (the same quantile every round) "
            "while the row is reported to the verifier as the draft's law q; the verifier's coins come from rng."
        ),
        "source": (
            "written for the study: a seeded generator constructed inside the proposer call (the replayed-stream "
            "class of NVIDIA/TensorRT-LLM#19487)"
        ),
    },
    {
        "spec": "study_bugs9.state:prefill_token_dropped_from_first_round",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": (
            "stateful: at a request's first round a token t ~ p(. | prefix) is sampled (the prefill's token) and "
            "the round is drafted and verified on prefix + [t], but t is not returned: the first round's tokens "
            "follow the context prefix + [t] while they are emitted after prefix; later rounds are right."
        ),
        "source": "Lightning-AI/litgpt#2307 (speculative decoding drops the first generated token, sampled at prefill)",
    },
    {
        "spec": "study_bugs9.state:first_token_of_request_is_prefill_argmax",
        "buggy": True,
        "flags": [],
        "family": "request_state",
        "mechanism": (
            "stateful: a request's first round returns the single token argmax p(. | prompt) (the prefill path "
            "picks greedily) instead of a sample; every later round of the request is right."
        ),
        "source": (
            "Luce-Org/lucebox#374 (the first token after prefill was the prefill's argmax, one greedy token per "
            "request at any temperature)"
        ),
    },
    {
        "spec": "study_bugs9.state:output_counts_carried_across_requests",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "stateful: the generated-token log that presence and frequency penalties count lives in the step and "
            "is extended with each round's output; at a new request it is extended with the request's generated "
            "tokens instead of reset to them, so from the second request of a process on draft and target rows "
            "are penalised for tokens earlier requests generated; the repetition penalty is right."
        ),
        "source": (
            "written for the study: a per-slot output-count buffer not cleared when the slot is reused; the "
            "shared penalty state of osaurus-ai/vmlx-swift#357 and sgl-project/sglang#33643"
        ),
    },
    {
        "spec": "study_bugs9.state:penalty_snapshot_one_round_stale",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "stateful: the target's penalty histories (repetition, presence, frequency) are a snapshot taken at "
            "the start of the previous round: target row i is penalised over the previous round's prefix + "
            "xs[:i] (the previous round's output missing); the drafter counts prefix + xs[:i]; a request's first "
            "round is right."
        ),
        "source": (
            "sgl-project/sglang#28200 ('penalty snapshots are refreshed before verify but contain previous "
            "round's state')"
        ),
    },
    # ---- settings parity (--logits) ---------------------------------------------------------------------
    {
        "spec": "study_bugs9.parity:replacement_row_processed_without_penalties",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "the acceptance test uses the fully processed target row, but after a rejection the replacement is "
            "drawn from (p' - q)+ with p' the target row processed without the repetition, presence and "
            "frequency penalties (every other knob applied); the bonus and the drafts are right."
        ),
        "source": (
            "vllm-project/vllm#18902 (the frequency penalty had no effect with speculative decoding: skipped on "
            "the rejection path)"
        ),
    },
    {
        "spec": "study_bugs9.parity:penalty_history_aliased_by_draft_loop",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "the drafter appends each draft to the history list the verifier then uses for every row: target rows "
            "0 .. gamma - 1 are penalised over prefix + all gamma drafts instead of prefix + xs[:i] (the bonus "
            "row's history is right); the drafter's rows are right."
        ),
        "source": (
            "osaurus-ai/vmlx-swift#357 / #361 (penalty state shared by reference: the draft loop recorded every "
            "proposed token into the verifier's processor)"
        ),
    },
    {
        "spec": "study_bugs9.parity:target_min_p_threshold_on_logits",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_min_p",
        "mechanism": (
            "the target's min-p removes tokens whose processed logit z is below min_p * max z (the top token kept) "
            "instead of those with p < min_p * max p (z < max z + log(min_p)); bias, penalties, temperature, "
            "top-k and top-p and the drafter are right."
        ),
        "source": (
            "written for the study: a threshold put on the logits instead of the probabilities (min-p mishandled "
            "on the speculative path in sgl-project/sglang#10617)"
        ),
    },
    {
        "spec": "study_bugs9.parity:target_logit_bias_applied_twice",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_logit_bias",
        "mechanism": (
            "the verifier adds the request's logit bias to the target's raw logits and the settings pipeline adds "
            "it again: every target row (bonus included) carries twice the bias; the drafter's rows carry it once."
        ),
        "source": (
            "written for the study: a bias applied by the model runner and again by the sampler's processors "
            "(which processors run on verified rows: vllm-project/vllm#42744 / #42802)"
        ),
    },
    {
        "spec": "study_bugs9.parity:target_top_k_zero_not_treated_as_off",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_k",
        "mechanism": (
            "the verifier's top-k keeps max(top_k, min_tokens_to_keep) tokens without the 'top_k == 0 means off' "
            "guard, so whenever top-k is off (and the request samples) every target row is cut to its most likely "
            "token (ties kept); settings with top-k set, greedy requests and the drafter are right."
        ),
        "source": (
            "vllm-project/vllm#27077 (a sentinel value handled differently in the rejection sampler) and "
            "ardanlabs/kronk#936 (a verifier's reconstruction of the sampler treats a sentinel differently)"
        ),
    },
    {
        "spec": "study_bugs9.parity:greedy_replacement_emitted_as_candidate_rank",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_greedy",
        "mechanism": (
            "at temperature 0 a draft that is not the target's argmax is replaced by argmax(p[candidates]) with "
            "candidates the ids sorted by p descending, i.e. the rank 0 of the target's choice, so id 0 is emitted "
            "instead of the target's argmax; sampled settings follow the standard rule."
        ),
        "source": (
            "vllm-project/vllm-ascend#16396 / #16430 (greedy rows in mixed batches returned candidate positions, "
            "not vocabulary ids)"
        ),
    },
    # ---- exact steps written in unusual ways ------------------------------------------------------------
    {
        "spec": "study_bugs9.correct:drafter_chains_on_its_own_argmax",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the drafter's own context advances with the argmax of each of its rows while each reported "
            "draft is a sample from that row; every draft is verified against the row it was drawn from on the "
            "target rows of prefix + xs[:i] (a proposal is exact whenever q is the law it was drawn from)."
        ),
        "source": "written for the study: looks like a drafter/verifier context mismatch",
    },
    {
        "spec": "study_bugs9.correct:verification_cut_where_target_is_unsure",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: verification stops at the first position whose target row's largest probability is below 0.3 "
            "and that position's token is drawn from the row itself; the cut depends only on the row of the "
            "context already emitted, so every emitted token follows p."
        ),
        "source": "written for the study: looks like a target-dependent stopping rule",
    },
    {
        "spec": "study_bugs9.correct:residual_in_sorted_order_scattered_back",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the residual is computed on p and q both permuted by p's descending order, drawn there, and "
            "the drawn position mapped back with order[k] (the same permutation on both rows)."
        ),
        "source": "written for the study: twin of the sorted-row residual bugs of earlier sets",
    },
    {
        "spec": "study_bugs9.correct:rejecting_coin_rescaled_for_replacement",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: the coin u that rejected a draft (u >= r) is reused for the replacement as (u - r) / (1 - r), "
            "uniform on [0, 1) and independent of the draft given the rejection; the replacement is its "
            "inverse-CDF image under (p - q)+."
        ),
        "source": "written for the study: looks like the rejecting coin reused for the replacement (vllm-ascend#16370)",
    },
    {
        "spec": "study_bugs9.correct:temperature_between_top_k_and_top_p",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": (
            "exact: the target's rows get bias, penalties and top-k at temperature 1, then the division by the "
            "temperature, then top-p and min-p; top-k keeps the same tokens at any positive temperature, so the "
            "law is the request's (the library pipeline for greedy and temperature-last settings)."
        ),
        "source": "written for the study: looks like a temperature-order mismatch",
    },
    {
        "spec": "study_bugs9.correct:min_p_as_log_space_threshold",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": (
            "exact: the target's min-p is applied on the processed logits as z < max z + log(min_p), which is p < "
            "min_p * max p in log space (the library pipeline where min-p is off, for greedy, temperature-last "
            "and min_tokens_to_keep > 1)."
        ),
        "source": "written for the study: twin of study_bugs9.parity:target_min_p_threshold_on_logits",
    },
]
