"""Round steps for a seventh blind generalisation study of specverify's automatic diagnosis.

Written blind: without reading specverify's diagnosis code (``specverify/diagnosis/``), its
catalogue (``specverify/catalogue/``), their tests (``tests/test_diagnosis*``,
``tests/test_*class*``), the study scripts (``scripts/generalisation_study.py``,
``scripts/diagnosis_study.py``), anything under ``scripts/results/`` or any earlier study's results
(``tests/study_bugs*/RESULTS.md``), without reading git log messages, without reading the diagnosis
sections of ``docs/verdict.md`` (no part of ``docs/verdict.md`` was opened), and without reading any
diagnosis output (every audit ran with ``--no-diagnosis``). Nothing was grepped across the repository.
What was read: ``tests/study_bugs/_util.py`` (the correct helpers the steps use); the module docstring
of ``tests/study_bugs6/__init__.py``, its first five STUDY entries, the entries of its last parity
step and first two correct steps, and the list of its ``"spec"`` lines (the format); the whole of
``tests/study_bugs6/_common.py`` and ``tests/study_bugs6/rows.py`` (the step signature), the first
twelve and last three lines of ``tests/study_bugs6/state.py`` (how a stateful step is exported); the
function and class names only of the earlier sets (``grep -n "^def \\|^class "``, to avoid their
mechanisms); ``docs/adapters.md`` (its first 250 lines) and ``docs/examples/round_step_logits.py``
(the ``--logits`` signature); ``specverify/dists`` (``__init__``, ``_processing``, ``_settings``,
``_boundary``, ``_reported`` and the head of ``_sampling``: the processing pipeline, for the
``--logits`` steps); the first 300 lines of ``specverify/audit/pipeline/plan.py`` (the settings
grid); ``specverify audit --help``; the ruff section of ``pyproject.toml``; and the research notes
``/work/shared/research/real-bugs-2024-2026.md`` and ``/work/shared/research/engines-and-bugs.md``.
Before writing, ``docs/examples/round_step.py`` was audited once (``--no-diagnosis``) to time an
audit. The names of the files under ``tests/`` were listed (``ls``); none of the forbidden ones was
opened.

Buggy speculative-decoding round steps, each one mistake modelled on a real report from the research
notes (tracker reference) or written for the study with the reason it is plausible, chosen to differ
from the mechanisms of ``tests/study_bugs`` to ``tests/study_bugs6``, and exact round steps written in
unusual ways, several of which look like bugs (twins of buggy steps of this set: a base-2 log space
with matching bases, a verification pass padded with stale tokens, a drafter with its own top-k, a
generator forked per request). ``STUDY`` lists them; the ``family`` labels are the writer's own and
``truth`` says exactly what each step does wrong (or why it is exact). Every spec is audited with

    PYTHONPATH=tests specverify audit --round SPEC [flags] --eps 0.1 --workers 1 --no-diagnosis --no-progress

and RESULTS.md records the verdicts. The helpers come from ``study_bugs._util`` and
``study_bugs7._common`` (correct building blocks); every mistake lives in its step, on the line marked
``# BUG:``. Stateful steps (two in ``state.py``, two in ``correct.py``) are module-level objects whose
``__call__`` is the step; they reset when a round's prefix does not continue the previous round's
output (a new request).
"""

STUDY = [
    # ---- target and draft rows ---------------------------------------------------------------------
    {
        "spec": "study_bugs7.rows:draft_heads_sampled_in_parallel_chained_rows_reported",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "every draft is sampled i.i.d. from q(. | prefix) (row 0), but the verifier is given the chained "
            "rows q(. | prefix + xs[:i]) as q_i for the ratio and the residual; position 0 is right, later "
            "positions test drafts against rows they were not drawn from."
        ),
        "source": (
            "transformers#47932 (the reported q is not the law the candidate generator sampled from); a "
            "Medusa-style parallel drafter verified as if it were sequential"
        ),
    },
    {
        "spec": "study_bugs7.rows:target_rows_read_as_vocab_major",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the [gamma + 1, V] verification output is reshaped to [V, gamma + 1] and transposed, so row j "
            "entry v is the flat entry v * (gamma + 1) + j of the pass (values of several rows, not a "
            "distribution); ratio, residual and bonus use these rows (replacement and bonus drawn by the "
            "exponential race, id 0 from an all-zero row)."
        ),
        "source": (
            "HabanaAI/vllm-fork#1780 and vllm#51812 (rows misaligned by a layout/gather mistake); reshape taken"
            " for transpose"
        ),
    },
    {
        "spec": "study_bugs7.rows:target_rows_ring_indexed_by_absolute_position",
        "buggy": True,
        "flags": [],
        "family": "target_rows",
        "mechanism": (
            "the target's rows are rotated: position i (and the bonus, i = gamma) uses row (len(prefix) + i) "
            "mod (gamma + 1) of the pass, right only when len(prefix) is a multiple of gamma + 1."
        ),
        "source": (
            "written for the study: a slot ring written from slot 0 and read by absolute position, next to "
            "text-generation-inference#2711 (KV slots assumed contiguous)"
        ),
    },
    {
        "spec": "study_bugs7.rows:peaked_draft_rows_snapped_to_one_hot",
        "buggy": True,
        "flags": [],
        "family": "draft_rows",
        "mechanism": (
            "a draft row whose peak exceeds 0.5 is replaced, for the ratio and the residual, by the one-hot of "
            "its argmax although the draft was sampled from the full row: a non-argmax draft there has q = 0 "
            "and is accepted outright, the argmax draft is accepted with probability p(x), and the residual is "
            "(p - onehot)+."
        ),
        "source": (
            "vllm#40149 / #40651 (one-hot q is exact only for argmax drafts) and transformers#32867 (argmax "
            "drafting with a soft q), here the reverse: sampled drafts, one-hot q"
        ),
    },
    # ---- acceptance test ---------------------------------------------------------------------------
    {
        "spec": "study_bugs7.acceptance:residual_prepared_in_place_before_test",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "the residual (p - q)+ is written in place over the target row before the test, so a draft is "
            "accepted with probability min(1, (p(x) - q(x))+ / q(x)) (never when p(x) <= q(x)); the replacement"
            " is drawn from the right residual (from q when it is empty, i.e. p == q)."
        ),
        "source": "vllm#30846 (logits modified in place, not cloned, before another reader)",
    },
    {
        "spec": "study_bugs7.acceptance:ratio_row_indexed_by_position",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "the acceptance probability at position i is min(1, p_i(i) / q_i(i)), the ratio at token id i (the "
            "loop index) instead of at the draft x_i (NaN, when both are 0, rejects); replacement and bonus are"
            " standard."
        ),
        "source": (
            "written for the study: a vectorised ratio row read with the loop index instead of the token, a "
            "one-character slip"
        ),
    },
    {
        "spec": "study_bugs7.acceptance:entropy_gated_acceptance",
        "buggy": True,
        "flags": [],
        "family": "acceptance_test",
        "mechanism": (
            "a draft is accepted without the test whenever the target row's entropy exceeds 2 nats; otherwise "
            "min(1, p/q). Replacement and bonus are standard."
        ),
        "source": (
            "vLLM's entropy-gated lossy FLy acceptance and SGLang's thresholds below 1 (engines-and-bugs.md, "
            "Table A) left on in an exact path"
        ),
    },
    # ---- accepted-count rule -----------------------------------------------------------------------
    {
        "spec": "study_bugs7.counting:first_rejection_found_with_argmax_of_accepts",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "when some draft is rejected, the number kept is n = argmax(accept), the index of the first "
            "accepted draft (0 when x_0 is accepted or none is): xs[:n] are emitted (rejected drafts when n > "
            "0) and the replacement is drawn from (p_n - q_n)+; every draft accepted is handled right."
        ),
        "source": (
            "written for the study: np.argmax(acc) for np.argmax(~acc), the vectorised first-rejection idiom "
            "with its negation dropped"
        ),
    },
    {
        "spec": "study_bugs7.counting:leading_accepts_via_trim_zeros",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "the number kept is one past the last accepted draft (the mask with its trailing rejections "
            "trimmed), not the number of leading accepts: rejected drafts before an accepted one are emitted, "
            "and the replacement is drawn at that later position."
        ),
        "source": "written for the study: np.trim_zeros(mask, 'b') taken for 'the leading ones'",
    },
    {
        "spec": "study_bugs7.counting:all_accepted_guard_tests_any",
        "buggy": True,
        "flags": [],
        "family": "accepted_count",
        "mechanism": (
            "n = argmin(accept) guarded by accept.any() instead of not accept.all(): when every draft is "
            "rejected, all gamma rejected drafts are emitted with a bonus from p_gamma; when every draft is "
            "accepted, n = 0 and the round emits one replacement from (p_0 - q_0)+; mixed masks are right."
        ),
        "source": "written for the study: any() for all() in the all-accepted guard",
    },
    # ---- replacement law ---------------------------------------------------------------------------
    {
        "spec": "study_bugs7.replacement:residual_buffer_accumulates_across_positions",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "a rejection at position k replaces from the sum over i <= k of (p_i - q_i)+ (the residuals of the "
            "accepted positions before k are added in); position 0 is right, test and bonus are standard."
        ),
        "source": "written for the study: a per-round scratch buffer updated with += instead of =",
    },
    {
        "spec": "study_bugs7.replacement:replacement_from_p_where_p_exceeds_q",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is drawn from p restricted to {p > q} and renormalised (torch.where(p > q, p, 0)) "
            "instead of (p - q)+."
        ),
        "source": (
            "written for the study: the residual's support mask applied to p; transformers#28508 (a wrong "
            "residual normalisation) is the same spot"
        ),
    },
    {
        "spec": "study_bugs7.replacement:race_exponentials_drawn_with_weights_as_scale",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is drawn by the exponential race argmax(w / E) with E ~ Exp(scale=w) instead of "
            "Exp(1), so the weights cancel and the replacement is uniform over the residual's support {p > q} "
            "instead of proportional to (p - q)+."
        ),
        "source": (
            "written for the study: numpy's exponential takes a scale, and the weights were passed to it; "
            "vLLM's recovered-token race (engines-and-bugs.md 1.4) is the model. Replaces "
            "residual_weighted_by_path_acceptance (vllm-ascend#7807's rule mix), which PASSed: on the disjoint "
            "rows (w p - q)+ is proportional to p"
        ),
    },
    {
        "spec": "study_bugs7.replacement:residual_shifted_by_its_minimum",
        "buggy": True,
        "flags": [],
        "family": "replacement_law",
        "mechanism": (
            "the replacement is drawn from (p - q) - min(p - q) (a shift to non-negative values) instead of "
            "max(p - q, 0): every token, those with p <= q included, gets mass."
        ),
        "source": "written for the study: min-shift normalisation of a signed vector in place of a clamp",
    },
    # ---- bonus token -------------------------------------------------------------------------------
    {
        "spec": "study_bugs7.bonus:bonus_row_sees_placeholder_in_last_slot",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the verification pass is fed xs[:gamma - 1] + [0]: rows 0 .. gamma - 1 are right, but the bonus is"
            " drawn from p(. | prefix + xs[:gamma - 1] + [0]) instead of p(. | prefix + xs)."
        ),
        "source": "vllm#46899 (stale placeholder ids fed back as draft tokens)",
    },
    {
        "spec": "study_bugs7.bonus:bonus_reuses_last_draft_uniform",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "drafts are drawn by inverse CDF; the bonus is drawn by inverse CDF from p_gamma with the uniform "
            "that drew x_{gamma-1}, so given the last draft the bonus is confined to the CDF interval that "
            "draft occupied under q_{gamma-1}."
        ),
        "source": "vllm#47386 / #54282 (draft noise reused for the recovered token), here for the bonus",
    },
    {
        "spec": "study_bugs7.bonus:bonus_sorted_draw_mapped_by_inverse_permutation",
        "buggy": True,
        "flags": [],
        "family": "bonus",
        "mechanism": (
            "the bonus is drawn as a rank k of p_gamma sorted descending and emitted as argsort(order)[k] (the "
            "rank of token id k) instead of order[k]: the bonus's law is p_gamma's sorted masses placed on a "
            "permutation of the ids."
        ),
        "source": ("written for the study: argsort(order) and order confused when mapping a sorted draw back to ids"),
    },
    # ---- numerics ----------------------------------------------------------------------------------
    {
        "spec": "study_bugs7.numerics:target_log2_probs_exponentiated_with_exp",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the target's rows are used as exp(log2 p) = p ** (1 / ln 2) (sharpened, unnormalised) for the "
            "ratio, the residual and the bonus (the bonus sampler renormalises: temperature ln 2 there)."
        ),
        "source": (
            "written for the study: log2-domain softmax kernels (exp2-based, as in FlashInfer) read back with exp"
        ),
    },
    {
        "spec": "study_bugs7.numerics:target_rows_normalised_by_their_max",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the target's rows are divided by their maximum instead of their sum: the ratio is min(1, p(x) / "
            "(max p q(x))) and the residual (p / max p - q)+; the bonus is unaffected."
        ),
        "source": "written for the study: min-p's max-normalisation used as renormalisation",
    },
    {
        "spec": "study_bugs7.numerics:draft_probabilities_softmaxed_as_logits",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the verifier uses softmax(q) (exp of probabilities, close to uniform) as the draft row for the "
            "ratio and the residual, while the drafts were sampled from q."
        ),
        "source": (
            "transformers#28508 (softmax applied to probabilities) and transformers#47932 (probabilities vs "
            "logits as q)"
        ),
    },
    {
        "spec": "study_bugs7.numerics:residual_in_log_space_with_logaddexp",
        "buggy": True,
        "flags": [],
        "family": "numerics",
        "mechanism": (
            "the replacement is drawn from (p + q) on {p > q} (np.logaddexp used for log(p - q)) instead of (p "
            "- q)+; test and bonus are standard."
        ),
        "source": "written for the study: numpy has logaddexp but no log-subtract-exp",
    },
    # ---- state across rounds -----------------------------------------------------------------------
    {
        "spec": "study_bugs7.state:coins_from_process_wide_generator",
        "buggy": True,
        "flags": [],
        "family": "rng_state",
        "mechanism": (
            "the acceptance coins come from one unseeded generator created at import, not from the request's "
            "rng: the law is exact, but a seeded request does not reproduce (the coins depend on everything the"
            " process drew before)."
        ),
        "source": (
            "vllm#17498 / PR #17509 (unseeded requests draw coins that no seed controls) and TensorRT-LLM#19487"
            " (one stream shared by requests)"
        ),
    },
    {
        "spec": "study_bugs7.state:round_generator_seeded_from_truncated_float",
        "buggy": True,
        "flags": [],
        "family": "rng_state",
        "mechanism": (
            "every round's coins come from default_rng(0) (the seed int(rng.random()) * 2**32 is always 0): "
            "position i of every round is tested against the same fixed coin c_i, so a draft is accepted iff "
            "c_i < min(1, p/q)."
        ),
        "source": (
            "written for the study: int(rng.random()) * 2**32 for int(rng.random() * 2**32); the fixed-coin "
            "class of vllm-ascend#13470"
        ),
    },
    {
        "spec": "study_bugs7.state:draft_cache_keeps_rejected_proposals",
        "buggy": True,
        "flags": [],
        "family": "draft_cache",
        "mechanism": (
            "from the first round with a rejection on, the drafter's own context holds rejected proposals "
            "(never trimmed; only each round's final token is appended), so the request's later proposals are "
            "sampled from q(. | stale context) while the verifier uses fresh rows q(. | prefix + xs[:i]) for "
            "the ratio and the residual; until the first rejection it is consistent."
        ),
        "source": (
            "mlx-lm#1109 / #846 (a non-trimmable cache keeps rejected drafts), with the verifier rescoring q "
            "over the committed context"
        ),
    },
    {
        "spec": "study_bugs7.state:target_cache_rollback_negative_zero_slice",
        "buggy": True,
        "flags": [],
        "family": "target_cache",
        "mechanism": (
            "after a round that accepts every draft, del ctx[-0:] empties the target's context cache, which "
            "then holds only the bonus token: every later round of the request is verified against rows "
            "conditioned on that truncated context (ratio, residual and bonus)."
        ),
        "source": (
            "written for the study: Python's x[-0:] is the whole list; the rollback class of mlx-lm#1423 and "
            "transformers#30042"
        ),
    },
    # ---- settings parity (--logits) ----------------------------------------------------------------
    {
        "spec": "study_bugs7.parity:target_top_k_threshold_from_ascending_sort",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_top_k",
        "mechanism": (
            "the target's top-k keeps every logit >= the k-th smallest (V - k + 1 tokens) instead of >= the "
            "k-th largest; the drafts are cut to the top k, so the target is not truncated at top_k = 2 or 5."
        ),
        "source": (
            "written for the study: a sort-order slip in a hand-written top-k; sglang#36173 (the verifier's own"
            " filter pipeline differing from the sampler's)"
        ),
    },
    {
        "spec": "study_bugs7.parity:greedy_target_ties_to_highest_id",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_greedy",
        "mechanism": (
            "at temperature 0 the target's one-hot is at the highest id among exactly tied maximal logits (the "
            "draft's at the lowest), so at a tie the round emits the highest tied id; sampled settings are "
            "right."
        ),
        "source": "vllm#7627 / PR #7899 (exactly tied logits under a > vs >= rank rule)",
    },
    {
        "spec": "study_bugs7.parity:target_min_p_cutoff_from_draft_row",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_min_p",
        "mechanism": (
            "at drafted positions the target's min-p removes tokens with p < min_p * max(q) (the draft row's "
            "peak; the target's top token kept) instead of min_p * max(p); the bonus row uses its own peak, the"
            " drafts are right."
        ),
        "source": (
            "sglang#10617 (min_p not applied right with EAGLE) and vllm#42744 (min_p handled apart on verified "
            "positions)"
        ),
    },
    {
        "spec": "study_bugs7.parity:target_penalty_history_includes_token_under_test",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_penalties",
        "mechanism": (
            "the target's row j (j < gamma) is penalised over prefix + xs[:j + 1], counting the draft under "
            "test at its own position (repetition, presence and frequency penalties); the bonus row and the "
            "drafts are right."
        ),
        "source": (
            "vllm#33251 (a spec-penalty kernel counting the last token twice) and vllm#41768 (a min_tokens mask"
            " one row off) after #19482 appended spec tokens to the history"
        ),
    },
    {
        "spec": "study_bugs7.parity:target_processed_with_draft_sampler_settings",
        "buggy": True,
        "flags": ["--logits"],
        "family": "parity_settings_object",
        "mechanism": (
            "the drafter's settings object (the request's with top-k capped at 8) is used for the target's rows"
            " too, so the target is cut to its top 8 tokens in every setting without a smaller top-k; the "
            "drafts are consistent."
        ),
        "source": (
            "vllm#9834 and google-ai-edge/LiteRT-LM#3017 (the verifier not using the request's sampling "
            "parameters); llama.cpp's drafter top-k (LLAMA_DRAFT_TOP_K)"
        ),
    },
    # ---- exact steps written in unusual ways -------------------------------------------------------
    {
        "spec": "study_bugs7.correct:ratio_in_base_two",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: ratio exp2(log2 p - log2 q), residual (exp2 log2 p - exp2 log2 q)+, bonus from exp2(log2 "
            "p): the bases match."
        ),
        "source": (
            "written for the study: the matching-base twin of numerics:target_log2_probs_exponentiated_with_exp"
        ),
    },
    {
        "spec": "study_bugs7.correct:coin_from_two_uniforms_mod_one",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": "exact: each coin is (u1 + u2) mod 1, which is uniform on [0, 1); the standard rule otherwise.",
        "source": "written for the study: a 'dithered' coin that looks like a wrong coin law",
    },
    {
        "spec": "study_bugs7.correct:verification_stops_at_unconfident_draft_row",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact: gamma drafts are sent to the target but only those before the first draft row with max q < "
            "0.3 are verified, and the bonus is drawn from the middle row p(. | prefix + xs[:k]); the cut "
            "depends only on the draft rows of the emitted context."
        ),
        "source": (
            "written for the study: llama.cpp's p_min draft cut applied after the pass (looks like a bonus read"
            " from the wrong row)"
        ),
    },
    {
        "spec": "study_bugs7.correct:draft_sampler_narrower_than_request",
        "buggy": False,
        "flags": ["--logits"],
        "family": "correct",
        "mechanism": (
            "exact: the drafter samples under the request's settings with top-k capped at 8 and reports those "
            "rows; the target is processed with the request's settings."
        ),
        "source": (
            "written for the study: the consistent twin of parity:target_processed_with_draft_sampler_settings "
            "(draft and target processed differently)"
        ),
    },
    {
        "spec": "study_bugs7.correct:verify_pass_padded_with_previous_drafts",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact (stateful, resets per request): adaptive draft length k (last round's output length, capped "
            "at gamma), the pass padded to gamma tokens with last round's stale drafts; only rows 0 .. k are "
            "read, the bonus from row k."
        ),
        "source": (
            "written for the study: the padded twin of bonus:bonus_row_sees_placeholder_in_last_slot (stale "
            "tokens in the pass)"
        ),
    },
    {
        "spec": "study_bugs7.correct:generator_forked_once_per_request",
        "buggy": False,
        "flags": [],
        "family": "correct",
        "mechanism": (
            "exact (stateful, resets per request): at a request's first round a seed is drawn from the audit's "
            "rng and every random number of the request comes from the forked generator."
        ),
        "source": (
            "written for the study: the seeded twin of state:coins_from_process_wide_generator (randomness not "
            "taken from the call's rng)"
        ),
    },
]
