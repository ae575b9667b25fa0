"""A self-contained HTML report: the verdict, the checks, the evidence, and plots embedded as PNG.

The headline is :meth:`Verdict.headline`, word for word what the terminal prints and the JSON
holds under ``headline``. Evidence lists each cell once (repeated entries of one cell are added).

Plots per sampling setting (each labelled with what it is: *observed* counts come from the
audit's samples, *expected*/*predicted* values are computed from the target and draft laws):
observed against expected counts over the sorted-mass bins of the worst stratum, numbered as in
the evidence ("mass bin k/B", 1 = the target's most probable tokens); the PIT histogram (flat
under H0); observed accepted drafts per round against the full rule's truncated geometric
(product form) law; observed tokens per round against the product-form prediction, as the
speedup model of the seed article's Fig. 3 would turn them into speedups at an assumed cost
ratio c.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re

import numpy as np

from ..stats import FAIL, PASS, collapse_repeated_cells

__all__ = ["write_html", "render_html"]

COST_RATIO = 0.05  # draft/target cost ratio assumed by the speedup panel (a model input, not a measurement)


def _fig_to_b64(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _bin_numbers(wb: dict, n: int) -> list[str] | None:
    """Tick labels numbering the plotted cells as the evidence does ("mass bin k/B" -> k)."""
    labels = wb.get("labels")
    if labels and len(labels) == n:
        out = []
        for lab in labels:
            ks = re.findall(r"mass bin (\d+)/\d+", str(lab))
            out.append("+".join(ks) + ("+..." if str(lab).endswith("...") else "") if ks else str(lab)[:8])
        return out
    if n == wb.get("n_bins", 32):
        return [str(k) for k in range(1, n + 1)]  # no pooling: cell j is mass bin j + 1
    return None


_EVIDENCE_BIN = re.compile(r"mass bin (\d+)/\d+ \(by descending p\): observed ([0-9.]+), expected ([0-9.]+)")


def _evidence_bins(summary: str, o, e) -> list[tuple[int, str]]:
    """(plotted cell, bin number) for the bins the evidence names, matched on their counts."""
    out = []
    for k, obs, exp in _EVIDENCE_BIN.findall(summary or ""):
        hits = np.nonzero((np.abs(o - float(obs)) < 0.5) & (np.abs(e - float(exp)) <= 0.051 + 1e-9 * abs(float(exp))))[
            0
        ]
        if len(hits) == 1:
            out.append((int(hits[0]), k))
    return out


# long: one figure per check, four panels drawn in turn (bins, PIT, accepted lengths, acceptance by position)
def _plots(v) -> list[tuple[str, str]]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    from ..theory import expected_speedup, expected_tokens_per_round

    out = []
    for c in v.checks:
        d = c.details if isinstance(c.details, dict) else None
        if not d:
            continue
        wb = d.get("worst_stratum_bins") or {}
        h = np.asarray(d.get("pit_hist", []))
        acc = d.get("acceptance") or {}
        panels = [
            bool(wb.get("observed")),
            bool(h.size),
            bool(acc.get("accepted_hist")),
            bool(acc.get("per_position_alpha")),
        ]
        if not any(panels):
            continue
        fig, axes = plt.subplots(1, 4, figsize=(16, 3.4))
        if wb.get("observed"):
            o, e = np.asarray(wb["observed"], dtype=float), np.asarray(wb["expected"], dtype=float)
            x = np.arange(len(o))
            axes[0].bar(x - 0.2, e, 0.4, label="expected (target law)", color="#bbbbbb")
            axes[0].bar(x + 0.2, o, 0.4, label="observed", color="#4477aa")
            ticks = _bin_numbers(wb, len(o))
            if ticks:
                step = max(1, len(ticks) // 16)
                axes[0].set_xticks(x[::step], ticks[::step], fontsize=6)
                axes[0].set_xlabel("mass bin k (1 = the target's most probable tokens), as in the evidence", fontsize=7)
            else:
                axes[0].set_xticks([])
                axes[0].set_xlabel(
                    "cells in the test's order (small bins pooled); bins the evidence names are marked", fontsize=7
                )
                for j, label in _evidence_bins(c.summary, o, e):
                    axes[0].annotate(
                        f"bin {label}",
                        (x[j] + 0.2, o[j]),
                        xytext=(0, 3),
                        textcoords="offset points",
                        ha="center",
                        fontsize=7,
                        color="#b00",
                    )
            axes[0].set_title(
                f"{d.get('worst_stratum')}: sorted-mass bins (stratum with the smallest p-value)", fontsize=8
            )
            axes[0].set_ylabel("tokens", fontsize=7)
            axes[0].set_ylim(0, max(o.max(), e.max()) * 1.3)  # room for the legend and the bin marks
            axes[0].legend(fontsize=7)
        else:
            axes[0].axis("off")
            axes[0].text(
                0.5,
                0.5,
                "no bin counts for the worst stratum:\nit failed exactly (see the evidence),\ne.g. a token of target "
                "probability 0",
                ha="center",
                va="center",
                fontsize=8,
                transform=axes[0].transAxes,
            )
        if h.size:
            axes[1].bar(np.arange(len(h)) / len(h), h, 1 / len(h), align="edge", color="#4477aa", label="observed")
            axes[1].axhline(h.sum() / len(h), color="k", lw=1, label="expected (flat)")
            axes[1].set_title("PIT histogram, all tokens (flat under H0)", fontsize=8)
            axes[1].set_xlabel("PIT value", fontsize=7)
            axes[1].legend(fontsize=7, loc="lower right", framealpha=0.9)
        else:
            axes[1].axis("off")
        if acc.get("accepted_hist"):
            ah = np.asarray(acc["accepted_hist"], dtype=float)
            k = np.arange(len(ah))
            axes[2].bar(k - 0.2, ah / ah.sum(), 0.4, label=f"observed ({int(ah.sum()):,} rounds)", color="#4477aa")
            if acc.get("predicted_accepted_law_full_rule"):
                axes[2].bar(
                    k + 0.2,
                    acc["predicted_accepted_law_full_rule"],
                    0.4,
                    label="predicted: truncated geometric (full rule)",
                    color="#bbbbbb",
                )
            top = max((ah / ah.sum()).max(), max(acc.get("predicted_accepted_law_full_rule") or [0]))
            axes[2].set_ylim(0, top * 1.35)  # room for the legend
            axes[2].set_title("accepted drafts per round", fontsize=8)
            axes[2].set_xlabel("accepted drafts", fontsize=7)
            axes[2].set_ylabel("share of rounds", fontsize=7)
            axes[2].legend(fontsize=7)
        else:
            axes[2].axis("off")
        if acc.get("per_position_alpha") and acc.get("mean_accepted") is not None:
            gamma = len(acc["per_position_alpha"])
            a = np.linspace(0.05, 0.99, 60)
            for g in sorted({2, gamma, 8}):
                axes[3].plot(
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
            axes[3].plot([alpha_pq], [obs_tokens / cost], "ko", label=f"observed tokens/round {obs_tokens:.2f}")
            axes[3].plot(
                [alpha_pq], [pred_tokens / cost], "rx", label=f"predicted tokens/round {pred_tokens:.2f} (product form)"
            )
            axes[3].set_xlabel("alpha = sum min(p, q), computed from p and q", fontsize=7)
            axes[3].set_ylabel(f"model speedup at c = {COST_RATIO:g}", fontsize=7)
            axes[3].set_title("tokens per round as speedup (Fig. 3 model; c assumed)", fontsize=8)
            axes[3].legend(fontsize=6)
        else:
            axes[3].axis("off")
        out.append((c.name, _fig_to_b64(fig)))
    return out


def _evidence_items(v) -> list[str]:
    seen, items = set(), []
    for e in v.evidence:
        e = collapse_repeated_cells(e)
        if e not in seen:
            seen.add(e)
            items.append(e)
    return items


def _diagnosis_html(v) -> str:
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


def render_html(v) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(c.name)}</td><td>{esc(c.kind)}</td><td class='{esc(c.status)}'>{esc(c.status)}</td>"
        f"<td class='num'>{'' if not c.n else f'{c.n:,}'}</td><td "
        f"class='num'>{'' if c.eps is None else f'{c.eps:.4f}'}</td>"
        f"<td>{esc(collapse_repeated_cells(c.summary))}</td></tr>"
        for c in v.checks
    )
    plots = _plots(v)
    imgs = "".join(f"<h4>{esc(n)}</h4><img alt='plots for {esc(n)}' src='data:image/png;base64,{b}'>" for n, b in plots)
    if not imgs:
        imgs = "<p>No plots: " + (
            "matplotlib is not installed.</p>" if not _has_matplotlib() else "no check recorded plot data.</p>"
        )
    evidence = "".join(f"<li>{esc(e)}</li>" for e in _evidence_items(v)) or "<li>none</li>"
    facts = [
        ("status", v.status),
        ("false-fail rate alpha", f"{v.alpha:g}"),
        ("false-pass rate beta", f"{v.beta:g}"),
        ("eps requested", "" if v.eps_requested is None else f"{v.eps_requested:g}"),
        ("eps reached (TV these samples detect)", "" if v.eps is None else f"{v.eps:.4g}"),
        ("samples", f"{v.samples:,}"),
        ("seconds", f"{v.seconds:.1f}"),
        ("seed", str(v.seed)),
    ]
    if v.status == FAIL:  # a FAIL rests on its evidence, not on an eps
        facts = [f for f in facts if not f[0].startswith("eps reached")]
    facts_html = "".join(f"<tr><th>{esc(k)}</th><td>{esc(x)}</td></tr>" for k, x in facts)
    blob = json.dumps(v.to_dict(), indent=1)
    cut = len(blob) > 200_000
    blob = blob[:200_000]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>specverify: {esc(v.subject)} {esc(v.status)}</title>
<style>
body{{font-family:sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse}}td,th{{border-bottom:1px solid #ddd;padding:4px 8px;vertical-align:top;text-align:left}}
td.num{{text-align:right;white-space:nowrap}}
.PASS{{color:#070}}.FAIL{{color:#b00}}.INCONCLUSIVE{{color:#a60}}
h2.headline{{font-size:1.1em;line-height:1.4;padding:.6em .8em;border-left:6px solid currentColor;background:#fafafa}}
pre{{background:#f6f6f6;padding:1em;overflow:auto;max-height:30em}}img{{max-width:100%}}
.facts th{{font-weight:normal;color:#555}}
.diagnosis{{border-left:6px solid #b00;background:#fff6f6;padding:.4em 1em;margin:1em 0}}.diagnosis h2{{font-size:1.15em;line-height:1.4}}
.method{{color:#555;font-size:.9em}}
</style></head>
<body>
<h1>specverify audit: {esc(v.subject)}</h1>
{_diagnosis_html(v)}<h2 class="headline {esc(v.status)}">{esc(v.headline())}</h2>
<table class="facts">{facts_html}</table>
<p>Exit code {"0" if v.status == PASS else "1" if v.status == FAIL else "3"}. What PASS, FAIL and INCONCLUSIVE promise: docs/verdict.md.</p>
<h3>Checks</h3>
<table><tr><th>check</th><th>kind</th><th>status</th><th>n</th><th>detects TV &ge;</th><th>summary</th></tr>{rows}</table>
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


def write_html(v, path) -> None:
    doc = render_html(v)  # render first: a failed render leaves no half-written file
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
