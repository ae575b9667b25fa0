"""The diagnosis class of each buggy implementation of the user-style suite, where its name differs.

``CLASS_OF[case["bug_class"]]`` is the name of the :data:`specverify.diagnosis.CLASSES` record with the
same mechanism; a ``bug_class`` not listed here is already a class name. The diagnosis study
(scripts/diagnosis_study.py) compares a verdict's diagnosis with this truth, and
tests/test_bug_records.py checks that every name here maps to a record. It lives with the suite, not
in the library: the library knows its classes, not the names a test suite gives its mutants.
"""

from __future__ import annotations

__all__ = ["CLASS_OF", "class_of"]

#: user-style suite name -> class name (where they differ)
CLASS_OF: dict[str, str] = {
    "bonus_wrong_row": "bonus_from_previous_row",
    "reused_uniform": "draft_uniform_reused_for_acceptance",
    "continue_after_reject": "continue_after_rejection",
    "shared_uniform": "same_uniform_all_positions",
    "bonus_reuses_draft_uniform": "randomness_shared_across_positions",
    "replacement_from_q_high_overlap": "replacement_from_q_when_close",
    "replacement_from_p_low_overlap": "replacement_from_p_when_far",
    "accepts_p_zero": "zero_guard_accepts",
    "position_wrong_prefix": "kv_block_wrong_prefix",
    "stale_cache_after_reject": "no_kv_rollback",
    "no_reset_new_sequence": "state_not_reset",
    "temperature_draft_only": "target_missing_temperature",
    "min_p_draft_only": "target_missing_min_p",
    "greedy_bonus_wrong_row": "bonus_from_previous_row",
    "greedy_ignored": "greedy_ignored",
    "float16_ratio": "float16_probabilities",
    "unverified_after_8_tokens": "unverified_draft_tail",
    "unverified_last_round": "last_round_unverified",
    "realign_missing_last_token": "context_misses_last_token",
    "residual_unnormalised": "residual_not_normalised",
}


def class_of(bug_class: str) -> str:
    """The diagnosis class a case's ``bug_class`` stands for."""
    return CLASS_OF.get(bug_class, bug_class)
