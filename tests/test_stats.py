"""Calibration and power of specverify.stats (fixed seeds; each claim has a negative control)."""

import math

import numpy as np
import pytest
from scipy import stats

from specverify import stats as S
from specverify.bench.baselines import plain_pearson_stream_test, vllm_position_chi2
from specverify.stats._gof import power_divergence


def test_power_helpers_round_trip():
    n = S.min_samples_for_tv(0.02, df=31, alpha=1e-6, beta=1e-3)
    assert S.min_detectable_tv(n, df=31, alpha=1e-6, beta=1e-3) <= 0.02 + 1e-9
    assert S.chi2_power(n, 0.02, df=31, alpha=1e-6) >= 1 - 1e-3 - 1e-9
    assert S.min_samples_for_ks(0.01, alpha=1e-6, beta=1e-6) == pytest.approx(2.9e5, rel=0.02)


def test_power_prediction_matches_simulation():
    # Worst-shaped deviation of TV eps on k = 8 cells; simulated detection rate vs ncx2 power.
    rng = np.random.default_rng(11)
    k, eps, alpha, n = 8, 0.05, 1e-3, 1000
    p = np.full(k, 1 / k)
    pi = p * (1 + 2 * eps * np.where(np.arange(k) < k // 2, 1, -1))
    predicted = S.chi2_power(n, eps, df=k - 1, alpha=alpha)
    crit = stats.chi2.isf(alpha, k - 1)
    x = rng.multinomial(n, pi, size=4000)
    rate = (((x - n * p) ** 2 / (n * p)).sum(1) > crit).mean()
    se = math.sqrt(predicted * (1 - predicted) / 4000)
    assert abs(rate - predicted) < 5 * se + 0.01, (rate, predicted)


@pytest.mark.parametrize("lambda_", ["pearson", "log-likelihood", "cressie-read"])
def test_power_divergence_is_scipys(lambda_):
    # specverify.stats writes Pearson and G out with scipy.special (no scipy.stats import on a PASS):
    # the statistic and the p-value must be scipy.stats.power_divergence's, zero counts included
    rng = np.random.default_rng(3)
    for k in (2, 5, 32):
        exp = rng.dirichlet(np.ones(k)) * 400
        obs = rng.multinomial(400, exp / exp.sum()).astype(float)
        obs[0] = 0.0
        exp *= obs.sum() / exp.sum()  # as cells_result scales them
        ours = power_divergence(obs, exp, lambda_)
        ref = stats.power_divergence(obs, exp, lambda_=lambda_)
        assert ours == pytest.approx((ref.statistic, ref.pvalue), rel=1e-12, abs=1e-300)


def test_the_noncentrality_is_the_root_of_the_noncentral_chi2_tail():
    # chndtrinc (scipy.special) against the definition: ncx2.sf(chi2.isf(alpha, df), df, lambda) = 1 - beta
    for df, alpha, beta in [(1, 1e-9, 1e-3), (31, 3.5e-9, 1e-3), (31, 0.05, 0.05), (127, 1e-6, 0.2)]:
        lam = S.noncentrality_for_power(df, alpha, beta)
        assert stats.ncx2.sf(stats.chi2.isf(alpha, df), df, lam) == pytest.approx(1 - beta, abs=1e-10)
        tv = math.sqrt(lam / 10_000) / 2  # the TV whose noncentrality at n = 10,000 is lambda
        assert S.chi2_power(10_000, tv, df=df, alpha=alpha) == pytest.approx(1 - beta, abs=1e-9)


def test_pooling_rule():
    g = S.pool_cells([100, 50, 3, 2, 1, 0.5, 0])
    assert g[0] != g[1] and g[6] == -1
    assert len(set(g[2:6].tolist())) == 1  # the four small cells pool into one group of 6.5


def test_pearson_and_g_on_correct_and_wrong_counts():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.3, 0.15, 0.05])
    ok = rng.multinomial(5000, p)
    bad = rng.multinomial(5000, [0.4, 0.35, 0.2, 0.05])
    assert S.pearson_test(ok, p).pvalue > 1e-3 and S.g_test(ok, p).pvalue > 1e-3
    r = S.pearson_test(bad, p)
    assert r.pvalue < 1e-6 and r.worst_cells[0].label == "token 0" and 0.05 < r.tv_estimate < 0.15


def test_zero_probability_emission_is_an_exact_failure():
    r = S.pearson_test([10, 0, 1], [0.5, 0.5, 0.0])
    assert r.pvalue == 0.0 and "probability 0" in r.note


def test_exact_multinomial_matches_enumeration_by_hand():
    # n = 2, p = (1/2, 1/2): tables (2,0),(1,1),(0,2) with X2 = 2, 0, 2; observing (2,0) -> p = 1/2.
    assert S.exact_multinomial_test([2, 0], [0.5, 0.5]).pvalue == pytest.approx(0.5)
    assert S.exact_multinomial_test([1, 1], [0.5, 0.5]).pvalue == pytest.approx(1.0)


def test_monte_carlo_test_is_valid_and_has_power():
    rng = np.random.default_rng(2)
    p = np.array([0.7, 0.2, 0.1])
    assert S.monte_carlo_gof_test(rng.multinomial(300, p), p, rng, n_resamples=999).pvalue > 0.01
    assert S.monte_carlo_gof_test(rng.multinomial(300, [0.5, 0.3, 0.2]), p, rng, n_resamples=999).pvalue <= 0.002


def test_anderson_darling_tail_matches_known_critical_values():
    assert S.ad_limit_sf(2.492) == pytest.approx(0.05, rel=0.03)
    assert S.ad_limit_sf(3.857) == pytest.approx(0.01, rel=0.06)
    assert S.ad_limit_sf(20.0) == pytest.approx(math.sqrt(3) * math.erfc(math.sqrt(20.0)), rel=0.15)


def test_anderson_darling_calibration_by_simulation():
    rng = np.random.default_rng(5)
    p = np.array([S.anderson_darling_uniform(rng.random(400))[1] for _ in range(3000)])
    for a in (0.01, 0.05):
        rate = (p <= a).mean()
        assert rate <= a + 4 * math.sqrt(a * (1 - a) / 3000), (a, rate)
    assert S.anderson_darling_uniform(rng.random(1000) ** 1.3)[1] < 1e-6  # negative control


def test_holm_and_bh():
    adj = S.holm([0.01, 0.04, 0.03])
    assert np.allclose(adj, [0.03, 0.06, 0.06])
    assert np.allclose(S.benjamini_hochberg([0.01, 0.04, 0.03]), [0.03, 0.04, 0.04])


def test_eprocess_is_valid_and_stops_on_a_deviation():
    rng = np.random.default_rng(9)
    m = np.full(8, 1 / 8)
    crossings = 0
    for _ in range(200):
        e = S.MultinomialEProcess(8).update(rng.integers(0, 8, 2000), m)
        crossings += e.rejects(0.05)
    assert crossings <= 200 * 0.05 + 4 * math.sqrt(200 * 0.05)  # Ville: P(cross) <= alpha
    bad = rng.choice(8, size=5000, p=np.r_[np.full(4, 0.15), np.full(4, 0.1)])
    e = S.MultinomialEProcess(8).update(bad, m)
    assert e.rejects(1e-6)
    state = S.MultinomialEProcess.from_state(e.state())
    assert state.max_log_e == e.max_log_e


def test_two_sample_tests():
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(200))
    a, b = rng.choice(200, 20000, p=p), rng.choice(200, 20000, p=p)
    assert S.binned_homogeneity_test(a, b, vocab_size=200, projection_probs=p).pvalue > 1e-3
    c = rng.choice(200, 20000, p=p**1.3 / (p**1.3).sum())
    assert S.binned_homogeneity_test(a, c, vocab_size=200, projection_probs=p).pvalue < 1e-6
    assert S.homogeneity_test(np.bincount(a, minlength=200), np.bincount(c, minlength=200)).pvalue < 1e-6


def test_plain_pearson_blind_spot_and_its_fix():
    # Sparse vocabulary, sharpening (temperature 0.9): plain Pearson over all cells is biased
    # (its mean falls below the null's); the sorted-mass bins catch it. Fixed seed.
    rng = np.random.default_rng(1)
    v, n = 20_000, 5_000
    p = 1 / np.arange(1, v + 1) ** 1.1
    p = p / p.sum()
    sharp = p ** (1 / 0.9)
    sharp /= sharp.sum()
    tv = 0.5 * np.abs(sharp - p).sum()
    law = S.StreamLaw(p[None, :])
    x = rng.choice(v, size=n, p=sharp)
    rows = np.zeros(n, dtype=np.int64)
    plain = plain_pearson_stream_test(law, x, rows)
    binned = S.binned_stream_test(law, x, rows)
    assert tv > 0.05
    assert plain.pvalue > 0.5  # blind: no evidence at all against a TV > 0.05 deviation
    assert binned.pvalue < 1e-6


def test_stratified_white_box_localises_the_bug():
    from specverify.algorithms import draft_and_verify_batch

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(10))
    q = rng.dirichlet(np.ones(10))
    x, res = draft_and_verify_batch(p, q, 1, 40_000, rng)
    acc = res.num_accepted == 1
    out = S.stratified_position_tests(p, q, len(x), acc, res.tokens[:, 0])
    assert all(s.adjusted_pvalue > 1e-6 for s in out)
    # Bug: replacement drawn from p instead of the residual. Only the replacement stratum fails.
    bad = res.tokens[:, 0].copy()
    bad[~acc] = rng.choice(10, size=(~acc).sum(), p=p)
    out = {s.stratum: s.adjusted_pvalue for s in S.stratified_position_tests(p, q, len(x), acc, bad)}
    assert out["replacements ~ (p - q)+ / (1 - beta)"] < 1e-6
    assert out["accepted tokens ~ min(p, q) / beta"] > 1e-6


def test_grouped_eprocess_is_valid_under_mixed_laws():
    # Tokens from two different known laws, counts kept per law: still a test martingale.
    rng = np.random.default_rng(12)
    laws = np.array([[0.7, 0.2, 0.1, 0.0], [0.1, 0.1, 0.3, 0.5]])
    crossings = 0
    for _ in range(200):
        g = rng.integers(0, 2, 2000)
        cells = np.array([rng.choice(4, p=laws[i]) for i in g])
        crossings += S.MultinomialEProcess(4).update(cells, laws[g], groups=g).rejects(0.05)
    assert crossings <= 200 * 0.05 + 4 * math.sqrt(200 * 0.05)


def test_chernoff_bound_is_a_bound_on_the_exact_tail():
    from specverify.stats._stratified import _chernoff_tail

    r = np.full(100, 0.3)
    for k in (35, 40, 50, 60, 70):
        exact = stats.binom.sf(k - 1, 100, 0.3)
        bound = _chernoff_tail(r, k - 30)
        assert exact <= bound <= max(60 * exact, 1.0 if k < 45 else 0.0), (k, exact, bound)


def _rounds(sampler_cls, n, seed, vocab=64, gamma=4):
    from specverify.harness import run_sampler
    from specverify.lm.synthetic import make_positional_pair

    pair = make_positional_pair(vocab, gamma=gamma, alpha=0.7, seed=seed)
    g = run_sampler(sampler_cls(), pair, n=n, gamma=gamma, rng=np.random.default_rng([seed, 1]))
    return g, pair.target_table(None)[: gamma + 1], pair.draft_table(None)[:gamma]


def _by_name(name):
    from specverify.catalogue import BUGS

    return next(c for c in BUGS if c.name == name)


def test_whitebox_with_drafts_passes_exact_and_names_each_bug():
    from specverify.catalogue import ChainSampler

    # Exact sampler: every stratum p > 1e-6 over 5 fixed seeds (asymptotic chi-square and exact
    # bounds; the family is Holm-adjusted in audits).
    for seed in range(5):
        g, P, Q = _rounds(ChainSampler, 3000, seed)
        out = S.whitebox_round_tests(
            g.tokens,
            g.position,
            g.sequence,
            g.num_accepted,
            P,
            Q,
            drafts=g.drafts,
            drafts_from_implementation=True,
            rng=np.random.default_rng(seed),
        )
        names = [s.stratum for s in out]
        assert "rejected draft and replacement independent" in names and "draft tokens ~ q" in names
        assert min(s.result.pvalue for s in out) > 1e-6, [(s.stratum, s.result.pvalue) for s in out]
    # Each bug is named by the stratum that sees it, at a few hundred rounds.
    expect = {
        "shared_noise": "rejected draft and replacement independent",
        "always_accept": "acceptance given draft ~ Bernoulli(min(1, p/q))",
        "argmax_draft_soft_q": "draft tokens ~ q",
        "replacement_from_p": "replacements ~ (p - q)+ / (1 - beta)",
    }
    for name, stratum in expect.items():
        g, P, Q = _rounds(_by_name(name), 400, 0)
        out = {
            s.stratum: s.result.pvalue
            for s in S.whitebox_round_tests(
                g.tokens, g.position, g.sequence, g.num_accepted, P, Q, drafts=g.drafts, drafts_from_implementation=True
            )
        }
        assert out[stratum] < 1e-8, (name, out)


def test_replacement_independence_is_calibrated_and_catches_noise_reuse():
    # Null: (x, y) drawn independently from their exact laws; rate of p < 0.01 over 300 replicates
    # within a binomial 1e-6 bound of 1% (for both parts of the test).
    from specverify.stats import replacement_independence_test

    rng = np.random.default_rng(5)
    v, g = 50, 3
    P = rng.dirichlet(np.full(v, 0.3), size=g + 1)
    Q = rng.dirichlet(np.full(v, 0.3), size=g)
    pi = np.maximum(Q - P[:g], 0)
    rho = np.maximum(P[:g] - Q, 0)
    small = 0
    for _ in range(300):
        j = rng.integers(0, g, 600)
        x = np.array([rng.choice(v, p=pi[k] / pi[k].sum()) for k in j])
        y = np.array([rng.choice(v, p=rho[k] / rho[k].sum()) for k in j])
        small += replacement_independence_test(P, Q, j, x, y).pvalue < 0.01
    assert small <= stats.binom.isf(1e-6, 300, 0.01), small
    # Bug: y a function of x's draw (the same uniform), margins exact: detected.
    j = rng.integers(0, g, 600)
    u = rng.random(600)
    x = np.array([np.searchsorted(np.cumsum(pi[k] / pi[k].sum()), uu) for k, uu in zip(j, u)])
    y = np.array([np.searchsorted(np.cumsum(rho[k] / rho[k].sum()), uu) for k, uu in zip(j, u)])
    assert replacement_independence_test(P, Q, j, np.minimum(x, v - 1), np.minimum(y, v - 1)).pvalue < 1e-8


def test_acceptance_given_draft_exact_failures_and_bias():
    from specverify.stats import acceptance_given_draft_test

    P = np.array([[0.5, 0.5, 0.0]])
    Q = np.array([[0.25, 0.25, 0.5]])
    # Token 2 has p = 0: accepting it is impossible; token 0 has p >= q: rejecting it is impossible.
    assert acceptance_given_draft_test(P, Q, [0], [2], [True]).pvalue == 0.0
    assert acceptance_given_draft_test(P, Q, [0], [0], [False]).pvalue == 0.0
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(20), size=2)
    Q = rng.dirichlet(np.ones(20), size=2)
    j = rng.integers(0, 2, 5000)
    x = np.array([rng.choice(20, p=Q[k]) for k in j])
    r = np.minimum(1, P[j, x] / Q[j, x])
    ok = acceptance_given_draft_test(P, Q, j, x, rng.random(5000) < r)
    assert ok.pvalue > 1e-3
    # Negative control: a 20% looser ratio (accept iff u < 1.2 p / q).
    bad = acceptance_given_draft_test(P, Q, j, x, rng.random(5000) < np.minimum(1, 1.2 * P[j, x] / Q[j, x]))
    assert bad.pvalue < 1e-6 and "expected given the drafts" in bad.note


def test_vllm_position_chi2_matches_the_dense_definition():
    # The sparse computation equals the dense one (all cells, E < 5 merged), and a zero-probability
    # token is counted in 'other' as vLLM's test counts it (no certain rejection).
    rng = np.random.default_rng(8)
    table = rng.dirichlet(np.full(300, 0.2), size=6)
    table[:, :10] = 0.0
    table /= table.sum(1, keepdims=True)
    law = S.StreamLaw(table)
    rows = rng.integers(0, 6, 4000)
    toks = np.array([rng.choice(300, p=table[r]) for r in rows])
    toks[:2] = 3  # probability 0
    rejected, res = vllm_position_chi2(law, toks, rows)
    obs = np.bincount(rows * 300 + toks, minlength=1800).astype(float)
    exp = (np.bincount(rows, minlength=6)[:, None] * table).ravel()
    big = exp >= 5
    o, e = np.append(obs[big], obs[~big].sum()), np.append(exp[big], exp[~big].sum())
    assert res.statistic == pytest.approx(float(((o - e) ** 2 / e).sum()), rel=1e-9)
    assert res.df == len(o) - 1
    assert rejected == (res.statistic > res.df + 10 * math.sqrt(2 * res.df))


def test_draft_repeat_eprocess_is_valid_and_catches_shared_noise():
    from specverify.catalogue import ChainSampler

    # Null: exact rounds; Ville's inequality gives P(p <= a) <= a. 200 replicates, a = 0.05,
    # false-fail bound: binomial 1e-6 quantile.
    small = 0
    for seed in range(200):
        g, P, Q = _rounds(ChainSampler, 150, seed, vocab=32)
        r = S.draft_repeat_eprocess(P, Q, g.drafts, g.num_accepted, _first_tokens(g))
        small += r.pvalue <= 0.05
    assert small <= stats.binom.isf(1e-6, 200, 0.05), small
    # Negative control: one noise source for drafting, acceptance and recovery (vllm#47386).
    g, P, Q = _rounds(_by_name("shared_noise"), 150, 0, vocab=32)
    assert S.draft_repeat_eprocess(P, Q, g.drafts, g.num_accepted, _first_tokens(g)).pvalue < 1e-6


def _first_tokens(g):
    from specverify.stats import token_at_stop

    return token_at_stop(g.tokens, g.position, g.sequence, g.num_accepted)


def test_loglik_score_test_is_calibrated_and_sees_temperature():
    # Null: tokens from their own rows; rate of p < 0.01 over 300 replicates within the binomial
    # 1e-6 bound (the Chernoff bound makes it conservative). Then a temperature of 0.9 on the
    # emitted law, caught; and the default test carries it as its sixth component.
    from specverify.dists import softmax

    rng = np.random.default_rng(21)
    logits = rng.normal(0, 3, (4, 500))
    table = softmax(logits)
    law = S.StreamLaw(table)
    small = 0
    for _ in range(300):
        rows = rng.integers(0, 4, 400)
        toks = np.array([rng.choice(500, p=table[r]) for r in rows])
        small += S.loglik_score_test(law, toks, rows).pvalue < 0.01
    assert small <= stats.binom.isf(1e-6, 300, 0.01), small
    hot = softmax(logits / 0.9)
    rows = rng.integers(0, 4, 2000)
    toks = np.array([rng.choice(500, p=hot[r]) for r in rows])
    res = S.loglik_score_test(law, toks, rows)
    assert res.pvalue < 1e-6 and "sharper" in res.note
    d = S.default_stream_test(law, toks, rows, rng=rng)
    assert len(d.components) == S.DEFAULT_COMPONENTS and d.components[-1].test == "loglik-score"


@pytest.mark.parametrize("eps, alpha, beta", [(0.2, 1e-3, 0.05), (0.1, 1e-6, 1e-3)])
def test_the_two_point_floor_is_below_the_best_test_of_the_closest_alternative_and_not_vacuous(eps, alpha, beta):
    """No test beats the floor: the most powerful test of the two halves ((1 - eps)/2 against
    (1 + eps)/2, the closest alternative at TV eps) needs at least as many samples, and fewer than
    three times as many (the bound is the right order); the chi-square over 32 cells needs more."""
    from scipy import stats as sps

    samples_any_test_needs_for_tv = S.samples_any_test_needs_for_tv

    floor = samples_any_test_needs_for_tv(eps, alpha=alpha, beta=beta)
    p0, p1, n = (1 - eps) / 2, (1 + eps) / 2, 1
    while sps.binom.sf(sps.binom.isf(alpha, n, p0), n, p1) < 1 - beta:
        n += 1
    assert floor <= n < 3 * floor
    assert S.min_samples_for_tv(eps, df=31, alpha=alpha, beta=beta) > n
    with pytest.raises(ValueError, match="alpha \\+ beta < 1"):
        samples_any_test_needs_for_tv(eps, alpha=0.6, beta=0.5)


def test_bench_plan_rows_state_the_plan_against_the_floor():
    """`specverify bench plan`: every unit of the kernel plan is sampled until its plan is met; its
    per-stratum need is above the full-alpha chi-square's and that above the floor no test beats."""
    from specverify.audit.pipeline.config import AuditConfig
    from specverify.bench.plan import plan_rows, vllm_rule_samples_for_tv

    rows = plan_rows("kernel", AuditConfig(eps=0.2))
    assert len(rows) == 7 and {r.floor for r in rows} == {rows[0].floor}
    for r in rows:
        assert r.need > r.chi2 > r.floor > 0 and r.need_ratio > 1, r
        assert r.drawn >= r.strata * r.need and r.drawn_ratio >= r.need_ratio, r
    n, rate = vllm_rule_samples_for_tv(0.2, beta=1e-3)
    assert n == rows[0].vllm and rate < 1e-9  # vLLM's threshold on 32 cells is stricter than 1e-6
