"""Round steppers that keep state between calls (a KV-cache-like context, memoised rows).

Each module-level instance is the callable under audit, e.g. ``user_impls.stateful:verified_context``.
The rounds of one sequence arrive as consecutive calls whose prefix is the previous prefix plus
the tokens emitted; a new sequence starts with a shorter, unrelated prefix.
"""

import numpy as np

from ._choice import choice


def _residual(p, q):
    r = np.maximum(p - q, 0.0)
    return r / r.sum() if r.sum() > 0 else p


# ----------------------------------------------------------------------------- correct


class CachedRowsStepper:
    """Correct: memoises draft and target rows keyed on the full prefix tuple, cleared when a new sequence starts."""

    def __init__(self):
        self.q_rows, self.p_rows, self.last = {}, {}, None

    def _draft_row(self, draft, ctx):
        key = tuple(ctx)
        if key not in self.q_rows:
            self.q_rows[key] = np.asarray(draft(list(ctx)))
        return self.q_rows[key]

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if self.last is None or prefix[: len(self.last)] != self.last or len(prefix) <= len(self.last):
            self.q_rows.clear()
            self.p_rows.clear()
        self.last = prefix
        xs, qs = [], []
        for _ in range(gamma):
            qs.append(self._draft_row(draft, prefix + xs))
            xs.append(choice(rng, len(qs[-1]), qs[-1]))
        keys = [tuple(prefix + xs[:j]) for j in range(gamma + 1)]
        if not all(k in self.p_rows for k in keys):
            self.p_rows.update(zip(keys, np.asarray(target(prefix, xs))))
        P = [self.p_rows[k] for k in keys]
        for j, x in enumerate(xs):
            if rng.random() >= P[j][x] / qs[j][x]:
                return xs[:j] + [choice(rng, len(P[j]), _residual(P[j], qs[j]))]
        return xs + [choice(rng, len(P[gamma]), P[gamma])]


class VerifiedContextStepper:
    """Correct: keeps its own verified context like a KV cache, appends drafts, rolls rejected ones back."""

    def __init__(self):
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        if self.ctx != list(prefix):  # not the continuation we emitted: a new sequence
            self.ctx = list(prefix)
        n = len(self.ctx)
        qs = []
        for _ in range(gamma):
            qs.append(np.asarray(draft(self.ctx)))
            self.ctx.append(choice(rng, len(qs[-1]), qs[-1]))
        xs = self.ctx[n:]
        P = np.asarray(target(self.ctx[:n], xs))
        for j, x in enumerate(xs):
            if rng.random() >= P[j, x] / qs[j][x]:
                del self.ctx[n + j :]  # roll back the rejected drafts
                self.ctx.append(choice(rng, P.shape[1], _residual(P[j], qs[j])))
                return self.ctx[n:]
        self.ctx.append(choice(rng, P.shape[1], P[gamma]))
        return self.ctx[n:]


class PositionDraftCacheStepper:
    """Correct (unusual): caches draft rows by absolute position within a sequence (rows drawn after a rejected
    draft go stale and are reused) but drafts and verifies with the same rows, so it stays lossless.
    """

    def __init__(self):
        self.q_by_pos, self.last_len = {}, 0

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        n = len(prefix)
        if n <= self.last_len:  # a new sequence
            self.q_by_pos.clear()
        self.last_len = n
        xs, qs = [], []
        for j in range(gamma):
            if n + j not in self.q_by_pos:
                self.q_by_pos[n + j] = np.asarray(draft(prefix + xs))
            qs.append(self.q_by_pos[n + j])
            xs.append(choice(rng, len(qs[-1]), qs[-1]))
        P = np.asarray(target(prefix, xs))
        for j, x in enumerate(xs):
            if rng.random() >= P[j, x] / qs[j][x]:
                return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
        return xs + [choice(rng, P.shape[1], P[gamma])]


# ----------------------------------------------------------------------------- buggy


class StaleRollbackStepper:
    """Bug: on a rejection it rolls its context back to the accepted length + 1 but leaves the rejected draft in
    the slot of the replacement, so the next round conditions on it.
    """

    def __init__(self):
        self.ctx, self.expected_len = [], -1

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if len(prefix) != self.expected_len:  # new sequence
            self.ctx = prefix
        ctx = self.ctx + prefix[len(self.ctx) :]  # trust the cached context
        xs, qs = [], []
        for _ in range(gamma):
            qs.append(np.asarray(draft(ctx + xs)))
            xs.append(choice(rng, len(qs[-1]), qs[-1]))
        P = np.asarray(target(ctx, xs))
        for j, x in enumerate(xs):
            if rng.random() >= P[j, x] / qs[j][x]:
                y = choice(rng, P.shape[1], _residual(P[j], qs[j]))
                self.ctx = ctx + xs[: j + 1]  # roll back to the new length (slot j still holds the draft)
                self.expected_len = len(prefix) + j + 1
                return xs[:j] + [y]
        b = choice(rng, P.shape[1], P[gamma])
        self.ctx, self.expected_len = ctx + xs + [b], len(prefix) + gamma + 1
        return xs + [b]


class PositionTargetCacheStepper:
    """Bug: caches target rows keyed on absolute position only, so rows computed for rejected drafts or another
    sequence are reused.
    """

    def __init__(self):
        self.p_by_pos = {}

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        n = len(prefix)
        xs, qs = [], []
        for _ in range(gamma):
            qs.append(np.asarray(draft(prefix + xs)))
            xs.append(choice(rng, len(qs[-1]), qs[-1]))
        if any(n + j not in self.p_by_pos for j in range(gamma + 1)):
            for j, row in enumerate(np.asarray(target(prefix, xs))):
                self.p_by_pos.setdefault(n + j, row)
        P = [self.p_by_pos[n + j] for j in range(gamma + 1)]
        for j, x in enumerate(xs):
            if rng.random() >= P[j][x] / qs[j][x]:
                return xs[:j] + [choice(rng, len(P[j]), _residual(P[j], qs[j]))]
        return xs + [choice(rng, len(P[gamma]), P[gamma])]


class NoResetStepper:
    """Bug: never resets its context on a new sequence (only when its 2048-token cache is full), so a new
    sequence is decoded as a continuation of the previous one.
    """

    MAX_LEN = 2048  # KV cache capacity

    def __init__(self):
        self.ctx = []

    def __call__(self, prefix, draft, target, gamma, rng):
        if len(self.ctx) >= self.MAX_LEN:  # cache full: start over
            self.ctx = []
        ctx = self.ctx + list(prefix)[len(self.ctx) :]  # assumes prefix extends what we have
        xs, qs = [], []
        for _ in range(gamma):
            qs.append(np.asarray(draft(ctx + xs)))
            xs.append(choice(rng, len(qs[-1]), qs[-1]))
        P = np.asarray(target(ctx, xs))
        out = xs + [choice(rng, P.shape[1], P[gamma])]
        for j, x in enumerate(xs):
            if rng.random() >= P[j, x] / qs[j][x]:
                out = xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
                break
        self.ctx = ctx + out
        return out


class RecycledDraftsStepper:
    """Bug: drafts left over after a rejection (sampled after the rejected token) are proposed again next round,
    scored with the new context's q.
    """

    def __init__(self):
        self.spare, self.expected_len = [], -1

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if len(prefix) != self.expected_len:
            self.spare = []
        xs, qs = [], []
        for _ in range(gamma):
            q = np.asarray(draft(prefix + xs))
            xs.append(self.spare.pop(0) if self.spare else choice(rng, len(q), q))
            qs.append(q)
        P = np.asarray(target(prefix, xs))
        for j, x in enumerate(xs):
            if not rng.random() < P[j, x] / qs[j][x]:
                self.spare = xs[j + 1 :]  # still good drafts, do not waste them
                self.expected_len = len(prefix) + j + 1
                return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
        self.spare, self.expected_len = [], len(prefix) + gamma + 1
        return xs + [choice(rng, P.shape[1], P[gamma])]


class FinishedOnDraftedStopStepper:
    """Bug: a request's finished flag is set when a round *drafts* the stop id (the last id), kept or
    not; the next round of that request takes the finish path and emits the stop id alone, without
    drafting or verifying. Written after set 11's blind bug (tests/study_bugs11/state.py:
    drafted_stop_marks_request_finished), which the diagnosis named as a KV-block prefix error; the
    family is a stop state computed from the drafts rather than from the emitted tokens.
    """

    def __init__(self):
        self.finished, self.expected_len = False, -1

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        stop = len(draft(prefix)) - 1
        if len(prefix) != self.expected_len:  # a new request
            self.finished = False
        if self.finished:
            self.finished, out = False, [stop]
        else:
            xs, qs = [], []
            for _ in range(gamma):
                qs.append(np.asarray(draft(prefix + xs)))
                xs.append(choice(rng, len(qs[-1]), qs[-1]))
            P = np.asarray(target(prefix, xs))
            out = xs + [choice(rng, P.shape[1], P[gamma])]
            for j, x in enumerate(xs):
                if rng.random() >= P[j, x] / qs[j][x]:
                    out = xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
                    break
            self.finished = stop in xs  # BUG: only an emitted stop id finishes a request
        self.expected_len = len(prefix) + len(out)
        return out


class TrustAfterRoundStepper:
    """Bug: an adaptive shortcut keeps a per-request flag set by the previous round (``after``:
    "full", every draft kept, a hot streak; or "rejection"); while it is set, the next round keeps
    its first draft without the test (``scope`` "first") or every draft ("every"). Modelled on
    alibaba/rtp-llm#1295 (a fast path OR-ed with the test) as state between rounds; set 12's blind
    bug (tests/study_bugs12/state.py: first_draft_trusted_after_full_acceptance) is one member."""

    def __init__(self, after="full", scope="first"):
        self.after, self.scope = after, scope
        self.flag, self.expected_len = False, -1

    def __call__(self, prefix, draft, target, gamma, rng):
        prefix = list(prefix)
        if len(prefix) != self.expected_len:  # a new request
            self.flag = False
        xs, qs = [], []
        for _ in range(gamma):
            qs.append(np.asarray(draft(prefix + xs)))
            xs.append(choice(rng, len(qs[-1]), qs[-1]))
        P = np.asarray(target(prefix, xs))
        out, rejected = xs + [choice(rng, P.shape[1], P[gamma])], False
        for j, x in enumerate(xs):
            trusted = self.flag and (j == 0 or self.scope == "every")  # BUG: the test skipped on a flag
            if not trusted and rng.random() >= P[j, x] / qs[j][x]:
                out, rejected = xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))], True
                break
        self.flag = rejected if self.after == "rejection" else not rejected
        self.expected_len = len(prefix) + len(out)
        return out


cached_rows = CachedRowsStepper()
verified_context = VerifiedContextStepper()
position_draft_cache = PositionDraftCacheStepper()
stale_rollback = StaleRollbackStepper()
position_target_cache = PositionTargetCacheStepper()
no_reset = NoResetStepper()
recycled_drafts = RecycledDraftsStepper()
finished_on_drafted_stop = FinishedOnDraftedStopStepper()
first_trusted_after_full_round = TrustAfterRoundStepper("full", "first")
every_trusted_after_rejection = TrustAfterRoundStepper("rejection", "every")
