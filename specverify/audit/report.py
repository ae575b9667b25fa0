"""A self-contained HTML report (plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
import html
import io
import json


def _plots(v) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out = []
    for c in v.checks:
        acc = (c.details or {}).get("acceptance") if isinstance(c.details, dict) else None
        if not acc or acc.get("predicted_mean_accepted_full_rule") is None:
            continue
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.bar(["measured", "full-rule theory"], [acc["mean_accepted"], acc["predicted_mean_accepted_full_rule"]], color=["#4477aa", "#bbbbbb"])
        ax.set_title(f"{c.name}: accepted drafts / round", fontsize=8)
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=90)
        plt.close(fig)
        out.append(base64.b64encode(buf.getvalue()).decode())
    return out


def write_html(v, path) -> None:
    rows = "".join(
        f"<tr><td>{html.escape(c.name)}</td><td>{c.kind}</td><td class='{c.status}'>{c.status}</td>"
        f"<td>{c.n or ''}</td><td>{'' if c.eps is None else f'{c.eps:.4f}'}</td><td>{html.escape(c.summary)}</td></tr>"
        for c in v.checks
    )
    imgs = "".join(f"<img src='data:image/png;base64,{b}'/>" for b in _plots(v))
    doc = f"""<!doctype html><meta charset="utf-8"><title>specverify: {html.escape(v.subject)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}td,th{{border-bottom:1px solid #ddd;padding:4px;vertical-align:top}}
.PASS{{color:#070}}.FAIL{{color:#b00}}.INCONCLUSIVE{{color:#a60}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style>
<h1>specverify audit: {html.escape(v.subject)}</h1><h2 class="{v.status}">{html.escape(v.headline())}</h2>
<table><tr><th>check</th><th>kind</th><th>status</th><th>n</th><th>eps</th><th>summary</th></tr>{rows}</table>
<h3>Evidence</h3><ul>{''.join(f'<li>{html.escape(e)}</li>' for e in v.evidence) or '<li>none</li>'}</ul>
<h3>Acceptance against theory</h3>{imgs}
<h3>Verdict JSON</h3><pre>{html.escape(json.dumps(v.to_dict(), indent=1)[:20000])}</pre>"""
    with open(path, "w") as f:
        f.write(doc)
