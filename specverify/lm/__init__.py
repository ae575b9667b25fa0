"""Language models behind one interface: synthetic tables now, transformers causal LMs later.

A *table model pair* gives next-token rows for (context, position-in-round) indices:

* :class:`MarkovPair`: order-1 Markov target and draft over V tokens (context = previous token,
  V for the start); prefix-dependent, so state bugs (no KV rollback, drafting on after a
  rejection) are visible;
* :class:`PositionalPair`: rows that depend only on the position within a round, the shape of a
  verification-kernel test (vLLM's rejection-sampler tests use it).
"""

from .synthetic import MarkovPair, PositionalPair, TablePair, llm_like_logits, make_markov_pair, make_positional_pair

__all__ = ["MarkovPair", "PositionalPair", "TablePair", "make_markov_pair", "make_positional_pair", "llm_like_logits"]
