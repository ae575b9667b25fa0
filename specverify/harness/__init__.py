"""The harness: what an implementation under audit is shown and how it is driven.

* records: :class:`Generation` (what was emitted, with each token's law row), :class:`RoundOutput`;
* context models: :class:`ContextPair` (order-k, position-dependent, hashed to a table; kinds
  ``low``, ``high`` and ``greedy``) and :class:`ModelPair` (two tiny transformers models), beside
  the order-1 and positional pairs of :mod:`specverify.lm`;
* drivers: :func:`run_sampler` (vectorised table samplers), :func:`run_round_step` (a round step
  called with whole prefixes, consecutive rounds per sequence), :func:`run_generator`;
* guarded calls: :func:`call_with_timeout`, :func:`run_guarded`; calls isolated in a fresh fork
  (a state kept across calls stays behind, an ended process is a finding): :func:`call_in_fork`;
  ids as implementations return them, validated: :func:`as_token_ids`;
* the vectorised chain engine that drives table samplers and users' kernels alike:
  :class:`ChainSampler` (its hooks are what the bug catalogue overrides).
"""

from ._contexts import PAIR_KINDS, ContextPair, greedy_raw_run, history_counts, make_context_pair
from ._engine import ChainSampler, Uniforms, textbook_inverse_cdf
from ._ids import as_token_ids
from ._isolation import call_in_fork
from ._models import ModelPair, make_model_pair
from ._records import PAD, Generation, RoundOutput, concat_generations
from ._sequences import MODES, SequenceView, run_generator, run_round_step, settings_arguments
from ._tables import run_sampler
from ._watchdog import call_with_timeout, run_guarded

__all__ = [
    "Generation",
    "RoundOutput",
    "concat_generations",
    "ContextPair",
    "PAIR_KINDS",
    "make_context_pair",
    "greedy_raw_run",
    "ModelPair",
    "make_model_pair",
    "history_counts",
    "SequenceView",
    "MODES",
    "run_round_step",
    "settings_arguments",
    "run_generator",
    "run_sampler",
    "call_in_fork",
    "call_with_timeout",
    "run_guarded",
    "as_token_ids",
    "PAD",
    "ChainSampler",
    "Uniforms",
    "textbook_inverse_cdf",
]
