"""A self-contained HTML report: the verdict, the checks, the evidence, and plots embedded as PNG.

The statistics open with a statement in plain words (:func:`plain_statement`): what failed, where,
and the cells that moved most, observed against expected, read from the failing check's
``details``; then :meth:`Verdict.headline`, word for word what the terminal prints and the JSON
holds under ``headline``. Evidence lists each cell once (repeated entries of one cell are added).

Plots per sampling setting (each labelled with what it is: *observed* counts come from the
audit's samples, *expected*/*predicted* values are computed from the target and draft laws):
observed / expected per sorted-mass bin of the worst stratum, numbered as in the evidence ("mass
bin k/B", 1 = the target's most probable tokens), with the band chance alone gives and the most
deviating bins marked; the PIT histogram (flat under H0); observed accepted drafts per round with
the full rule's truncated geometric (product form) law overlaid; observed tokens per round against
the product-form prediction, as the speedup model of the seed article's Fig. 3 would turn them
into speedups at an assumed cost ratio c.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ...stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome, Verdict

if TYPE_CHECKING:  # matplotlib is optional and loaded only to draw
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["write_html", "render_html", "plain_statement", "check_figure"]

COST_RATIO = 0.05  # draft/target cost ratio assumed by the speedup panel (a model input, not a measurement)
MARKED = 3  # cells named in the statement and marked in the ratio plot

_NOT_TARGET = "The emitted tokens do not follow the target's law: "
_TEST_WORDS = {  # GofResult.test of the default stream test's components
    "sorted_mass-bins": "counts in bins of equal target mass",
    "rank-bins": "counts of the target's most likely tokens and the rest",
    "hash-bins": "counts in salted hash buckets of token ids",
    "pit-anderson-darling": "the probability integral transform (Anderson-Darling)",
    "pit-anderson-darling-id-order": "the probability integral transform in id order (Anderson-Darling)",
    "pit-ks": "the probability integral transform (Kolmogorov-Smirnov)",
    "loglik-score": "the log-likelihood of the emitted tokens",
}
_EPS_REACHED = "eps reached (TV these samples detect)"
_REPEAT = "outcomes given the draft repeat no more than chance"  # an e-process, not a cell test
#: what the failure of each white-box family (StratumResult.family) of a declared full rule says
_WHITEBOX_WORDS = {
    "draft tokens ~ q": "The drafts do not follow the draft model's law q",
    "acceptance given draft ~ Bernoulli(min(1, p/q))": "Drafts are accepted more or less often than min(1, p/q) allows",
    "acceptance ~ Bernoulli(sum min(p, q))": "Drafts are accepted at a rate other than sum min(p, q)",
    "rejected draft and replacement independent": "The replacement after a rejection depends on the rejected draft",
    _REPEAT: "What follows a draft repeats more often than chance after the same draft",
    "accepted tokens ~ min(p, q) / beta": "Accepted tokens do not follow min(p, q) / beta",
    "replacements ~ (p - q)+ / (1 - beta)": "Replacements after a rejection do not follow the residual (p - q)+",
    "bonus tokens ~ p": "Bonus tokens (after every draft was accepted) do not follow the target p",
}


def _fig_to_b64(fig: Figure) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


# -- the statement in plain words --------------------------------------------------------------
def _component(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A test's name, p-value, exactness and worst cells from its record (GofResult.record())."""
    if not isinstance(record, dict) or "test" not in record:
        return None
    cells = [(str(c["label"]), float(c["observed"]), float(c["expected"])) for c in record.get("worst_cells", [])]
    exact = bool(record.get("exact_failure"))
    stat = math.inf if exact or record.get("statistic") is None else float(record["statistic"])
    p = 0.0 if exact else float(record["pvalue"])
    note = str(record.get("why", "")) if exact else ""
    return {"test": record["test"], "p": p, "stat": stat, "exact": exact, "note": note, "cells": cells}


def _label_words(label: str) -> str:
    return label.replace(" (by descending p)", "")


def _count(x: float) -> str:
    return f"{x:,.0f}" if abs(x - round(x)) < 1e-9 else f"{x:,.1f}"


def _cells_words(cells: Iterable[tuple[str, float, float]]) -> str:
    """'mass bin 31/32 was seen 425 times where 27.3 were expected; ...' (cells merged by label)."""
    merged: dict[str, list[float]] = {}
    for lab, o, e in cells:
        merged.setdefault(lab, [0.0, 0.0])
        merged[lab][0] += o
        merged[lab][1] += e
    return "; ".join(
        f"{_label_words(lab)} was seen {_count(o)} time{'' if o == 1 else 's'} where {e:,.1f} "
        f"{'was' if e == 1 else 'were'} expected"
        for lab, (o, e) in list(merged.items())[:MARKED]
    )


def _top_cells(wb: dict[str, Any], k: int = MARKED) -> list[tuple[str, float, float]]:
    """The k cells of the recorded bins with the largest standardized residual (the test's order)."""
    o, e = np.asarray(wb.get("observed") or [], dtype=float), np.asarray(wb.get("expected") or [], dtype=float)
    labels = wb.get("labels") or [f"cell {j + 1}" for j in range(len(o))]
    if not len(o) or len(labels) != len(o):
        return []
    resid = np.abs(o - e) / np.sqrt(np.maximum(e, 1e-12))
    return [(str(labels[j]), float(o[j]), float(e[j])) for j in np.argsort(-resid, kind="stable")[:k]]


def _unit_words(c: CheckOutcome) -> str:
    """'settings[0] default (low-overlap pair)': the unit's setting and pair, from its details."""
    d = c.details if isinstance(c.details, dict) else {}
    setting, kind = d.get("setting"), d.get("pair_kind")
    if not isinstance(setting, str):
        return c.name
    return f"{setting} ({kind}-overlap pair)" if kind in ("low", "high") else setting


def _explain(text: str) -> str:
    """One sentence on the cell names the statement uses."""
    notes = []
    if "mass bin" in text:
        notes.append(
            "mass bin k/B: the tested law's tokens by descending probability in B bins of equal mass, 1 = the most likely"
        )
    if re.search(r"\brank \d+ token", text):
        notes.append("rank k token: the tested law's k-th most likely token")
    if "PIT decile" in text:
        notes.append(
            "PIT decile k: the k-th tenth of the tested law's cumulative probability, most likely tokens first"
        )
    return f" ({'; '.join(notes)}.)" if notes else ""


def _test_words(test: str) -> str:
    return _TEST_WORDS.get(test, test)


def _plain_eprocess(c: CheckOutcome, unit: str, *, pooled: bool = True) -> str:
    """The sequential e-process stopped the unit (conclude_unit: no fixed-sample stratum failed);
    ``pooled``: add the pooled bins' largest moves (small: the deviation shows context by context)."""
    d = c.details or {}
    log_e = float(d.get("eprocess_max_log_e", math.inf))
    e = f"{math.exp(log_e):.2g}" if log_e < 700 else f"e^{log_e:.0f}"
    smallest = min((s["pvalue_holm"] for s in d.get("strata", [])), default=1.0)
    cells = _cells_words(_top_cells(d.get("worst_stratum_bins") or {})) if pooled else ""
    return (
        f"{_NOT_TARGET}in {unit}, the sequential test (each context's "
        f"tokens against that context's own law) reached a likelihood ratio of {e} to 1 against it in {c.n:,} "
        f"tokens; pooled over the contexts, no cell moved beyond chance (smallest adjusted p-value {smallest:.2g})"
        + (f"; their largest moves, in {d.get('worst_stratum')}: {cells}." if cells else ".")
    )


def _plain_whitebox(c: CheckOutcome, unit: str, name: str, body: str) -> str:
    """A white-box stratum of a declared full rule failed: what that stratum says, with its cells."""
    entry = next((w for w in (c.details or {}).get("whitebox", []) if w["stratum"] == name), None)
    comp = _component(entry["result"]) if entry else None
    family = entry.get("family", name) if entry else name
    lead = _WHITEBOX_WORDS.get(family, name)
    if comp is None:
        return f"{lead}: in {unit}, {body}"
    if comp["exact"]:  # something the full rule never does, whatever the stratum tests
        cells = f" ({_cells_words(comp['cells'])})" if comp["cells"] else ""
        return f"The rounds do what the full rule never does: in {unit}, {name}: {comp['note']}{cells}."
    if comp["cells"]:
        return f"{lead}: in {unit}, {_cells_words(comp['cells'])} (p = {c.pvalue:.2g} after adjustment)."
    if family == _REPEAT:  # an e-process: its statistic is max log e
        return f"{lead}: in {unit}, a likelihood ratio of e^{comp['stat']:.0f} against chance (p = {c.pvalue:.2g})."
    return f"{lead}: in {unit}, {body}"


def _plain_stream(c: CheckOutcome, unit: str, stratum: str | None, body: str, lead: str = _NOT_TARGET) -> str:
    """A stratum of the emitted tokens failed: its worst test's cells (all bins when it is the
    sorted-mass test of the recorded worst stratum); ``lead`` opens the sentence."""
    d = c.details or {}
    entry = next((s for s in d.get("strata", []) if s["stratum"] == stratum), None)
    comps = [x for x in (_component(t) for t in (entry or {}).get("components", [])) if x]
    comp = min(comps, key=lambda x: x["p"]) if comps else None  # the stratum's worst test, as conclude picks it
    if comp is None or (not comp["cells"] and not comp["exact"]):
        return f"{lead}in {unit}, {stratum}: {body}"
    if comp["exact"]:
        return f"The implementation emitted tokens the target's law never emits: in {unit}, {stratum}, {comp['note']}."
    bins = d.get("worst_stratum_bins") or {}
    use_bins = comp["test"] == "sorted_mass-bins" and stratum == d.get("worst_stratum") and bins.get("observed")
    cells = _cells_words(_top_cells(bins) if use_bins else comp["cells"])
    return (
        f"{lead}in {unit}, {stratum}, {cells}. "
        f"Test: {_test_words(comp['test'])}, p = {c.pvalue:.2g} after adjustment for the unit's strata."
    )


def _plain_check(v: Verdict, c: CheckOutcome, lead: str = _NOT_TARGET) -> str:
    """The plain statement of one failed check (located as the headline locates it); ``lead``
    opens a statement of emitted tokens (none when it continues another)."""
    _, stratum, body = dataclasses.replace(v, checks=[c]).first_failure() or (c, None, c.summary)
    if c.kind == "exact" or not isinstance(c.details, dict):
        return f"An exact check failed (no sampling error): {c.name}: {body}"
    unit = _unit_words(c)
    if c.pvalue is None:
        return _plain_eprocess(c, unit)
    if c.whitebox is not None:
        return _plain_whitebox(c, unit, c.whitebox, body)
    return _plain_stream(c, unit, stratum, body, lead)


def _plain_fail(v: Verdict) -> str:
    first = v.first_failure()
    if first is None:
        return v.headline()
    c = first[0]
    failed = [x for x in v.checks if x.status == FAIL and x is not c]
    # an e-process or exact-check FAIL names no cells that moved: the strongest failure with a p-value does
    other = min(
        (x for x in failed if x.pvalue is not None and isinstance(x.details, dict)),
        key=lambda x: math.inf if x.pvalue is None else x.pvalue,  # never None here (filtered above)
        default=None,
    )
    eprocess = c.pvalue is None and c.kind == "statistical" and isinstance(c.details, dict)
    text = _plain_eprocess(c, _unit_words(c), pooled=other is None) if eprocess else _plain_check(v, c)
    text = text if text.endswith(".") else text + "."
    if other is not None and (eprocess or c.kind == "exact"):
        text += " Cells that moved elsewhere: " + _plain_check(v, other, lead="")
    tail = f" {len(failed)} more check{'s' if len(failed) > 1 else ''} failed (table below)." if failed else ""
    return text + _explain(text) + tail


def plain_statement(v: Verdict) -> str:
    """The verdict in plain words: for a FAIL what failed, where, and the cells that moved most."""
    if v.status == FAIL:
        return _plain_fail(v)
    if v.status == PASS:
        if v.checks and all(c.kind == "exact" for c in v.checks if c.status in (PASS, FAIL)):
            return (
                "Every exact check held (no sampling error): "
                + ", ".join(c.name for c in v.checks if c.status == PASS)
                + "."
            )
        units = sum(c.kind == "statistical" and c.status == PASS for c in v.checks)
        where = "in the one unit tested" if units == 1 else f"in each of the {units} units tested (setting x pair)"
        return (
            f"No deviation found: {where}, the emitted tokens follow the target's law "
            f"as far as {v.samples:,} samples tell; a deviation of TV >= {v.eps:.3g} on the test's cells would have "
            f"been caught with probability at least {1 - v.beta:g}."
        )
    open_ = [c.name for c in v.checks if c.status == INCONCLUSIVE]
    reach = (
        f"the samples collected only detect deviations of TV >= {v.eps:.3g}, above the requested {v.eps_requested:g}"
        if v.eps is not None and v.eps < 1
        else "too few samples were collected to detect any deviation"
    )
    need = (v.needed or {}).get("statement")
    return (
        f"Not settled: no deviation was found, but {reach}"
        + (f" (in {', '.join(open_[:3])}{', ...' if len(open_) > 3 else ''})" if open_ else "")
        + (f". What would settle it: {need}" if isinstance(need, str) else "")
        + "."
    )


# -- plots ---------------------------------------------------------------------------------------
def _bin_numbers(wb: dict[str, Any], n: int) -> list[str] | None:
    """Tick labels numbering the plotted cells as the evidence does (the mass bins each cell pools, 1-based)."""
    members = wb.get("members")
    if members and len(members) == n:
        return ["+".join(str(i + 1) for i in m[:3]) + ("+..." if len(m) > 3 else "") for m in members]
    if n == wb.get("n_bins", 32):
        return [str(k) for k in range(1, n + 1)]  # no pooling: cell j is mass bin j + 1
    return None


def _ratio_format(y: float, _pos: int | None = None) -> str:
    return f"{y:g}" if y >= 1 else f"1/{1 / y:g}"


def _panel_ratio(ax: Axes, d: dict[str, Any], emphasize: bool) -> None:
    """Observed / expected per sorted-mass bin of the worst stratum (log scale), with the band that
    chance alone gives (expected +- 2 sd) and the most deviating bins marked, as the statement names
    them; in red (``emphasize``) only where this stratum's test rejected, since some bins of a
    lossless sample leave the 2 sd band by chance."""
    wb = d.get("worst_stratum_bins") or {}
    o, e = np.asarray(wb["observed"], dtype=float), np.asarray(wb["expected"], dtype=float)
    e = np.maximum(e, 1e-12)
    x, r = np.arange(len(o)), o / e
    band_lo, band_hi = np.maximum(1 - 2 / np.sqrt(e), 0.05), 1 + 2 / np.sqrt(e)
    pos = r[r > 0]
    lo = min(pos.min() if len(pos) else 1.0, band_lo.min(), 0.7) / 2.5  # room for the marks below
    hi = max(r.max(), band_hi.max(), 1.4) * 3  # and above, and for the legend
    shown = np.maximum(r, lo * 1.05)  # a bin never seen sits on the floor, marked below
    z = (o - e) / np.sqrt(e)
    top = np.argsort(-np.abs(z), kind="stable")[:MARKED]
    out = np.isin(x, top) & (np.abs(z) > 2) & emphasize
    ax.bar(x, band_hi - band_lo, 0.9, bottom=band_lo, color="#e4e4e4", label="chance: expected +- 2 sd")
    ax.bar(
        x, shown - 1, 0.6, bottom=1, color=np.where(out, "#cc3311", "#4477aa"),
        label="observed / expected" + (" (red: the bins that moved most)" if emphasize else " (the test did not reject here)"),
    )  # fmt: skip
    ax.axhline(1, color="k", lw=0.8)
    ticks = _bin_numbers(wb, len(o))
    labels = wb.get("labels") or [""] * len(o)
    names = [f"bin {ticks[j]}" if ticks else _label_words(str(labels[j]))[:20] for j in range(len(o))]
    _mark_bins(ax, sorted(int(j) for j in top), shown, o, e, names, out)
    ax.set_ylim(lo, hi)
    _ratio_axes(ax, d.get("worst_stratum"), ticks)


def _mark_bins(
    ax: Axes,
    marked: list[int],
    shown: npt.NDArray[np.float64],
    o: npt.NDArray[np.float64],
    e: npt.NDArray[np.float64],
    names: list[str],
    red: npt.NDArray[np.bool_],
) -> None:
    """Label the marked bins with their counts and standardized residual; neighbours on the same
    side of 1 are staggered so that their labels do not overlap."""
    last: dict[bool, tuple[int, int]] = {}  # side -> (bin, level) of the previous mark there
    for j in marked:
        up = bool(shown[j] >= 1)
        prev = last.get(up)
        level = prev[1] + 1 if prev is not None and j - prev[0] <= 4 else 0
        last[up] = (j, level)
        off = 3 + 11 * level
        ax.annotate(
            f"{names[j]}: {o[j]:,.0f} vs {e[j]:,.1f} (z {(o[j] - e[j]) / np.sqrt(e[j]):+.1f})",
            (j, shown[j]),
            xytext=(0, off if up else -off),
            textcoords="offset points",
            ha="right"
            if j > 0.85 * (len(o) - 1)
            else "left"
            if j < 0.15 * (len(o) - 1)
            else "center",  # inside the axes
            va="bottom" if up else "top",
            fontsize=8,
            color="#cc3311" if red[j] else "#555555",
        )


def _ratio_axes(ax: Axes, stratum: str | None, ticks: list[str] | None) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(_ratio_format))
    if ticks:
        x, step = np.arange(len(ticks)), max(1, len(ticks) // 40)
        ax.set_xticks(x[::step], ticks[::step], fontsize=7)
        ax.set_xlabel("mass bin k (1 = the target's most probable tokens), as in the evidence", fontsize=7)
    else:
        ax.set_xticks([])
        ax.set_xlabel("cells in the test's order (small bins pooled)", fontsize=7)
    ax.set_title(
        f"{stratum} (the stratum with the smallest p-value): observed / expected per sorted-mass bin", fontsize=9
    )
    ax.set_ylabel("observed / expected (log scale)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left")


def _panel_pit(ax: Axes, h: npt.NDArray[Any]) -> None:
    ax.bar(np.arange(len(h)) / len(h), h, 1 / len(h), align="edge", color="#4477aa", label="observed")
    ax.axhline(h.sum() / len(h), color="k", lw=1, label="expected (flat)")
    ax.set_title("PIT histogram, all tokens (flat under H0)", fontsize=8)
    ax.set_xlabel("PIT value", fontsize=7)
    ax.legend(fontsize=7, loc="lower right", framealpha=0.9)


def _panel_accepted(ax: Axes, acc: dict[str, Any]) -> None:
    """Observed share of rounds per number of accepted drafts, with the full rule's law overlaid."""
    ah = np.asarray(acc["accepted_hist"], dtype=float)
    k, share = np.arange(len(ah)), ah / ah.sum()
    ax.bar(k, share, 0.6, label=f"observed ({int(ah.sum()):,} rounds)", color="#4477aa")
    pred = np.asarray(acc.get("predicted_accepted_law_full_rule") or [], dtype=float)
    if len(pred) == len(ah):
        sd = np.sqrt(pred * (1 - pred) / ah.sum())
        ax.plot(k, pred, color="#cc3311", lw=1, ls="--")
        ax.errorbar(
            k, pred, yerr=2 * sd, fmt="D", ms=5, capsize=3, color="#cc3311", label="expected: full rule's law (+- 2 sd)"
        )
    ax.set_ylim(0, max(share.max(), pred.max() if len(pred) else 0.0) * 1.45)  # room for the legend
    ax.set_xticks(k)
    title = "accepted drafts per round" + (
        ""
        if len(pred) == len(ah)
        else "\n(no expected law recorded for this pair: its acceptance depends on the context)"
    )
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("accepted drafts", fontsize=7)
    ax.set_ylabel("share of rounds", fontsize=7)
    ax.legend(fontsize=7, loc="upper left" if share[0] < share[-1] else "upper right")


def _panel_speedup(ax: Axes, acc: dict[str, Any]) -> None:
    from ...theory import expected_speedup, expected_tokens_per_round

    gamma = len(acc["per_position_alpha"])
    a = np.linspace(0.05, 0.99, 60)
    for g in sorted({2, gamma, 8}):
        ax.plot(
            a,
            [float(expected_speedup(x, g, COST_RATIO)) for x in a],
            lw=2 if g == gamma else 0.8,
            label=f"model, gamma={g}" + (" (this audit)" if g == gamma else ""),
        )
    alpha_pq = float(np.mean(acc["per_position_alpha"]))  # computed from p and q, not measured
    obs_tokens = acc["mean_accepted"] + 1
    pred = acc.get("predicted_mean_accepted_full_rule")
    pred_tokens = pred + 1 if pred is not None else float(expected_tokens_per_round(alpha_pq, gamma))
    cost = gamma * COST_RATIO + 1
    ax.plot([alpha_pq], [obs_tokens / cost], "ko", label=f"observed tokens/round {obs_tokens:.2f}")
    ax.plot([alpha_pq], [pred_tokens / cost], "rx", label=f"predicted tokens/round {pred_tokens:.2f} (product form)")
    ax.set_xlabel("alpha = sum min(p, q), computed from p and q", fontsize=7)
    ax.set_ylabel(f"model speedup at c = {COST_RATIO:g}", fontsize=7)
    ax.set_title("tokens per round as speedup (Fig. 3 model; c assumed)", fontsize=8)
    ax.legend(fontsize=6)


def _no_bins(ax: Axes) -> None:
    ax.axis("off")
    ax.text(
        0.5, 0.5,
        "no bin counts for the worst stratum:\nit failed exactly (see the evidence),\ne.g. a token of target probability 0",
        ha="center", va="center", fontsize=8, transform=ax.transAxes,
    )  # fmt: skip


def check_figure(d: dict[str, Any], *, emphasize: bool = False) -> Figure | None:
    """The matplotlib figure of a check's details (None when it recorded no plot data): the
    observed / expected ratio per bin over the full width, then the PIT histogram, the accepted
    drafts per round with the expected law, and the speedup model. ``emphasize``: the plotted stratum
    rejected (its marked bins are drawn in red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wb, h, acc = d.get("worst_stratum_bins") or {}, np.asarray(d.get("pit_hist", [])), d.get("acceptance") or {}
    has_speedup = bool(acc.get("per_position_alpha")) and acc.get("mean_accepted") is not None
    if not (wb.get("observed") or h.size or acc.get("accepted_hist") or has_speedup):
        return None
    if not wb.get("observed"):  # one row: the note on the exact failure, then the three panels
        fig, row = plt.subplots(1, 4, figsize=(16, 3.4))
        _no_bins(row[0])
        axes = list(row[1:])
    else:  # the ratio plot gets the full width (its marks need room); the other three share the row below
        fig = plt.figure(figsize=(16, 7))
        grid = fig.add_gridspec(2, 3, height_ratios=[1.1, 1])
        top, axes = fig.add_subplot(grid[0, :]), [fig.add_subplot(grid[1, j]) for j in range(3)]
        _panel_ratio(top, d, emphasize)
    _panel_pit(axes[0], h) if h.size else axes[0].axis("off")
    _panel_accepted(axes[1], acc) if acc.get("accepted_hist") else axes[1].axis("off")
    _panel_speedup(axes[2], acc) if has_speedup else axes[2].axis("off")
    return fig


def _figure_alt(name: str, d: dict[str, Any]) -> str:
    """The figure's text alternative: what each panel shows (and which bins are marked)."""
    wb, acc = d.get("worst_stratum_bins") or {}, d.get("acceptance") or {}
    parts = []
    if wb.get("observed"):
        marked = ", ".join(_label_words(lab) for lab, _, _ in _top_cells(wb))
        parts.append(f"observed / expected per sorted-mass bin of {d.get('worst_stratum')} ({marked} marked)")
    if acc.get("accepted_hist"):
        with_law = len(acc.get("predicted_accepted_law_full_rule") or []) == len(acc["accepted_hist"])
        parts.append("accepted drafts per round" + (" with the full rule's expected law" if with_law else ""))
    return f"plots for {name}: " + "; ".join(parts + ["PIT histogram", "tokens per round as speedup"])


def _plots(v: Verdict) -> list[tuple[str, str, str]]:
    """(check name, alt text, PNG as base64) per check that recorded plot data."""
    if not _has_matplotlib():
        return []
    out = []
    for c in v.checks:
        if isinstance(c.details, dict) and c.details:
            d = c.details
            worst_p = next(
                (s["pvalue_holm"] for s in d.get("strata", []) if s["stratum"] == d.get("worst_stratum")), 1.0
            )
            # red marks only where the plotted stratum is as significant as the failure itself
            fig = check_figure(d, emphasize=c.status == FAIL and c.pvalue is not None and worst_p <= c.pvalue)
            if fig is not None:
                out.append((c.name, _figure_alt(c.name, c.details), _fig_to_b64(fig)))
    return out


# -- the page ------------------------------------------------------------------------------------
def _evidence_items(v: Verdict) -> list[str]:
    seen, items = set(), []
    for e in v.evidence:
        if e not in seen:
            seen.add(e)
            items.append(e)
    return items


def _diagnosis_html(v: Verdict) -> str:
    """The diagnosis of a FAIL, first on the page: the class, what to check, the facts, and the
    ranked candidates with their likelihood ratios and the reports they were modelled on."""
    d = v.diagnosis or {}
    if not d.get("lead"):
        return ""
    esc = html.escape
    facts = "".join(f"<li>{esc(f)}</li>" for f in d.get("facts", []))
    rows = "".join(
        f"<tr><td>{i + 1}</td><td><b>{esc(c['class'])}</b> {esc(c.get('parameter', ''))}</td>"
        f"<td class='num'>e^{c['log_likelihood_ratio_vs_target']:.1f}</td><td "
        f"class='num'>{c['explained_share']:.0%}</td>"
        f"<td>{esc(c['mechanism'])}</td><td>{esc(', '.join(c['sources']))}</td></tr>"
        for i, c in enumerate(d.get("candidates", []))
    )
    table = (
        "<table><tr><th>#</th><th>class</th><th>likelihood ratio vs target</th><th>explains</th>"
        f"<th>mechanism</th><th>modelled on</th></tr>{rows}</table>"
        if rows
        else ""
    )
    return (
        f"<div class='diagnosis'><h2>{esc(d['lead'])}</h2><ul>{facts}</ul>{table}"
        f"<p class='method'>{esc(d.get('method', ''))}</p></div><h3>Statistics</h3>"
    )


def _check_rows(v: Verdict) -> str:
    """The checks table; a FAIL row has no detectable-TV figure (a FAIL rests on its evidence)."""
    esc = html.escape
    rows = []
    for c in v.checks:
        failed = c.status == FAIL
        eps = "&ndash;" if failed and c.kind == "statistical" else ("" if c.eps is None else f"{c.eps:.4f}")
        summary = c.summary
        rows.append(
            f"<tr><td>{esc(c.name)}</td><td>{esc(c.kind)}</td><td class='{esc(c.status)}'>{esc(c.status)}</td>"
            f"<td class='num'>{'' if not c.n else f'{c.n:,}'}</td><td class='num'>{eps}</td>"
            f"<td>{esc(summary)}</td></tr>"
        )
    return "".join(rows)


def _facts_html(v: Verdict) -> str:
    facts = [
        ("status", v.status),
        ("false-fail rate alpha", f"{v.alpha:g}"),
        ("false-pass rate beta", f"{v.beta:g}"),
        ("eps requested", "" if v.eps_requested is None else f"{v.eps_requested:g}"),
        (_EPS_REACHED, "" if v.eps is None else f"{v.eps:.4g}"),
        ("samples", f"{v.samples:,}"),
        ("seconds", f"{v.seconds:.1f}"),
        ("seed", str(v.seed)),
    ]
    if v.status == FAIL:  # a FAIL rests on its evidence, not on an eps
        facts = [f for f in facts if f[0] != _EPS_REACHED]
    return "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(x)}</td></tr>" for k, x in facts)


_STYLE = """
body{font-family:sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:4px 8px;vertical-align:top;text-align:left}
td{overflow-wrap:anywhere}td:nth-child(2),td:nth-child(3){overflow-wrap:normal;white-space:nowrap}
td.num{text-align:right;white-space:nowrap}
.PASS{color:#070}.FAIL{color:#b00}.INCONCLUSIVE{color:#a60}
.statement{border-left:6px solid currentColor;background:#fafafa;padding:.5em .9em;margin:1em 0}
.statement .plain{font-size:1.08em;font-weight:bold;line-height:1.45;color:#222;margin:.2em 0}
.statement .said{color:#555;font-size:.85em;margin:.6em 0 .1em}
h2.headline{font-size:.9em;font-weight:normal;font-family:monospace;line-height:1.4;margin:0}
pre{background:#f6f6f6;padding:1em;overflow:auto;max-height:30em}img{max-width:100%}
.facts th{font-weight:normal;color:#555}
.diagnosis{border-left:6px solid #b00;background:#fff6f6;padding:.4em 1em;margin:1em 0}
.diagnosis h2{font-size:1.15em;line-height:1.4}
.method{color:#555;font-size:.9em}
"""


def render_html(v: Verdict) -> str:
    esc = html.escape
    plots = _plots(v)
    imgs = "".join(f"<h4>{esc(n)}</h4><img alt='{esc(alt)}' src='data:image/png;base64,{b}'>" for n, alt, b in plots)
    if not imgs:
        imgs = "<p>No plots: " + (
            "matplotlib is not installed.</p>" if not _has_matplotlib() else "no check recorded plot data.</p>"
        )
    evidence = "".join(f"<li>{esc(e)}</li>" for e in _evidence_items(v)) or "<li>none</li>"
    blob = json.dumps(v.to_dict(), indent=1)
    cut = len(blob) > 200_000
    blob = blob[:200_000]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>specverify: {esc(v.subject)} {esc(v.status)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>specverify audit: {esc(v.subject)}</h1>
{_diagnosis_html(v)}<div class="statement {esc(v.status)}"><p class="plain">{esc(plain_statement(v))}</p>
<p class="said">The headline, word for word as the terminal and the JSON give it:</p>
<h2 class="headline {esc(v.status)}">{esc(v.headline())}</h2></div>
<table class="facts">{_facts_html(v)}</table>
<p>Exit code {"0" if v.status == PASS else "1" if v.status == FAIL else "3"}. What PASS, FAIL and INCONCLUSIVE promise: docs/verdict.md.</p>
<h3>Checks</h3>
<table><tr><th>check</th><th>kind</th><th>status</th><th>n</th><th>detects TV &ge; (PASS, INCONCLUSIVE)</th><th>summary</th></tr>{_check_rows(v)}</table>
<h3>Evidence</h3><ul>{evidence}</ul>
<h3>Plots</h3>{imgs}
<h3>Verdict JSON</h3>
<details><summary>show the verdict as JSON{" (truncated; --json writes all of it)" if cut else ""}</summary><pre>{esc(blob)}</pre></details>
</body></html>
"""


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_html(v: Verdict, path: str | os.PathLike[str]) -> None:
    doc = render_html(v)  # render first: a failed render leaves no half-written file
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
