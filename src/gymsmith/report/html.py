"""A self-contained HTML summary of runs: the summary table with inline bar charts."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from pathlib import Path

from gymsmith.runner.local import SummaryRow


def _bar(value: float | None, colour: str) -> str:
    if value is None:
        return "—"
    width = round(120 * value)
    return (f'<svg width="124" height="12" role="img" aria-label="{value:.0%}"><rect width="{width}" height="12" '
            f'fill="{colour}"/></svg> {value:.3f}')


def write_summary_html(rows: list[SummaryRow], path: str | Path, *, title: str, notes: Sequence[str] = ()) -> Path:
    """Write `rows` as an HTML table to `path` (parent folders created); returns the path."""
    body = "\n".join(
        f"<tr><td>{html.escape(r.split)}</td><td>{html.escape(r.agent)}</td><td>{r.difficulty_bin}</td>"
        f"<td>{r.rollouts}</td><td>{r.errors}</td><td>{_bar(r.mean_reward, '#4a7bd0')}</td>"
        f"<td>{_bar(r.acceptance, '#3a9d5d')}</td></tr>" for r in rows)
    notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}th{{background:#f3f3f3}}</style></head>
<body><h1>{html.escape(title)}</h1><p>Generated {time.strftime('%Y-%m-%d %H:%M:%S')} by gymsmith.</p>
<ul>{notes_html}</ul>
<table><thead><tr><th>split</th><th>agent</th><th>difficulty</th><th>rollouts</th><th>errors</th>
<th>mean reward</th><th>acceptance</th></tr></thead><tbody>
{body}
</tbody></table></body></html>
"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
