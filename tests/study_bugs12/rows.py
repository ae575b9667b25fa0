"""Round steps whose mistake is in the rows: the draft rows reported to the verifier (a buffer
reused for every row, a drafter that masks what it samples from and reports the unmasked row) and
the target rows of the verification pass (the drafts fed in the wrong order, a context list
aliased with the drafts)."""

from __future__ import annotations

import numpy as np
from study_bugs._util import draft_chain, sample, target_rows
from study_bugs10._common import chain


def draft_rows_alias_one_buffer(prefix, draft, target, gamma, rng):
    """The drafter writes each of its rows into one preallocated buffer and stores a reference to
    that buffer as the draft row of the token just drawn: after the loop every stored row is the
    last draft row, q_{gamma-1}, so draft i is tested (ratio and residual) with q_{gamma-1}."""
    prefix = list(prefix)
    xs, qs = [], []
    buf = None
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        if buf is None:
            buf = np.empty_like(q)
        buf[:] = q
        xs.append(sample(buf, rng))
        qs.append(buf)  # BUG: a copy of the row (buf.copy()); the buffer is overwritten next time
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def drafter_samples_its_nucleus_reports_full_row(prefix, draft, target, gamma, rng):
    """The drafter samples each draft from the nucleus of its row (the most likely ids covering 0.8
    of the mass, renormalised), but the row reported as q is the full row."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        order = np.argsort(-q, kind="stable")
        before = np.cumsum(q[order]) - q[order]
        w = np.zeros_like(q)
        keep = order[before < 0.8]
        w[keep] = q[keep]
        xs.append(sample(w, rng))
        qs.append(q)  # BUG: the law the draft was drawn from is w / w.sum()
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def verify_pass_fed_tree_path_unreversed(prefix, draft, target, gamma, rng):
    """The drafts are kept as a linked path (each node points to its parent) and the verification
    pass is fed the path collected from the leaf up, i.e. the drafts in reverse order: row 0 is
    right, row j >= 1 (the bonus row included) conditions on xs[::-1][:j] instead of xs[:j]; the
    ratio, the residual and the emitted tokens use the drafts in their order."""
    prefix = list(prefix)
    xs, qs = draft_chain(prefix, draft, gamma, rng)
    parent = {i: i - 1 for i in range(gamma)}
    path, node = [], gamma - 1
    while node >= 0:
        path.append(xs[node])
        node = parent[node]
    ps = target_rows(prefix, target, path)  # BUG: the path root first (path[::-1])
    return chain(xs, qs, ps, rng)


def verify_context_aliased_with_draft_list(prefix, draft, target, gamma, rng):
    """The drafting loop appends each draft to its context list, which is the request's prefix list
    itself (no copy), and that list is then passed to the verification pass as the committed
    prefix: the target's row j is p(. | prefix + xs + xs[:j]) instead of p(. | prefix + xs[:j]);
    the drafter's rows are right."""
    prefix = list(prefix)
    start = len(prefix)
    ctx = prefix  # BUG: the drafter's context must be a copy (list(prefix))
    qs = []
    for _ in range(gamma):
        q = np.asarray(draft(list(ctx)), dtype=np.float64)
        ctx.append(sample(q, rng))
        qs.append(q)
    xs = ctx[start:]
    return chain(xs, qs, target_rows(prefix, target, xs), rng)


def draft_row_reported_sharpened(prefix, draft, target, gamma, rng):
    """Each draft is drawn from its row q_i, but the row reported to the verifier is q_i squared
    and renormalised (the row the drafter's temperature-0.5 logprob path produces): the ratio and
    the residual use q_i^2 / sum q_i^2 instead of q_i."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs), dtype=np.float64)
        xs.append(sample(q, rng))
        qs.append(q**2 / np.sum(q**2))  # BUG: the row the draft was drawn from, q
    return chain(xs, qs, target_rows(prefix, target, xs), rng)
