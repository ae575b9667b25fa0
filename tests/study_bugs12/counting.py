"""Round steps whose mistake is in the number of kept drafts or in the tokens the round emits."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import accept_mask, chain

from ._common import emit


def kept_count_via_trim_zeros(prefix, draft, target, gamma, rng):
    """n = len(np.trim_zeros(mask, 'b')) (the trailing rejections trimmed): the drafts up to the
    last accepted one are kept, rejected ones before it included, and the round ends with a draw
    from (p_n - q_n)+ (n < gamma) or the bonus from p_gamma."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    mask = accept_mask(xs, qs, ps, rng)
    n = len(np.trim_zeros(mask.astype(np.int64), "b"))  # BUG: the leading accepts, cumprod(mask).sum()
    return emit(xs, qs, ps, n, rng)


def output_overlap_with_prefix_dropped(prefix, draft, target, gamma, rng):
    """The round's output is stitched to the prefix with an overlap check: when its first token
    equals the prefix's last token (and more tokens follow) it is taken for a duplicate and dropped,
    so a token that repeats the previous one is lost whenever a round starts with it."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    out = chain(xs, qs, target_rows(prefix, target, xs), rng)
    if len(out) > 1 and out[0] == prefix[-1]:
        out = out[1:]  # BUG: a repeated token is a token; nothing overlaps
    return out
