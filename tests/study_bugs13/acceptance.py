"""Round steps whose mistake is in the acceptance test: a gather index clamped one id short of the
vocabulary, ratios looked up in a dict keyed by token id, and a relaxed test against the target's
row mixed with the drafter's."""

from __future__ import annotations

from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import chain, ratio


def ratio_gathered_at_index_clamped_below_vocab(prefix, draft, target, gamma, rng):
    """The test's gather index is clamped to [0, V - 2] (the bound of a kernel that reserves the
    last lane): a drafted last id (EOS) is accepted with min(1, p(V - 2) / q(V - 2)) instead of its
    own ratio; other ids, the residual and the bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        j = min(x, len(p) - 2)  # BUG: len(p) - 1, the last id of the vocabulary
        return u < ratio(p, q, j)

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)


def ratio_looked_up_in_dict_keyed_by_token(prefix, draft, target, gamma, rng):
    """The block's (p(x), q(x)) pairs are gathered into a dict keyed by the drafted id, so a draft
    whose id recurs later in the block is tested with the later position's p and q; the residual
    and the bonus use the right rows."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    pairs = {x: (ps[i][x], qs[i][x]) for i, x in enumerate(xs)}  # BUG: keyed by position, not by id

    def accept(i, x, p, q, u):
        px, qx = pairs[x]
        return u < min(1.0, px / qx)

    return chain(xs, qs, ps, rng, accept=accept)


def ratio_against_target_row_mixed_with_draft_row(prefix, draft, target, gamma, rng):
    """A relaxed ('soft target') test left on the exact path: a draft is accepted with
    min(1, p'(x) / q(x)) where p' = (p + q) / 2 mixes the target's row with the drafter's, i.e. with
    probability 1/2 + p(x) / (2 q(x)) when p(x) < q(x), instead of min(1, p(x) / q(x)); the
    replacement (p - q)+ and the bonus are standard."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)

    def accept(i, x, p, q, u):
        return u < ratio(0.5 * (p + q), q, x)  # BUG: ratio(p, q, x), the target's own row

    return chain(xs, qs, target_rows(prefix, target, xs), rng, accept=accept)
