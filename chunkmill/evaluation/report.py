"""The results of an evaluation as a terminal table and as a self-contained HTML page (a
table and an inline SVG plot of recall against IoU; no script, no network)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from chunkmill.evaluation import Scores, paired


@dataclass(frozen=True)
class Row:
    label: str
    scores: dict[str, Scores]  # by retriever name

    @property
    def any(self) -> Scores:
        return next(iter(self.scores.values()))


def _retrievers(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(name for row in rows for name in row.scores))


def table(rows: Sequence[Row], k: int) -> str:
    """A fixed-width table: one line per configuration; per retriever recall, precision and
    IoU at k; the chunk count, mean chunk length and PΩ, which need no retrieval."""
    names = _retrievers(rows)
    width = max([len("configuration"), *(len(r.label) for r in rows)])
    head = f"{'configuration':<{width}}  {'chunks':>6}  {'mean chars':>10}  {'PΩ':>5}"
    head += "".join(f"  {n + ' recall':>13}  {'precision':>9}  {'IoU':>5}" for n in names)
    lines = [head]
    for row in rows:
        s = row.any
        line = f"{row.label:<{width}}  {s.chunks:>6}  {s.mean_chars:>10.0f}  "
        line += f"{_f(s.precision_omega):>5}"
        for name in names:
            got = row.scores.get(name)
            if got is None:
                line += f"  {'':>13}  {'':>9}  {'':>5}"
            else:
                line += f"  {_f(got.recall):>13}  {_f(got.precision):>9}  {_f(got.iou):>5}"
        lines.append(line)
    questions = rows[0].any.questions if rows else 0
    lines.append(f"{questions} questions, top {k} chunks each, all documents in one index")
    return "\n".join(lines)


PAIRED_METRICS = ("recall", "iou")


def paired_table(rows: Sequence[Row], baseline: Row) -> str:
    """Each row against ``baseline``, question by question, per retriever: the mean
    difference of recall and of IoU with its 95% bootstrap interval and p, and the questions
    each does better on with the sign test's p (:mod:`chunkmill.evaluation.significance`).
    ``*`` marks a difference whose interval leaves out 0."""
    lines = [
        f"against {baseline.label}, per question: difference [95% interval] bootstrap p; "
        "questions better/worse, sign-test p"
    ]
    width = max([len(r.label) for r in rows if r is not baseline], default=0)
    name_width = max([len(n) for n in _retrievers(rows)], default=0)
    for row in rows:
        if row is baseline:
            continue
        for name in _retrievers([row, baseline]):
            mine, theirs = row.scores.get(name), baseline.scores.get(name)
            if mine is None or theirs is None:
                continue
            cells = []
            for metric in PAIRED_METRICS:
                p = paired(mine, theirs, metric)
                mark = "*" if p.significant else " "
                cells.append(
                    f"{'IoU' if metric == 'iou' else metric} {_signed(p.mean_difference)}{mark}"
                    f"[{_signed(p.low)} {_signed(p.high)}] p {_p(p.p_bootstrap)}, "
                    f"{p.wins}/{p.losses} p {_p(p.p_sign)}"
                )
            lines.append(f"{row.label:<{width}}  {name:<{name_width}}  " + "   ".join(cells))
    return "\n".join(lines)


def _signed(x: float) -> str:
    """A difference as the paired table prints it: +.013, -.004."""
    return ("-" if x < 0 else "+") + _f(abs(x))


def _p(x: float) -> str:
    return "<.001" if x < 0.001 else _f(x)


def _f(x: float) -> str:
    """A score as the tables print it: three decimals, no leading zero (.892)."""
    text = f"{x:.3f}"
    return text[1:] if text.startswith("0") else text


_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_MARKERS = ("circle", "square")


def html_page(rows: Sequence[Row], k: int) -> str:
    """The page: what was measured, the table, and the plot."""
    names = _retrievers(rows)
    head = "".join(f"<th>{html.escape(n)} recall</th><th>precision</th><th>IoU</th>" for n in names)
    body = []
    for row in rows:
        s = row.any
        cells = "".join(
            f"<td>{_f(x.recall)}</td><td>{_f(x.precision)}</td><td>{_f(x.iou)}</td>"
            if (x := row.scores.get(n)) is not None
            else "<td></td><td></td><td></td>"
            for n in names
        )
        body.append(
            f"<tr><td>{html.escape(row.label)}</td><td>{s.chunks}</td>"
            f"<td>{s.mean_chars:.0f}</td><td>{_f(s.precision_omega)}</td>{cells}</tr>"
        )
    questions = rows[0].any.questions if rows else 0
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>chunkmill eval</title>
<style>{_CSS}</style></head><body>
<h1>Chunk quality for retrieval</h1>
<p>{questions} questions, top {k} chunks each, all documents in one index.
Recall: share of the evidence the retrieved chunks hold; precision: share of the retrieved
text that is evidence; IoU: evidence found over retrieved text plus evidence missed;
PΩ: the IoU of exactly the chunks that meet the evidence, without retrieval.</p>
<table><tr><th>configuration</th><th>chunks</th><th>mean chars</th><th>PΩ</th>{head}</tr>
{"".join(body)}</table>
<h2>Recall against IoU</h2>
{svg_plot(rows)}
</body></html>
"""


# The plot's size and margins, in pixels; the legend on the right is as wide as its longest
# label (about 7 pixels a character at 11 px).
_PLOT_W, _H, _LEFT, _BOTTOM, _TOP = 440, 400, 56, 44, 16
_CHAR_W = 7


def svg_plot(rows: Sequence[Row]) -> str:
    """Recall (up) against IoU (across), one point per configuration and retriever: colour
    by configuration, shape by retriever; a legend on the right."""
    names = _retrievers(rows)
    points = [
        (i, names.index(n), s.iou, s.recall)
        for i, row in enumerate(rows)
        for n, s in row.scores.items()
    ]
    x_step, x_ticks = _axis(0.0, max([0.01, *(p[2] for p in points)]))
    y_low = min(0.8, *(p[3] for p in points))
    y_step, y_ticks = _axis(y_low, 1.0)
    y_min = 1.0 - y_step * y_ticks
    x_max = x_step * x_ticks
    plot_w, plot_h = _PLOT_W, _H - _TOP - _BOTTOM
    labels = [row.label for row in rows] + names
    width = _LEFT + plot_w + 40 + _CHAR_W * max(len(label) for label in labels)
    legend_x = _LEFT + plot_w + 16

    def x(v: float) -> float:
        return _LEFT + v / x_max * plot_w

    def y(v: float) -> float:
        return _TOP + (1 - v) / (1 - y_min) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_H}" role="img" '
        'aria-label="recall against IoU">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#999"/>',
    ]
    for tick in range(y_ticks + 1):
        v = y_min + tick * y_step
        parts.append(f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for tick in range(x_ticks + 1):
        xv = tick * x_step
        parts.append(
            f'<text x="{x(xv):.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle">{xv:.3g}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{_H - 8}" text-anchor="middle">IoU</text>'
        f'<text x="14" y="{_TOP + plot_h / 2}" transform="rotate(-90 14 {_TOP + plot_h / 2})" '
        'text-anchor="middle">recall</text>'
    )
    for row_index, shape, iou, recall in points:
        parts.append(_marker(shape, x(iou), y(recall), _COLOURS[row_index % len(_COLOURS)]))
    for i, row in enumerate(rows):
        ly = _TOP + 14 + 18 * i
        parts.append(_marker(0, legend_x, ly - 4, _COLOURS[i % len(_COLOURS)]))
        parts.append(f'<text x="{legend_x + 10}" y="{ly}">{html.escape(row.label)}</text>')
    for j, name in enumerate(names):
        ly = _TOP + 14 + 18 * (len(rows) + 1 + j)
        parts.append(_marker(j, legend_x, ly - 4, "#555"))
        parts.append(f'<text x="{legend_x + 10}" y="{ly}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _axis(low: float, high: float) -> tuple[float, int]:
    """A round tick step (1, 2 or 5 times a power of ten) and how many steps from ``low``
    cover ``high``: about five."""
    raw = max(high - low, 1e-9) / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return step, max(1, math.ceil((high - low) / step - 1e-9))


def _marker(shape: int, cx: float, cy: float, colour: str) -> str:
    if _MARKERS[shape % len(_MARKERS)] == "circle":
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{colour}"/>'
    return f'<rect x="{cx - 4.5:.1f}" y="{cy - 4.5:.1f}" width="9" height="9" fill="{colour}"/>'
