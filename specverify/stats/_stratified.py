"""White-box stratified tests of one verification position, when the auditor sees the round.

With draft token x ~ q and target row p at a position, an exact full-rule sampler satisfies:

* the acceptance indicator is Bernoulli(beta), beta = sum_x min(p, q)         (exact binomial test)
* an accepted token has law min(p, q) / beta
* a replacement after a rejection has law (p - q)+ / (1 - beta)
* a bonus token has law p

Each stratum is tested against its own exact law, so a failure says *where* the bug is (the
acceptance test, the residual, or the bonus), not only that the output is wrong.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from ._multiple import holm
from ._results import GofResult
from ._stream import StreamLaw, binned_stream_test

__all__ = ["StratumResult", "stratified_position_tests"]


@dataclasses.dataclass
class StratumResult:
    stratum: str
    result: GofResult
    adjusted_pvalue: float = float("nan")


def _law_test(name, law_row, tokens, n_cells=16):
    law_row = np.asarray(law_row, dtype=float)
    if law_row.sum() <= 0:
        return None
    law = StreamLaw((law_row / law_row.sum())[None, :])
    rows = np.zeros(len(tokens), dtype=np.int64)
    res = binned_stream_test(law, tokens, rows, kind="sorted_mass", n_cells=n_cells)
    res.test = f"{name} ({res.test})"
    return StratumResult(name, res)


def stratified_position_tests(p, q, reached, accepted, emitted, *, is_bonus: bool = False) -> list[StratumResult]:
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
    beta = float(np.minimum(p, q).sum())
    k = int(accepted.sum())
    bt = stats.binomtest(k, int(reached), beta) if reached else None
    if bt is not None:
        rate = k / reached
        ci = bt.proportion_ci(confidence_level=0.999)
        out.append(StratumResult("acceptance ~ Bernoulli(sum min(p, q))", GofResult(
            "exact-binomial", float(k), float(bt.pvalue), 1, int(reached), 2, abs(rate - beta), (float(ci.low), float(ci.high)), [],
            note=f"observed rate {rate:.4f}, theory {beta:.4f}")))
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


def whitebox_round_tests(tokens, position, round_ids, num_accepted, P, Q) -> list[StratumResult]:
    """All positions of kernel-level rounds (rows depend on the position only): per position j,
    the acceptance indicator, accepted tokens and replacements (``stratified_position_tests``),
    and the bonus tokens at position gamma. Valid for implementations of the full rule whose
    draft tokens were drawn from Q (the auditor's own drafts, or a sampler's declared ones).

    tokens, position, round_ids: [N] per emitted token; num_accepted: [R] per round;
    P: [gamma + 1, V] target rows; Q: [gamma, V] draft rows.
    """
    tokens, position, round_ids = (np.asarray(a, dtype=np.int64) for a in (tokens, position, round_ids))
    n_acc = np.asarray(num_accepted, dtype=np.int64)[round_ids]
    g = Q.shape[0]
    out: list[StratumResult] = []
    for j in range(g + 1):
        m = position == j
        if not m.any():
            continue
        if j == g:
            res = stratified_position_tests(P[g], None, int(m.sum()), None, tokens[m], is_bonus=True)
        else:
            res = stratified_position_tests(P[j], Q[j], int(m.sum()), n_acc[m] > j, tokens[m])
        for r in res:
            r.stratum = f"position {j}: {r.stratum}"
            out.append(r)
    return out
