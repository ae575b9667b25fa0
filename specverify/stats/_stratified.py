"""White-box stratified tests of a verification round, when the auditor sees the round.

With draft token x ~ q and target row p at a position, an exact full-rule sampler satisfies:

* the acceptance indicator is Bernoulli(beta), beta = sum_x min(p, q)         (exact binomial test)
  and, when the auditor knows the draft token x, Bernoulli(min(1, p(x) / q(x))) given x
* draft tokens drawn by the implementation itself follow q
* given a rejection, the rejected draft and its replacement are independent, and what follows a
  draft (acceptance, replacement) depends on the draft only through its laws, so it repeats after
  a repeated draft no more often than chance (an e-process)
* an accepted token has law min(p, q) / beta
* a replacement after a rejection has law (p - q)+ / (1 - beta)
* a bonus token has law p

Each stratum is tested against its own exact law, so a failure says *where* the bug is (the
acceptance test, the residual, or the bonus), not only that the output is wrong.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ._gof import pool_cells, tv_interval
from ._multiple import holm
from ._results import TV_INTERVAL_DELTA, Cell, GofResult
from ._stream import StreamLaw, binned_stream_test, default_stream_test

#: the most strata :func:`whitebox_round_tests` returns with drafts known (an audit plans for them)
WHITEBOX_STRATA_WITH_DRAFTS = 7

__all__ = [
    "StratumResult",
    "stratified_position_tests",
    "whitebox_round_tests",
    "acceptance_given_draft_test",
    "replacement_independence_test",
    "draft_repeat_eprocess",
]


@dataclasses.dataclass
class StratumResult:
    stratum: str
    result: GofResult
    adjusted_pvalue: float = float("nan")
    family: str = ""  # what the stratum tests, without its position ('' : the stratum's name is the family)

    def __post_init__(self) -> None:
        self.family = self.family or self.stratum


def _law_test(name: str, law_row: ArrayLike, tokens: np.ndarray, n_cells: int = 16) -> StratumResult | None:
    law_row = np.asarray(law_row, dtype=float)
    if law_row.sum() <= 0:
        return None
    law = StreamLaw((law_row / law_row.sum())[None, :])
    rows = np.zeros(len(tokens), dtype=np.int64)
    res = binned_stream_test(law, tokens, rows, kind="sorted_mass", n_cells=n_cells)
    res.test = f"{name} ({res.test})"
    return StratumResult(name, res)


def _acceptance_binomial(p: np.ndarray, q: np.ndarray, k: int, reached: int) -> GofResult:
    """Exact binomial test of k acceptances in ``reached`` rounds against beta = sum min(p, q)."""
    beta = float(np.minimum(p, q).sum())
    from scipy import stats

    bt = stats.binomtest(k, reached, beta)
    ci = bt.proportion_ci(confidence_level=1 - TV_INTERVAL_DELTA)
    # TV of two Bernoulli laws is |rate - beta|: map the rate's interval onto that distance
    lo, hi = float(ci.low) - beta, float(ci.high) - beta
    return GofResult(
        test="exact-binomial",
        statistic=float(k),
        pvalue=float(bt.pvalue),
        df=1,
        n=reached,
        cells=2,
        tv_estimate=abs(k / reached - beta),
        tv_interval=(max(0.0, lo, -hi), max(abs(lo), abs(hi))),
        worst_cells=[],
        note=f"observed rate {k / reached:.4f}, theory {beta:.4f}",
    )


def stratified_position_tests(
    p: ArrayLike,
    q: ArrayLike,
    reached: int,
    accepted: ArrayLike,
    emitted: ArrayLike,
    *,
    is_bonus: bool = False,
) -> list[StratumResult]:
    """Tests for one position over the rounds that reached it.

    p, q: the position's target and draft rows [V] (q unused for the bonus position);
    reached: how many rounds reached the position; accepted [n] bool; emitted [n] token ids.
    """
    p = np.asarray(p, dtype=float)
    emitted = np.asarray(emitted, dtype=np.int64)
    out: list[StratumResult] = []
    if is_bonus:
        r = _law_test("bonus tokens ~ p", p, emitted)
        return [r] if r else []
    q = np.asarray(q, dtype=float)
    accepted = np.asarray(accepted, dtype=bool)
    k = int(accepted.sum())
    if reached:
        out.append(StratumResult("acceptance ~ Bernoulli(sum min(p, q))", _acceptance_binomial(p, q, k, int(reached))))
    r = _law_test("accepted tokens ~ min(p, q) / beta", np.minimum(p, q), emitted[accepted])
    if r and k:
        out.append(r)
    r = _law_test("replacements ~ (p - q)+ / (1 - beta)", np.maximum(p - q, 0), emitted[~accepted])
    if r and (~accepted).any():
        out.append(r)
    adj = holm([s.result.pvalue for s in out])
    for s, a in zip(out, adj):
        s.adjusted_pvalue = float(a)
    return out


def _chernoff_tail(r: np.ndarray, s: float) -> float:
    """Chernoff bound on P(S >= s) for S = sum_i (A_i - r_i), A_i ~ Bernoulli(r_i) independent:
    inf over theta >= 0 of exp(K(theta) - theta s), K the cumulant generating function of S. A
    bound, never an approximation, so the test is valid at any n (it is conservative by a factor
    of order theta * sd(S) in the far tail)."""
    from scipy import optimize

    if s <= 0:
        return 1.0
    with np.errstate(divide="ignore"):
        lr, l1r = np.log(r), np.log1p(-r)

    def f(theta: float) -> float:
        return float(np.sum(np.logaddexp(l1r, lr + theta) - theta * r) - theta * s)

    hi = 1.0
    while f(2 * hi) < f(hi) and hi < 1e6:
        hi *= 2
    res = optimize.minimize_scalar(f, bounds=(0.0, 2 * hi), method="bounded", options={"xatol": 1e-9})
    return float(min(1.0, math.exp(min(0.0, res.fun))))


# long: one test read top to bottom: exact failures, Chernoff bounds, cells, note
def acceptance_given_draft_test(
    p_rows: ArrayLike,
    q_rows: ArrayLike,
    position: ArrayLike,
    drafts: ArrayLike,
    accepted: ArrayLike,
    *,
    round_position: ArrayLike | None = None,
) -> GofResult:
    """Acceptance indicators given the draft tokens against Bernoulli(min(1, p(x) / q(x))).

    Under the full rule the acceptance uniform is independent of the draft, so given the drafts
    the indicators A_i are independent Bernoulli(r_i), r_i = min(1, p_j(x_i) / q_j(x_i)). The
    statistic S = sum (A_i - r_i) (too many or too few acceptances given what was drafted) gets a
    two-sided Chernoff bound, valid at any n, over all positions and over the positions after the
    first (Bonferroni x2): those are reached only by accepting, so an acceptance uniform shared
    across positions shows there as an excess of acceptances. Conditioning on the drafts removes
    the drafts' own variance from the marginal Bernoulli(beta) test. A rejection with r = 1, or an
    acceptance with r = 0, is impossible: an exact failure.

    p_rows [g + 1, V], q_rows [g, V]: the position rows; position, drafts, accepted [N]: one entry per
    verified draft (rounds that reached position j). For context models ``p_rows`` / ``q_rows`` are
    whole tables, ``position`` the row of each draft's context, and ``round_position`` [N] its
    position in the round (the split into first and later positions, and the cells, use it).
    """
    p_rows, q_rows = np.asarray(p_rows, dtype=float), np.asarray(q_rows, dtype=float)
    j = np.asarray(position, dtype=np.int64)
    x = np.asarray(drafts, dtype=np.int64)
    a = np.asarray(accepted, dtype=bool)
    n = len(x)
    px, qx = p_rows[j, x], q_rows[j, x]
    if round_position is not None:
        j = np.asarray(round_position, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(qx > 0, np.minimum(1.0, px / np.where(qx > 0, qx, 1.0)), np.where(px > 0, 1.0, 0.0))
    name = "acceptance given draft ~ Bernoulli(min(1, p/q))"
    impossible = (a & (r <= 0)) | (~a & (r >= 1))
    if impossible.any():
        i = int(np.nonzero(impossible)[0][0])
        what = "accepted with p(x) = 0" if a[i] else "rejected with p(x) >= q(x)"
        cells = [Cell(f"position {int(j[i])}, draft {int(x[i])}: {what}", 1.0, 0.0)]
        return GofResult.exact_failure(
            name,
            n=n,
            why=f"{int(impossible.sum())} acceptance decision(s) impossible under the full rule",
            tv_estimate=float(impossible.mean()),
            tv_interval=(float(impossible.mean()), 1.0),
            worst_cells=cells,
        )
    live = (r > 0) & (r < 1)  # the rest are certain and were checked above

    def two_sided(m: np.ndarray) -> tuple[float, float]:
        rl, al = r[m], a[m].astype(float)
        s = float(np.sum(al - rl))
        # the lower tail of sum (A - r) is the upper tail of sum ((1 - A) - (1 - r))
        return s, min(1.0, 2 * (_chernoff_tail(rl, s) if s > 0 else _chernoff_tail(1.0 - rl, -s)))

    s, p_all = two_sided(live)
    _, p_later = two_sided(live & (j > 0))
    p = min(1.0, 2 * min(p_all, p_later))
    rl = r[live]
    exp_acc, obs_acc = float(r.sum()), float(a.sum())
    cells = [
        Cell(f"position {int(pos)} acceptances", float(a[j == pos].sum()), float(r[j == pos].sum()))
        for pos in np.unique(j)
    ]
    cells.sort(key=lambda c: -abs(c.observed - c.expected))
    gap = abs(obs_acc - exp_acc) / max(n, 1)
    sd = math.sqrt(float(np.sum(rl * (1 - rl)))) or 1.0
    return GofResult(
        test=name,
        statistic=s / sd,
        pvalue=p,
        df=1,
        n=n,
        cells=2,
        tv_estimate=gap,
        tv_interval=(0.0, 1.0),
        worst_cells=cells,
        pooled_groups=0,
        note=f"accepted {obs_acc:.0f} vs {exp_acc:.1f} expected given the drafts (z = {s / sd:.2f}, Chernoff bound "
        f"p={p_all:.3g}; positions after the first, whose drafts were reached by accepting, p={p_later:.3g}; "
        "Bonferroni x2)",
    )


def _cumcount(keys: np.ndarray) -> np.ndarray:
    """For each entry, how many earlier entries (in the given order) share its key."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    start = np.r_[0, np.nonzero(k[1:] != k[:-1])[0] + 1]
    run = np.zeros(len(k), dtype=np.int64)
    run[start] = start
    out = np.empty(len(k), dtype=np.int64)
    out[order] = np.arange(len(k)) - np.maximum.accumulate(run)
    return out


# long: one e-process read top to bottom: grouping, residuals, exact failure, path
def draft_repeat_eprocess(
    p_rows: ArrayLike,
    q_rows: ArrayLike,
    drafts: ArrayLike,
    num_accepted: ArrayLike,
    replacements: ArrayLike,
    *,
    kappa: float = 3.0,
) -> GofResult:
    """Anytime-valid test that what follows a draft (its acceptance, and after a rejection the
    replacement) depends on nothing but the draft's laws: p-value 1 / max_t E_t (Ville).

    Verified drafts are taken in round and position order. Each outcome is predicted from the
    earlier outcomes that followed the same (position, draft token) by a Dirichlet(kappa * law)
    posterior mean, P(o) = (c(o) + kappa law(o)) / (m + kappa), where law is Bernoulli(r), r =
    min(1, p(x) / q(x)), for the acceptance and the residual rho for the replacement (c: earlier
    count of outcome o in the group, m: the group's size so far). Under the full rule the
    outcome is independent of the past given x, so the running product of P(o) / law(o) is a test
    martingale. When the draft's noise is reused for the acceptance or the residual draw
    (vllm#47386), outcomes become nearly functions of x and repeat within a group: the product
    grows geometrically. The first outcome of a group costs nothing (its factor is 1).

    p_rows [g + 1, V], q_rows [g, V]; drafts [R, g]; num_accepted [R]; replacements [R] (the token
    emitted at the rejection position; ignored for rounds without a rejection).
    """
    p_rows, q_rows = np.asarray(p_rows, dtype=float), np.asarray(q_rows, dtype=float)
    drafts = np.asarray(drafts, dtype=np.int64)
    n_acc = np.asarray(num_accepted, dtype=np.int64)
    replacements = np.asarray(replacements, dtype=np.int64)
    name = "outcomes given the draft repeat no more than chance (e-process)"
    g, v = q_rows.shape
    reached = np.arange(g)[None, :] <= np.minimum(n_acc, g - 1)[:, None]
    ri, pj = np.nonzero(reached)  # round-major, then position: the order of events
    x = drafts[ri, pj]
    a = pj < n_acc[ri]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(q_rows[pj, x] > 0, np.minimum(1.0, p_rows[pj, x] / q_rows[pj, x]), 1.0)
    log_e = np.zeros(len(x))
    group = pj * v + x
    live = np.nonzero((r > 0) & (r < 1))[0]  # certain outcomes carry no evidence here
    law_a = np.where(a[live], r[live], 1.0 - r[live])
    m = _cumcount(group[live])
    c = _cumcount(group[live] * 2 + a[live])
    log_e[live] += np.log((c + kappa * law_a) / (m + kappa)) - np.log(law_a)
    rej = np.nonzero(~a)[0]
    rho = np.maximum(p_rows[:g] - q_rows, 0.0)
    tot = rho.sum(1)
    y = replacements[ri[rej]]
    ry = rho[pj[rej], y] / np.where(tot[pj[rej]] > 0, tot[pj[rej]], 1.0)
    n = len(x)
    if (ry <= 0).any():
        return GofResult.exact_failure(name, n=n, why="a replacement outside the residual's support")
    m = _cumcount(group[rej])
    c = _cumcount(group[rej] * v + y)
    log_e[rej] += np.log((c + kappa * ry) / (m + kappa)) - np.log(ry)
    path = np.cumsum(log_e)
    best = float(path.max()) if n else 0.0
    p = float(min(1.0, math.exp(-best))) if best > 0 else 1.0
    repeats = int((m > 0).sum())
    return GofResult(
        test=name,
        statistic=best,
        pvalue=p,
        df=0,
        n=n,
        cells=0,
        tv_estimate=0.0,
        tv_interval=(0.0, 1.0),
        worst_cells=[],
        pooled_groups=0,
        note=f"max log e = {best:.2f} over {n} verified drafts ({repeats} replacements after a repeated draft); "
        f"anytime-valid, kappa = {kappa:g}",
    )


# long: one test read top to bottom: pairs, per-position tables, pooling, exact failure
def replacement_independence_test(
    p_rows: ArrayLike,
    q_rows: ArrayLike,
    position: ArrayLike,
    drafts: ArrayLike,
    replacements: ArrayLike,
    *,
    top_k: int = 4,
) -> GofResult:
    """The (rejected draft, replacement) pairs against the product of their laws.

    Under the full rule, given a rejection at position j the rejected draft x has law
    (q_j - p_j)+ / (1 - beta_j) and the replacement y has law (p_j - q_j)+ / (1 - beta_j),
    *independently*: the residual draw uses fresh randomness. When the draft's noise (or the
    acceptance uniform) is reused for the residual draw, y becomes nearly a function of x
    (vllm#47386, vllm-ascend#16370) while each margin can stay close to its law. The cells are
    (rank of x among the top_k rejected drafts, or 'other') x (rank of y among the top_k residual
    tokens, or 'other') per position, with expected counts m_j pi_j(a) rho_j(b) for the m_j
    rejections at j, pooled by the documented rule; Pearson's statistic is summed over positions
    with df = sum_j (cells_j - 1).

    p_rows [g + 1, V], q_rows [g, V]; position, drafts, replacements [N]: one entry per rejection.
    """
    p_rows, q_rows = np.asarray(p_rows, dtype=float), np.asarray(q_rows, dtype=float)
    j_all = np.asarray(position, dtype=np.int64)
    x_all = np.asarray(drafts, dtype=np.int64)
    y_all = np.asarray(replacements, dtype=np.int64)
    name = "rejected draft and replacement independent"
    k1 = top_k + 1
    x2, df, n = 0.0, 0, len(x_all)
    cells: list[Cell] = []
    obs_all, exp_all = [], []
    for j in np.unique(j_all):
        m = j_all == j
        pi = np.maximum(q_rows[j] - p_rows[j], 0.0)
        rho = np.maximum(p_rows[j] - q_rows[j], 0.0)
        if pi.sum() <= 0 or rho.sum() <= 0:
            continue
        pi, rho = pi / pi.sum(), rho / rho.sum()
        bins = []
        for law in (pi, rho):
            rank = np.empty(len(law), dtype=np.int64)
            rank[np.argsort(-law, kind="stable")] = np.arange(len(law))
            b = np.minimum(rank, top_k)
            bins.append((b, np.bincount(b, weights=law, minlength=k1)))
        (bx, mx), (by, my) = bins
        obs = np.bincount(bx[x_all[m]] * k1 + by[y_all[m]], minlength=k1 * k1).astype(float)
        exp = int(m.sum()) * np.outer(mx, my).ravel()
        if (obs[exp <= 0] > 0).any():
            return GofResult.exact_failure(
                name,
                n=n,
                why=f"a rejection at position {int(j)} paired a draft and replacement of probability 0",
            )
        grp = pool_cells(exp)
        kk = grp.max() + 1 if (grp >= 0).any() else 0
        o = np.bincount(grp[grp >= 0], weights=obs[grp >= 0], minlength=kk)
        e = np.bincount(grp[grp >= 0], weights=exp[grp >= 0], minlength=kk)
        if kk < 2:
            continue
        x2 += float(((o - e) ** 2 / e).sum())
        df += kk - 1
        for c in range(k1 * k1):
            if exp[c] >= 5:
                rd, rr = divmod(c, k1)
                la = f"draft rank {rd + 1}" if rd < top_k else "other drafts"
                lb = f"replacement rank {rr + 1}" if rr < top_k else "other replacements"
                cells.append(Cell(f"position {int(j)}: {la} x {lb}", float(obs[c]), float(exp[c])))
        obs_all.append(obs)
        exp_all.append(exp)
    if df == 0:
        return GofResult.empty(name, n=n, why="too few rejections to form two cells")
    cells.sort(key=lambda c: -abs(c.residual))
    o, e = np.concatenate(obs_all), np.concatenate(exp_all)
    tv, iv = tv_interval(o / o.sum(), e / e.sum(), int(o.sum()), len(o))
    return GofResult(
        test=name,
        statistic=x2,
        pvalue=float(special.chdtrc(df, x2)),  # chi2.sf
        df=df,
        n=n,
        cells=len(o),
        tv_estimate=tv,
        tv_interval=iv,
        worst_cells=cells[:5],
        pooled_groups=0,
    )


def token_at_stop(
    tokens: np.ndarray, position: np.ndarray, round_ids: np.ndarray, num_accepted: np.ndarray
) -> np.ndarray:
    """[R] the token each round emitted where it stopped (its replacement, or its bonus token)."""
    out = np.zeros(len(num_accepted), dtype=np.int64)
    at = position == np.asarray(num_accepted)[round_ids]
    out[round_ids[at]] = tokens[at]
    return out


def _pooled_stream(
    name: str, rows: ArrayLike, tokens: np.ndarray, position: np.ndarray, rng: np.random.Generator
) -> StratumResult | None:
    """Default stream test of tokens whose law at position j is rows[j] (normalised here)."""
    rows = np.asarray(rows, dtype=float)
    mass = rows.sum(1, keepdims=True)
    if len(tokens) == 0:
        return None
    law = StreamLaw(np.where(mass > 0, rows / np.where(mass > 0, mass, 1.0), 1.0 / rows.shape[1]))
    st = default_stream_test(law, tokens, position, rng=rng, stratum=name)
    worst = st.worst
    return StratumResult(
        name,
        dataclasses.replace(worst, test=f"{worst.test}, best of {len(st.components)} (Bonferroni)", pvalue=st.pvalue),
    )


# long: the list of white-box strata, each a few lines; the list is the point
def whitebox_round_tests(
    tokens: ArrayLike,
    position: ArrayLike,
    round_ids: ArrayLike,
    num_accepted: ArrayLike,
    P: ArrayLike,
    Q: ArrayLike,
    *,
    drafts: ArrayLike | None = None,
    drafts_from_implementation: bool = False,
    rng: np.random.Generator | None = None,
) -> list[StratumResult]:
    """The white-box strata of kernel-level rounds (rows depend on the position only), each over
    all positions at once (a position's tokens are tested against that position's law, so
    evidence adds up across positions while the stratum still says *what* broke):

    * accepted tokens ~ min(p_j, q_j) / beta_j, replacements ~ (p_j - q_j)+ / (1 - beta_j) and bonus
      tokens ~ p_gamma, each with the default stream test;
    * without ``drafts``: the acceptance indicator at each position ~ Bernoulli(beta_j);
    * with ``drafts`` [R, gamma] (each round's drafted tokens): each acceptance given its draft
      (:func:`acceptance_given_draft_test`, sharper), the independence of a rejected draft and
      its replacement (:func:`replacement_independence_test`), and an e-process on repeated
      outcomes after repeated drafts (:func:`draft_repeat_eprocess`); and when the implementation drew
      the drafts itself (``drafts_from_implementation``), the drafts ~ q (all gamma of them per
      round are draws, accepted or not, so this stratum is large).

    Valid for implementations of the full rule whose draft tokens were drawn from Q (the
    auditor's own drafts, or a sampler's declared ones).

    tokens, position, round_ids: [N] per emitted token; num_accepted: [R] per round;
    P: [gamma + 1, V] target rows; Q: [gamma, V] draft rows.
    """
    tokens, position, round_ids = (np.asarray(a, dtype=np.int64) for a in (tokens, position, round_ids))
    rng = rng if rng is not None else np.random.default_rng(0)
    P, Q = np.asarray(P, dtype=float), np.asarray(Q, dtype=float)
    n_acc_round = np.asarray(num_accepted, dtype=np.int64)
    n_acc = n_acc_round[round_ids]
    g = Q.shape[0]
    out: list[StratumResult] = []
    if drafts is not None:
        drafts = np.asarray(drafts, dtype=np.int64)
        if drafts_from_implementation:
            pos = np.broadcast_to(np.arange(g), drafts.shape).ravel()
            r = _pooled_stream("draft tokens ~ q", Q, drafts.ravel(), pos, rng)
            if r:  # no drafts, no stratum (was appended as None)
                out.append(r)
        # Verified drafts: positions 0 .. min(num_accepted, gamma - 1) of each round.
        reached = np.arange(g)[None, :] <= np.minimum(n_acc_round, g - 1)[:, None]
        ri, pj = np.nonzero(reached)
        out.append(
            StratumResult(
                "acceptance given draft ~ Bernoulli(min(1, p/q))",
                acceptance_given_draft_test(P, Q, pj, drafts[ri, pj], pj < n_acc_round[ri]),
            )
        )
        # Replacements: the round's token at its rejection position, with the rejected draft.
        rej = np.nonzero(n_acc_round < g)[0]
        first = token_at_stop(tokens, position, round_ids, n_acc_round)
        if len(rej):
            jr = n_acc_round[rej]
            out.append(
                StratumResult(
                    "rejected draft and replacement independent",
                    replacement_independence_test(P, Q, jr, drafts[rej, jr], first[rej]),
                )
            )
        out.append(
            StratumResult(
                "outcomes given the draft repeat no more than chance",
                draft_repeat_eprocess(P, Q, drafts, n_acc_round, first),
            )
        )
    else:
        for j in range(g):
            m = position == j
            k, reached = int((n_acc[m] > j).sum()), int(m.sum())
            if reached:
                out.append(
                    StratumResult(
                        f"position {j}: acceptance ~ Bernoulli(sum min(p, q))",
                        _acceptance_binomial(P[j], Q[j], k, reached),
                        family="acceptance ~ Bernoulli(sum min(p, q))",
                    )
                )
    inner = position < g
    acc = inner & (n_acc > position)
    rep = inner & (n_acc == position)
    for name, rows, m in (
        ("accepted tokens ~ min(p, q) / beta", np.minimum(P[:g], Q), acc),
        ("replacements ~ (p - q)+ / (1 - beta)", np.maximum(P[:g] - Q, 0.0), rep),
    ):
        r = _pooled_stream(name, rows, tokens[m], position[m], rng)
        if r:
            out.append(r)
    r = _pooled_stream(
        "bonus tokens ~ p", P[g:], tokens[position == g], np.zeros(int((position == g).sum()), dtype=np.int64), rng
    )
    if r:
        out.append(r)
    return out


#: strata of :func:`whitebox_context_tests`
WHITEBOX_CONTEXT_STRATA = 5


def whitebox_context_tests(
    tokens: ArrayLike,
    token_rows: ArrayLike,
    position: ArrayLike,
    round_ids: ArrayLike,
    num_accepted: ArrayLike,
    P: ArrayLike,
    Q: ArrayLike,
    *,
    drafts: ArrayLike,
    draft_rows: ArrayLike,
    rng: np.random.Generator | None = None,
) -> list[StratumResult]:
    """The white-box strata of rounds on a context model (rows depend on the whole prefix), for
    an implementation of the full rule that draws its own drafts: drafts ~ q, acceptance given the
    draft ~ Bernoulli(min(1, p/q)), accepted tokens ~ min(p, q) / beta, replacements ~ (p - q)+ /
    (1 - beta) and bonus tokens ~ p, each against the row of its own context.

    tokens, token_rows, position, round_ids: [N] per emitted token (row of its true prefix);
    num_accepted [R]; P, Q: [M, V] processed tables; drafts, draft_rows: [R, g] each round's
    proposed tokens (-1 where fewer were proposed) and the rows of their contexts.
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    tokens, token_rows, position, round_ids = (
        np.asarray(a, dtype=np.int64) for a in (tokens, token_rows, position, round_ids)
    )
    P, Q = np.asarray(P, dtype=float), np.asarray(Q, dtype=float)
    n_acc_round = np.asarray(num_accepted, dtype=np.int64)
    drafts, draft_rows = np.asarray(drafts, dtype=np.int64), np.asarray(draft_rows, dtype=np.int64)
    g = drafts.shape[1]
    out: list[StratumResult] = []
    proposed = drafts >= 0
    r = _pooled_stream("draft tokens ~ q", Q, drafts[proposed], draft_rows[proposed], rng)
    if r:
        out.append(r)
    reached = (np.arange(g)[None, :] <= np.minimum(n_acc_round, g - 1)[:, None]) & proposed
    ri, pj = np.nonzero(reached)
    if len(ri):
        out.append(
            StratumResult(
                "acceptance given draft ~ Bernoulli(min(1, p/q))",
                acceptance_given_draft_test(
                    P, Q, draft_rows[ri, pj], drafts[ri, pj], pj < n_acc_round[ri], round_position=pj
                ),
            )
        )
    n_acc = n_acc_round[round_ids]
    inner = position < g
    for name, rows, m in (
        ("accepted tokens ~ min(p, q) / beta", np.minimum(P, Q), inner & (n_acc > position)),
        ("replacements ~ (p - q)+ / (1 - beta)", np.maximum(P - Q, 0.0), inner & (n_acc == position)),
        ("bonus tokens ~ p", P, position == g),
    ):
        r = _pooled_stream(name, rows, tokens[m], token_rows[m], rng)
        if r:
            out.append(r)
    return out
