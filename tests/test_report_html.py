"""The HTML report (issue 19, item 9): a plain-words statement with the cells that moved most, a
ratio plot of the failing stratum, no detectable-TV figure on FAIL rows, a TV interval that agrees
with the test that rejected, and the accepted-drafts plot with its expected law.

Every expectation is derived from the verdict's own details (small real audits), never hard-coded.
"""

from __future__ import annotations

import html
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from specverify import SamplingSettings
from specverify.audit.front.report import check_figure, plain_statement, render_html
from specverify.audit.pipeline.conclude import failure_message
from specverify.audit.pipeline.run import audit
from specverify.audit.sources.adapters import RoundAdapter, SamplerAdapter
from specverify.catalogue import BUGS, ChainSampler
from specverify.stats import FAIL, stratified_position_tests
from specverify.stats._gof import cells_result

BY_NAME = {b.name: b for b in BUGS}
ONE = dict(settings=(SamplingSettings(),), exact_checks=False, diagnose=False)


@pytest.fixture(scope="module")
def verdicts():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from user_impls import round_numpy

    step = RoundAdapter(round_numpy.step_residual_from_p, spec="step_residual_from_p")
    return {
        "pass": audit(SamplerAdapter(ChainSampler()), eps=0.08, **ONE),
        "inconclusive": audit(SamplerAdapter(ChainSampler()), rounds=300, **ONE),
        "fail": audit(SamplerAdapter(BY_NAME["bonus_from_previous_row"]()), eps=0.08, **ONE),
        "whitebox": audit(SamplerAdapter(BY_NAME["shared_noise"]()), eps=0.08, **ONE),
        "whitebox_exact": audit(SamplerAdapter(BY_NAME["replacement_from_p"]()), eps=0.08, **ONE),
        "eprocess": audit(step, rounds=500, **ONE),  # context pairs: no expected accepted-drafts law
    }


@pytest.fixture(scope="module")
def page(verdicts):
    """render_html of a verdict by name, rendered once (the plots take a second)."""
    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            cache[name] = render_html(verdicts[name])
        return cache[name]

    return get


def _plain_html(page: str) -> str:
    m = re.search(r'<p class="plain">(.*?)</p>', page, re.S)
    assert m, "no plain-words statement"
    return html.unescape(m.group(1))


def _rows(page: str) -> list[str]:
    table = page.split("<h3>Checks</h3>", 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr><td>.*?</tr>", table, re.S)


def _top_cells(bins: dict, k: int = 3):
    """The bins with the largest standardized residual, computed here from the recorded counts."""
    o, e = np.asarray(bins["observed"]), np.asarray(bins["expected"])
    order = np.argsort(-np.abs(o - e) / np.sqrt(e), kind="stable")[:k]
    return [(bins["labels"][j].replace(" (by descending p)", ""), o[j], e[j]) for j in order]


def _said(label: str, o: float, e: float) -> str:
    return f"{label} was seen {o:,.0f} time{'' if o == 1 else 's'} where {e:,.1f}"


def test_fail_statement_names_the_stratum_and_the_cells_that_moved(verdicts, page):
    v = verdicts["fail"]
    assert v.status == FAIL
    c, stratum, _ = v.first_failure()
    text = _plain_html(page("fail"))
    assert text.startswith(f"The emitted tokens do not follow the target's law: in {c.name}, {stratum}, ")
    assert stratum == c.details["worst_stratum"]
    for label, o, e in _top_cells(c.details["worst_stratum_bins"]):
        assert _said(label, o, e) in text
    assert "Holm" not in text and "e-process" not in text and "sorted_mass-bins" not in text  # plain words
    # the verbatim headline stays, word for word, for terminal / JSON parity
    assert f'<h2 class="headline FAIL">{html.escape(v.headline())}</h2>' in page("fail")


def test_fail_rows_have_no_detectable_tv_but_pass_rows_do(verdicts, page):
    for name in ("fail", "whitebox", "eprocess"):
        fails = [r for r in _rows(page(name)) if "class='FAIL'" in r]
        assert fails
        for r in fails:
            assert "detects TV" not in r and "&ndash;" in r
    (c,) = verdicts["pass"].checks
    (row,) = _rows(page("pass"))
    assert f"{c.eps:.4f}" in row
    (c,) = verdicts["inconclusive"].checks
    (row,) = _rows(page("inconclusive"))
    assert f"{c.eps:.4f}" in row


def test_pass_and_inconclusive_statements_say_what_was_reached(verdicts, page):
    v = verdicts["pass"]
    text = _plain_html(page("pass"))
    assert text.startswith("No deviation found") and f"TV >= {v.eps:.3g}" in text and f"{v.samples:,}" in text
    v = verdicts["inconclusive"]
    text = _plain_html(page("inconclusive"))
    assert text.startswith("Not settled: no deviation was found")
    assert f"TV >= {v.eps:.3g}, above the requested {v.eps_requested:g}" in text
    assert v.needed["statement"] in text


def test_eprocess_fail_is_said_without_jargon_and_points_at_cells_elsewhere(verdicts, page):
    v = verdicts["eprocess"]
    c, _, _ = v.first_failure()
    assert c.pvalue is None and "stopped early on decisive evidence" in c.summary  # the case the user met
    text = _plain_html(page("eprocess"))
    assert f"likelihood ratio of {math.exp(c.details['eprocess_max_log_e']):.2g} to 1" in text
    assert "crossed 1/alpha" not in text and "max e" not in text
    others = [x for x in v.checks if x.status == FAIL and x.pvalue is not None]
    if others:  # the strongest failure with cells is named with them
        best = min(others, key=lambda x: x.pvalue)
        assert "Cells that moved elsewhere: in " + best.name.split(" / ")[0] in text


def test_whitebox_statements(verdicts):
    v = verdicts["whitebox"]
    c, stratum, _ = v.first_failure()
    assert stratum == "white-box rejected draft and replacement independent"
    text = plain_statement(v)
    assert text.startswith("The replacement after a rejection depends on the rejected draft: in ")
    (entry,) = [w for w in c.details["whitebox"] if w["stratum"] == stratum[len("white-box ") :]]
    cell = entry["result"]["worst_cells"][0]  # the record of the stratum's test, as data
    assert _said(cell["label"], cell["observed"], cell["expected"]) in text
    # an exact white-box failure says what cannot happen, not "TV=1.0000 [0.0000, 1.0000]"
    v = verdicts["whitebox_exact"]
    c, _, _ = v.first_failure()
    assert "exact failure: " in c.summary and "[0.0000, 1.0000]" not in c.summary and "TV=" not in c.summary
    text = plain_statement(v)
    assert text.startswith("The rounds do what the full rule never does: in ")
    assert c.summary.split("exact failure: ", 1)[1].split(" (Holm")[0].split(";")[0] in text


def test_ratio_plot_marks_the_cells_that_moved_most(verdicts, page):
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    c, _, _ = verdicts["fail"].first_failure()
    for emphasize in (True, False):  # red marks only where the plotted stratum rejected
        fig = check_figure(c.details, emphasize=emphasize)
        top = fig.axes[0]
        assert top.get_ylabel() == "observed / expected (log scale)" and top.get_yscale() == "log"
        marks = {t.get_text(): to_hex(t.get_color()) for t in top.texts}
        for label, o, e in _top_cells(c.details["worst_stratum_bins"]):
            k = re.search(r"mass bin (\d+)/", label).group(1)
            (color,) = [col for text, col in marks.items() if text.startswith(f"bin {k}: {o:,.0f} vs {e:,.1f} (z ")]
            assert color == ("#cc3311" if emphasize else "#555555")
        plt.close(fig)
    assert page("fail").count("data:image/png;base64,") == 1
    assert "observed / expected per sorted-mass bin of " + c.details["worst_stratum"] in html.unescape(page("fail"))


def test_accepted_drafts_plot_overlays_the_expected_law_when_recorded(verdicts, page):
    import matplotlib.pyplot as plt

    c, _, _ = verdicts["fail"].first_failure()
    law = c.details["acceptance"]["predicted_accepted_law_full_rule"]
    fig = check_figure(c.details)
    acc = next(ax for ax in fig.axes if ax.get_title() == "accepted drafts per round")
    assert any(np.allclose(line.get_ydata(), law) for line in acc.get_lines())
    assert any("expected" in t.get_text() for t in acc.get_legend().get_texts())
    plt.close(fig)
    assert "accepted drafts per round with the full rule's expected law" in html.unescape(page("fail"))
    # a context pair records no law: the panel says so instead of drawing one
    c, _, _ = verdicts["eprocess"].first_failure()
    assert "predicted_accepted_law_full_rule" not in c.details["acceptance"]
    fig = check_figure(c.details)
    acc = next(ax for ax in fig.axes if ax.get_title().startswith("accepted drafts per round"))
    assert "no expected law recorded" in acc.get_title() and len(acc.get_lines()) == 0
    plt.close(fig)


def test_tv_interval_agrees_with_a_test_that_rejected():
    # one cell out of 30 moved: Pearson rejects while the simultaneous L1 bound still reaches 0
    exp = np.full(30, 1000.0)
    obs = exp.copy()
    obs[0], obs[1] = 1200, 800
    r = cells_result("pearson", obs, exp, [f"cell {i}" for i in range(30)], lambda_="pearson")
    assert r.pvalue < 1e-3 and r.tv_interval[0] == 0.0
    assert "[0.0000" not in r.tv_text() and f"at most {r.tv_interval[1]:.4f}" in r.tv_text()
    msg = failure_message("unit", "all positions", r, r.pvalue)
    assert "[0.0000" not in msg and "the test, not this looser bound, shows it is above 0" in msg
    # a test that did not reject keeps its whole interval
    calm = cells_result("pearson", exp, exp, [f"cell {i}" for i in range(30)], lambda_="pearson")
    assert calm.tv_text() == f"{calm.tv_estimate:.4f} [0.0000, {calm.tv_interval[1]:.4f}]"


def test_acceptance_rate_interval_is_an_interval_on_tv():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])  # beta = sum min(p, q) = 0.7
    for k in (700, 900):  # at the theory, and far above it
        (acc, *_) = stratified_position_tests(p, q, 1000, np.arange(1000) < k, np.zeros(1000, dtype=int))
        lo, hi = acc.result.tv_interval
        assert lo <= acc.result.tv_estimate <= hi  # the interval is around |rate - beta|, not around the rate
        assert (lo > 0) == (acc.result.pvalue < 1e-3)
