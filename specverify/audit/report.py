"""A self-contained HTML report: the verdict table, evidence, and plots embedded as PNG.

Plots per sampling setting: observed against expected counts over the sorted-mass bins of the
worst stratum; the PIT histogram (flat under H0); accepted drafts per round against the truncated
geometric (product form) law of the full rule; and measured against predicted acceptance and
speedup, over the theory curves of the seed article's Fig. 3.
"""

from __future__ import annotations

import base64
import html
import io
import json

import numpy as np


def _fig_to_b64(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


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
        fig, axes = plt.subplots(1, 4, figsize=(16, 3.2))
        wb = d.get("worst_stratum_bins") or {}
        if wb.get("observed"):
            o, e = np.asarray(wb["observed"]), np.asarray(wb["expected"])
            x = np.arange(len(o))
            axes[0].bar(x - 0.2, e, 0.4, label="expected", color="#bbbbbb")
            axes[0].bar(x + 0.2, o, 0.4, label="observed", color="#4477aa")
            axes[0].set_title(f"{d.get('worst_stratum')}: sorted-mass bins", fontsize=8)
            axes[0].set_xlabel("bin (descending target probability)", fontsize=7)
            axes[0].legend(fontsize=7)
        h = np.asarray(d.get("pit_hist", []))
        if h.size:
            axes[1].bar(np.arange(len(h)) / len(h), h, 1 / len(h), align="edge", color="#4477aa")
            axes[1].axhline(h.sum() / len(h), color="k", lw=1)
            axes[1].set_title("PIT histogram (flat under H0)", fontsize=8)
        acc = d.get("acceptance") or {}
        if acc.get("accepted_hist"):
            ah = np.asarray(acc["accepted_hist"], dtype=float)
            k = np.arange(len(ah))
            axes[2].bar(k - 0.2, ah / ah.sum(), 0.4, label="measured", color="#4477aa")
            if acc.get("predicted_accepted_law_full_rule"):
                axes[2].bar(k + 0.2, acc["predicted_accepted_law_full_rule"], 0.4, label="truncated geometric (full rule)", color="#bbbbbb")
            axes[2].set_title("accepted drafts per round", fontsize=8)
            axes[2].legend(fontsize=7)
        if acc.get("per_position_alpha"):
            a = np.linspace(0.05, 0.99, 60)
            for g in (2, 4, 8):
                axes[3].plot(a, [float(expected_speedup(x, g, 0.05)) for x in a], lw=1, label=f"speedup, gamma={g}, c=0.05")
            meas_a = float(np.mean(acc["per_position_alpha"]))
            gamma = len(acc["per_position_alpha"])
            meas_tokens = acc["mean_accepted"] + 1
            axes[3].plot([meas_a], [meas_tokens / (gamma * 0.05 + 1)], "ko", label="measured (this audit)")
            pred = acc.get("predicted_mean_accepted_full_rule")
            pred_tokens = pred + 1 if pred is not None else float(expected_tokens_per_round(meas_a, gamma))
            axes[3].plot([meas_a], [pred_tokens / (gamma * 0.05 + 1)], "rx", label="predicted (product form)")
            axes[3].set_xlabel("acceptance alpha", fontsize=7)
            axes[3].set_title("speedup vs alpha (Fig. 3 style)", fontsize=8)
            axes[3].legend(fontsize=6)
        out.append((c.name, _fig_to_b64(fig)))
    return out


def write_html(v, path) -> None:
    rows = "".join(
        f"<tr><td>{html.escape(c.name)}</td><td>{c.kind}</td><td class='{c.status}'>{c.status}</td>"
        f"<td>{c.n or ''}</td><td>{'' if c.eps is None else f'{c.eps:.4f}'}</td><td>{html.escape(c.summary)}</td></tr>"
        for c in v.checks
    )
    imgs = "".join(f"<h4>{html.escape(n)}</h4><img src='data:image/png;base64,{b}'/>" for n, b in _plots(v))
    doc = f"""<!doctype html><html><meta charset="utf-8"><title>specverify: {html.escape(v.subject)}</title>
<style>body{{font-family:sans-serif;max-width:1300px;margin:2em auto}}td,th{{border-bottom:1px solid #ddd;padding:4px;vertical-align:top}}
.PASS{{color:#070}}.FAIL{{color:#b00}}.INCONCLUSIVE{{color:#a60}}pre{{background:#f6f6f6;padding:1em;overflow:auto;max-height:30em}}img{{max-width:100%}}</style>
<h1>specverify audit: {html.escape(v.subject)}</h1><h2 class="{v.status}">{html.escape(v.headline())}</h2>
<table><tr><th>check</th><th>kind</th><th>status</th><th>n</th><th>eps</th><th>summary</th></tr>{rows}</table>
<h3>Evidence</h3><ul>{''.join(f'<li>{html.escape(e)}</li>' for e in v.evidence) or '<li>none</li>'}</ul>
<h3>Plots</h3>{imgs or '<p>(matplotlib not installed)</p>'}
<h3>Verdict JSON</h3><pre>{html.escape(json.dumps(v.to_dict(), indent=1)[:50000])}</pre></html>"""
    with open(path, "w") as f:
        f.write(doc)
