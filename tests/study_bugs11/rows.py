"""Round steps whose mistake is in the rows: which context a target row conditions on, and which
law the draft rows handed to the verifier describe."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, target_rows
from study_bugs10._common import chain

CAPTURED = 3  # query tokens of the captured verification graph


def verify_mask_diagonal_among_drafts(prefix, draft, target, gamma, rng):
    """The verification pass's attention mask lets every draft position see the committed prefix
    and its own input token but none of the drafts before it (a tree mask built as the identity
    among the draft slots): row 0 and row 1 are right, row j >= 2 (the bonus row included) is
    p(. | prefix + [x_{j-1}]) instead of p(. | prefix + xs[:j])."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = [target_rows(prefix, target, [])[0]]
    for j in range(1, gamma + 1):
        seen = [xs[j - 1]]  # BUG: position j must attend to every earlier draft, xs[:j]
        ps.append(target_rows(prefix, target, seen)[-1])
    return chain(xs, qs, ps, rng)


def draft_gumbel_noise_shared_across_positions(prefix, draft, target, gamma, rng):
    """Each draft is drawn by Gumbel-max, argmax(log q_i + g), but the noise vector g is drawn once
    per round (keyed by the request's seed, not by the position), so the drafts of a round are
    coupled: given the earlier drafts, x_i does not follow q_i, while q_i is handed to the verifier
    as its law."""
    xs, qs = [], []
    g = None
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        if g is None:
            g = rng.gumbel(size=len(q))  # BUG: each position needs its own noise vector
        with np.errstate(divide="ignore"):
            xs.append(int(np.argmax(np.log(q) + g)))
        qs.append(q)
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def draft_row_masked_to_target_support(prefix, draft, target, gamma, rng):
    """Drafts are sampled from the draft rows q_i, but the rows handed to the verifier are q_i
    restricted to the target row's support {p_i > 0} and renormalised (an allowed-token mask taken
    from the target and applied to the draft's reported row only): a draft outside the support
    reads q = 0 and passes the test, the others are tested against q_i / Z_i."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    ps = target_rows(prefix, target, xs)
    reported = []
    for i, q in enumerate(qs):
        m = q * (ps[i] > 0)  # BUG: the verifier must get the row the draft was drawn from, q itself
        reported.append(m / m.sum() if m.sum() > 0 else q)
    return chain(xs, reported, ps, rng)


def verify_output_padded_past_captured_size(prefix, draft, target, gamma, rng):
    """The verification pass runs through a graph captured for 3 query tokens (the last committed
    token and 2 drafts) and its output is padded to gamma + 1 rows by repeating its last row: rows
    0 .. 2 are right, row j >= 3 (the bonus row included) is p(. | prefix + xs[:2])."""
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    rows = target_rows(prefix, target, xs[: CAPTURED - 1])
    ps = np.concatenate([rows, np.repeat(rows[-1:], gamma + 1 - len(rows), axis=0)])  # BUG: rows past it are lost
    return chain(xs, qs, ps, rng)
