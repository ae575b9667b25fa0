"""Round steps in plain numpy, ``step(prefix, draft, target, gamma, rng) -> list[int]``.

Written the way users write them: each one drafts ``gamma`` tokens from ``draft``, verifies them
with one ``target`` call and returns the tokens emitted this round. Some are exactly lossless in
unusual ways, the others carry one bug each (named in the docstring).
"""

import numpy as np

from ._choice import choice


def _draft_tokens(prefix, draft, gamma, rng):
    """Draft gamma tokens one after the other, each from q(. | prefix + drafts so far)."""
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(list(prefix) + xs), dtype=np.float64)
        x = choice(rng, len(q), q)
        xs.append(x)
        qs.append(q)
    return xs, qs


def _residual(p, q):
    r = np.maximum(p - q, 0.0)
    s = r.sum()
    return r / s if s > 0 else p


# ----------------------------------------------------------------------------- correct


def step_correct(prefix, draft, target, gamma, rng):
    """Correct: the textbook rule (accept if u < p/q, residual (p - q)+, bonus from p_gamma)."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs), dtype=np.float64)
    out = []
    for j, x in enumerate(xs):
        p, q = P[j], qs[j]
        if rng.random() < p[x] / q[x]:
            out.append(x)
            continue
        r = np.maximum(p - q, 0.0)
        r = r / r.sum() if r.sum() > 0 else p
        out.append(choice(rng, len(r), r))
        return out
    out.append(choice(rng, P.shape[1], P[gamma]))
    return out


def _icdf(w, u):
    c = np.cumsum(w)
    return int(min(np.searchsorted(c, u * c[-1], side="right"), len(w) - 1))


def step_inverse_cdf(prefix, draft, target, gamma, rng):
    """Correct: samples everything with its own inverse CDF (cumsum + searchsorted), residual left unnormalised."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs))
        xs.append(_icdf(q, rng.random()))
        qs.append(q)
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if rng.random() * qs[j][x] < P[j][x]:
            continue
        r = np.clip(P[j] - qs[j], 0, None)
        return xs[:j] + [_icdf(r if r.sum() > 0 else P[j], rng.random())]
    return xs + [_icdf(P[gamma], rng.random())]


def _gumbel_pick(w, rng):
    with np.errstate(divide="ignore"):
        return int(np.argmax(np.log(w) + rng.gumbel(size=len(w))))


def step_gumbel(prefix, draft, target, gamma, rng):
    """Correct: every draw is Gumbel-max (argmax of log w + Gumbel noise)."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        qs.append(np.asarray(draft(prefix + xs)))
        xs.append(_gumbel_pick(qs[-1], rng))
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if rng.uniform() >= P[j, x] / qs[j][x]:
            res = np.maximum(P[j] - qs[j], 0)
            return xs[:j] + [_gumbel_pick(res if res.any() else P[j], rng)]
    return xs + [_gumbel_pick(P[-1], rng)]


def step_vectorised(prefix, draft, target, gamma, rng):
    """Correct: draws all acceptance uniforms at once and finds the first failure with argmax."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    Q = np.stack(qs)
    idx = np.arange(gamma)
    ok = rng.random(gamma) < P[idx, xs] / Q[idx, xs]
    if ok.all():
        return xs + [choice(rng, P.shape[1], P[gamma])]
    k = int(np.argmax(~ok))
    return xs[:k] + [choice(rng, P.shape[1], _residual(P[k], Q[k]))]


def step_residual_by_rejection(prefix, draft, target, gamma, rng):
    """Correct: samples the residual by rejection: y ~ p, kept w.p. max(0, p(y) - q(y)) / p(y)."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        p, q = P[j], qs[j]
        if rng.random() < p[x] / q[x]:
            continue
        if not np.any(p > q):
            return xs[:j] + [choice(rng, len(p), p)]
        while True:
            y = choice(rng, len(p), p)
            if rng.random() * p[y] < p[y] - q[y]:
                return xs[:j] + [y]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def _race(w, rng):
    with np.errstate(divide="ignore"):
        return int(np.argmin(rng.exponential(size=len(w)) / w))


def step_exponential_race(prefix, draft, target, gamma, rng):
    """Correct: samples with an exponential race, argmin E_i / w_i with E_i ~ Exp(1)."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        qs.append(np.asarray(draft(prefix + xs)))
        xs.append(_race(qs[-1], rng))
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if not rng.random() < P[j][x] / qs[j][x]:
            r = np.maximum(P[j] - qs[j], 0)
            return xs[:j] + [_race(r if r.sum() > 0 else P[j], rng)]
    return xs + [_race(P[gamma], rng)]


def step_kv_block_correct(prefix, draft, target, gamma, rng):
    """Correct: at a KV block boundary (len % 16 == 15) re-sends the last token as part of the proposal and drops
    its row.
    """
    prefix = list(prefix)
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    if len(prefix) % 16 == 15:
        P = np.asarray(target(prefix[:-1], [prefix[-1]] + xs))[1:]
    else:
        P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_no_bonus(prefix, draft, target, gamma, rng):
    """Correct (unusual): never emits the bonus token; when all drafts pass it just returns them (still lossless)."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs


def step_same_row_drafts(prefix, draft, target, gamma, rng):
    """Correct (unusual): drafts all gamma tokens from the first draft row and uses that same row in every ratio."""
    q = np.asarray(draft(list(prefix)))
    xs = [int(t) for t in rng.choice(len(q), size=gamma, p=q)]
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / q[x]:
            return xs[:j] + [choice(rng, len(q), _residual(P[j], q))]
    return xs + [choice(rng, len(q), P[gamma])]


def step_mixture_draft(prefix, draft, target, gamma, rng):
    """Correct (unusual): proposes from 0.7 q + 0.3 uniform and uses that mixture consistently as the draft law."""
    prefix = list(prefix)
    xs, qs = [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs))
        q = 0.7 * q + 0.3 / len(q)
        xs.append(choice(rng, len(q), q))
        qs.append(q)
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


# ----------------------------------------------------------------------------- buggy


def step_residual_from_p(prefix, draft, target, gamma, rng):
    """Bug: the replacement after a rejection is drawn from p instead of the residual (p - q)+."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        return xs[:j] + [choice(rng, P.shape[1], P[j])]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_residual_from_q(prefix, draft, target, gamma, rng):
    """Bug: the replacement after a rejection is drawn from the draft's q (a fresh draft sample)."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        return xs[:j] + [choice(rng, len(qs[j]), qs[j])]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_residual_wrong_sign(prefix, draft, target, gamma, rng):
    """Bug: the residual clips the wrong sign, max(0, q - p) instead of max(0, p - q)."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        r = np.maximum(qs[j] - P[j], 0)
        r = r / r.sum() if r.sum() > 0 else P[j]
        return xs[:j] + [choice(rng, len(r), r)]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_residual_abs(prefix, draft, target, gamma, rng):
    """Bug: the residual uses |p - q| (never clipped), so tokens where q > p get replacement mass."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        r = np.abs(P[j] - qs[j])
        r = r / r.sum() if r.sum() > 0 else P[j]
        return xs[:j] + [choice(rng, len(r), r)]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_reused_uniform(prefix, draft, target, gamma, rng):
    """Bug: accepts when u <= p/q with the same uniform u that drew the draft token by inverse CDF."""
    prefix = list(prefix)
    xs, qs, us = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs))
        u = rng.random()
        xs.append(_icdf(q, u))
        qs.append(q)
        us.append(u)
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if us[j] <= P[j][x] / qs[j][x]:
            continue
        return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_bonus_reuses_draft_uniform(prefix, draft, target, gamma, rng):
    """Bug: the bonus token is drawn by inverse CDF with the uniform that drew the last draft (one draw
    "saved"). Each token's own law is right; the bonus depends on the last draft (flashinfer#424's class)."""
    prefix = list(prefix)
    xs, qs, us = [], [], []
    for _ in range(gamma):
        q = np.asarray(draft(prefix + xs))
        us.append(rng.random())
        xs.append(_icdf(q, us[-1]))
        qs.append(q)
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [_icdf(P[gamma], us[-1])]


def step_bonus_wrong_row(prefix, draft, target, gamma, rng):
    """Bug: the bonus token is drawn from row gamma - 1 (the last draft's row) instead of row gamma."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma - 1])]


def step_bonus_from_q(prefix, draft, target, gamma, rng):
    """Bug: when every draft is accepted the bonus is one more draft sample from q instead of p_gamma."""
    xs, qs = _draft_tokens(prefix, draft, gamma + 1, rng)  # drafts one extra token "for the bonus"
    qs = qs[:gamma]
    P = np.asarray(target(list(prefix), xs[:gamma]))
    for j in range(gamma):
        if rng.random() >= P[j][xs[j]] / qs[j][xs[j]]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs  # the extra draft token serves as the bonus


def step_inverted_ratio(prefix, draft, target, gamma, rng):
    """Bug: accepts with probability min(1, q/p) (the ratio is inverted)."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        ratio = qs[j][x] / P[j][x] if P[j][x] > 0 else 0.0
        if rng.random() < min(1.0, ratio):
            continue
        return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_continue_after_reject(prefix, draft, target, gamma, rng):
    """Bug: after a rejection it emits the replacement but keeps verifying the remaining drafts."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    out = []
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            out.append(x)
        else:
            out.append(choice(rng, P.shape[1], _residual(P[j], qs[j])))
    out.append(choice(rng, P.shape[1], P[gamma]))
    return out


def step_shared_uniform(prefix, draft, target, gamma, rng):
    """Bug: one acceptance uniform per round, shared by every position."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    u = rng.random()
    for j, x in enumerate(xs):
        if u >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_drafts_unconditioned(prefix, draft, target, gamma, rng):
    """Bug: all drafts are sampled from q(. | prefix) but each ratio uses the properly conditioned row q(. |
    prefix + drafts[:j]).
    """
    prefix = list(prefix)
    q0 = np.asarray(draft(prefix))
    xs = [int(t) for t in rng.choice(len(q0), size=gamma, p=q0)]
    P = np.asarray(target(prefix, xs))
    for j, x in enumerate(xs):
        q = np.asarray(draft(prefix + xs[:j]))
        if rng.random() >= P[j][x] / q[x]:
            return xs[:j] + [choice(rng, len(q), _residual(P[j], q))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_residual_from_q_when_close(prefix, draft, target, gamma, rng):
    """Bug (high overlap): when the residual mass is below 0.1 ("draft ~ target") the replacement is drawn from q."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        r = np.maximum(P[j] - qs[j], 0)
        if r.sum() < 0.1:  # numerically unstable residual: fall back to the draft
            return xs[:j] + [choice(rng, len(r), qs[j])]
        return xs[:j] + [choice(rng, len(r), r / r.sum())]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_greedy_bonus(prefix, draft, target, gamma, rng):
    """Bug (high overlap): when every draft is accepted the bonus is argmax p_gamma instead of a sample."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [int(np.argmax(P[gamma]))]


def step_zero_guard_accepts(prefix, draft, target, gamma, rng):
    """Bug (low overlap): a division guard treats p(x) == 0 as ratio 1, so drafts the target forbids are accepted."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        ratio = P[j][x] / qs[j][x] if P[j][x] > 0 else 1.0
        if rng.random() < ratio:
            continue
        return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_residual_from_p_when_far(prefix, draft, target, gamma, rng):
    """Bug (low overlap): when the residual mass exceeds 0.5 ("draft is useless") the replacement is drawn from p."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        r = np.maximum(P[j] - qs[j], 0)
        w = P[j] if r.sum() > 0.5 else r / r.sum()
        return xs[:j] + [choice(rng, len(w), w)]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_kv_block_bug(prefix, draft, target, gamma, rng):
    """Bug (position): at a KV block boundary (len % 16 == 15) it verifies against target(prefix[:-1], drafts),
    dropping the last token.
    """
    prefix = list(prefix)
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    ctx = prefix[:-1] if len(prefix) % 16 == 15 else prefix
    P = np.asarray(target(ctx, xs))
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return xs[:j] + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_residual_unnormalised(prefix, draft, target, gamma, rng):
    """Bug: the residual (p - q)+ is never renormalised and its CDF is searched with a uniform on [0, 1), so the
    leftover mass lands on the last token.
    """
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs))
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            continue
        c = np.cumsum(np.maximum(P[j] - qs[j], 0))
        return xs[:j] + [int(min(np.searchsorted(c, rng.random(), side="right"), len(c) - 1))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def step_rotating_cache_256(prefix, draft, target, gamma, rng):
    """Bug (a rotating KV cache of 256 slots, the mlx-lm max-kv-size family; ml-explore/mlx-lm#846 is
    its rollback side): once the context passes 256 tokens the verification pass sees only the last
    256, so the target's rows come from a shorter (wrong) prefix. Exact on outputs under 256 tokens."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    window = list(prefix)[-256:]
    P = np.asarray(target(window, xs), dtype=np.float64)
    out = []
    for j, x in enumerate(xs):
        if rng.random() < P[j][x] / qs[j][x]:
            out.append(x)
            continue
        r = np.maximum(P[j] - qs[j], 0.0)
        out.append(choice(rng, len(r), r / r.sum()) if r.sum() > 0 else choice(rng, len(r), P[j]))
        return out
    out.append(choice(rng, P.shape[1], P[gamma]))
    return out


def step_reported_row_sharpened(prefix, draft, target, gamma, rng):
    """Bug (huggingface/transformers#32867: q reported from another law than the one sampled;
    vllm-project/vllm-ascend#6685): drafts come from q, but the row kept for the verifier is
    q^2 / Z (a temperature 0.5 applied to the stored copy), so the ratio and the residual read it."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    qs = [q**2 / (q**2).sum() for q in qs]  # BUG: the sampled q itself
    P = np.asarray(target(list(prefix), xs), dtype=np.float64)
    for j, x in enumerate(xs):
        p, q = P[j], qs[j]
        if rng.random() >= p[x] / q[x]:
            return xs[:j] + [choice(rng, len(p), _residual(p, q))]
    return xs + [choice(rng, P.shape[1], P[gamma])]


def _verify(xs, qs, P, rng):
    out = []
    for j, x in enumerate(xs):
        if rng.random() >= P[j][x] / qs[j][x]:
            return out + [choice(rng, len(P[j]), _residual(P[j], qs[j]))]
        out.append(x)
    return out + [choice(rng, P.shape[1], P[len(xs)])]


def step_context_holds_the_drafts(prefix, draft, target, gamma, rng):
    """Bug (the context-doubling class of ml-explore/mlx-lm#1175): the drafting loop appends each
    draft to its context list, and that list, not the committed prefix, goes to the verification
    pass, which appends the drafts again: row j reads prefix + drafts + drafts[:j]."""
    ctx, xs, qs = list(prefix), [], []
    for _ in range(gamma):
        q = np.asarray(draft(ctx), dtype=np.float64)
        xs.append(choice(rng, len(q), q))
        qs.append(q)
        ctx.append(xs[-1])
    P = np.asarray(target(ctx, xs), dtype=np.float64)  # BUG: target(list(prefix), xs)
    return _verify(xs, qs, P, rng)


def step_ratio_index_clamped_below_the_last_id(prefix, draft, target, gamma, rng):
    """Bug (set 13's blind acceptance:ratio_gathered_at_index_clamped_below_vocab, a gather index
    clamped to [0, V - 2]): a drafted last id is tested with the ratio of id V - 2. The last id is
    the stop unit's stop id, but every unit fails: it is no stop handling."""
    xs, qs = _draft_tokens(prefix, draft, gamma, rng)
    P = np.asarray(target(list(prefix), xs), dtype=np.float64)
    out = []
    for j, x in enumerate(xs):
        i = min(x, P.shape[1] - 2)  # BUG: x itself
        if rng.random() >= P[j][i] / qs[j][i]:
            return out + [choice(rng, P.shape[1], _residual(P[j], qs[j]))]
        out.append(x)
    return out + [choice(rng, P.shape[1], P[gamma])]
