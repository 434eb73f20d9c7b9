"""The page of ``chunkmill report``: one finished run's ``RunStats`` as a self-contained
HTML page (``render_html``).

The page needs nothing but a browser: inline CSS, inline SVG charts, no script, no fonts or
images, no ``http(s)://`` reference. Every value that comes from data (source URIs, error
messages, strategy and format names) is HTML-escaped, since a file name can be ``<script>``.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from chunkmill.pipeline.run_report import TOP_DOCUMENTS, Bin, RunStats, histogram, quantile
from chunkmill.redact import redact_uri

# The counts of _SUCCESS in the order the page lists them, with their labels.
COUNT_LABELS = {
    "docs_listed": "documents listed",
    "docs_read": "documents read (the listing showed a change, or no prior rows)",
    "docs_processed": "documents processed (new or changed)",
    "docs_carried_over": "documents carried over (unchanged)",
    "docs_failed": "documents failed",
    "docs_failed_not_retried": "of which failed before and unchanged (not read again)",
    "docs_removed": "documents removed (gone from the listing)",
    "docs_empty": "documents without text (0 bytes, whitespace only): no chunk",
    "docs_emptied": "documents emptied (listed, text gone: their chunks removed)",
    "docs_prior": "documents in the prior manifest",
    "docs_kept_unlisted": "documents kept unlisted (under a folder that could not be listed)",
    "docs_skipped": "objects skipped at listing (not read, not failures)",
    "listing_errors": "listing errors (folders not listed, names not recorded)",
    "chunks_total": "chunks in the manifest",
    "chunks_new_occurrences": "chunk occurrences with a new hash",
    "chunks_to_embed": "chunks to embed (distinct new hashes)",
    "chunks_removed": "chunk occurrences removed",
    "occurrences_added": "chunk occurrences added (new to the index by id)",
    "hashes_retired": "hashes retired (no current occurrence has them)",
    "tokens_to_embed": "tokens to embed",
    "chunks_over_model_window": "chunks to embed over the model's input window (where known)",
}

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2125; margin: 2em auto;
       max-width: 60em; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { text-align: left; padding: .25em .8em .25em 0; border-bottom: 1px solid #e3e6e8;
         vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, monospace; overflow-wrap: anywhere; }
.muted { color: #68737d; }
figure { margin: .5em 0 1.5em; }
figcaption { font-weight: 600; }
svg.histogram rect.bar { fill: #4a79a8; }
svg.histogram text { font: 10px system-ui, sans-serif; fill: #68737d; }
svg.histogram line { stroke: #9aa5ad; }
ul.examples { margin: 0; padding-left: 1.2em; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: int) -> str:
    return f"{value:,}"


def _plural(n: int, noun: str) -> str:
    return f"{_n(n)} {noun}{'' if n == 1 else 's'}"


def _num_cell(value: int, *, id_: str | None = None, stat: str | None = None) -> str:
    """A number cell; tests read its value from ``data-value``, by ``id`` or ``data-stat``."""
    ident = f' id="{_e(id_)}"' if id_ else ""
    if stat:
        ident += f' data-stat="{_e(stat)}"'
    return f'<td class="n"{ident} data-value="{int(value)}">{_n(value)}</td>'


def _svg_histogram(strategy: str, bins: list[Bin]) -> str:
    width, height = 640, 170
    left, right, top, bottom = 48, 8, 8, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(b.count for b in bins) or 1
    bar_w = plot_w / len(bins)
    parts = [
        f'<svg class="histogram" data-strategy="{_e(strategy)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="chunk token counts, strategy {_e(strategy)}">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{_n(peak)}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    label_every = max(1, math.ceil(len(bins) / 10))
    for i, b in enumerate(bins):
        h = plot_h * b.count / peak
        x = left + i * bar_w
        label = f"{b.start}" if b.end - b.start == 1 else f"{b.start}–{b.end - 1}"
        parts.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" '
            f'width="{max(bar_w - 2, 1):.1f}" height="{h:.1f}" data-bin-start="{b.start}" '
            f'data-bin-end="{b.end}" data-count="{b.count}">'
            f"<title>{label} tokens: {_plural(b.count, 'chunk')}</title></rect>"
        )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{b.start}</text>'
            )
    parts.append(
        f'<text x="{left + plot_w:.1f}" y="{top + plot_h + 14}" text-anchor="middle">'
        f"{bins[-1].end}</text>"
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">'
        "tokens per chunk</text></svg>"
    )
    return "".join(parts)


def _header(r: dict[str, Any]) -> str:
    prior = r.get("prior") or {}
    chunking = r.get("chunking") or {}
    rows = [
        ("run", f'<code id="run_id">{_e(r["run_id"])}</code>'),
        ("started at", f'<span id="started_at">{_e(r.get("started_at", ""))}</span>'),
        (
            "chunkmill",
            f'<span id="chunkmill_version">{_e(r.get("chunkmill_version", ""))}</span>'
            f' <span class="muted">(schema {_e(r.get("schema_version", ""))})</span>',
        ),
        ("inputs", "<br>".join(f"<code>{_e(redact_uri(p))}</code>" for p in r.get("inputs", []))),
        ("output", f"<code>{_e(redact_uri(r.get('output', '')))}</code>"),
        (
            "diffed against",
            f'<code id="prior_run_id">{_e(prior.get("run_id") or "none")}</code>'
            f' <span class="muted">(mode <span id="prior_mode">{_e(prior.get("mode"))}</span>;'
            f' manifest <code id="prior_manifest">{_e(prior.get("manifest") or "none")}'
            "</code>)</span>",
        ),
        (
            "chunking",
            f'strategy <code id="strategy">{_e(chunking.get("strategy", ""))}</code>, '
            f"tokenizer <code>{_e(chunking.get('tokenizer', ''))}</code>, "
            f"fingerprint <code>{_e(chunking.get('fingerprint', ''))}</code>",
        ),
    ]
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    config = json.dumps(chunking, indent=1, sort_keys=True)
    return (
        f'<table id="run">{body}</table>'
        f"<details><summary>chunking config</summary><pre>{_e(config)}</pre></details>"
    )


def _counts(c: dict[str, Any]) -> str:
    rows = []
    # A count, and the key of its breakdown by reason.
    breakdowns = {
        "docs_failed": ("failed_by_reason", "failed by reason"),
        "docs_skipped": ("skipped_by_reason", "skipped by reason"),
        "listing_errors": ("listing_errors_by_reason", "listing errors by reason"),
    }
    for key, label in COUNT_LABELS.items():
        if key in c:  # a run report of an older release may lack a count
            rows.append(f"<tr><th>{label}</th>{_num_cell(c[key], id_=key)}</tr>")
        by_reason, title = breakdowns.get(key, ("", ""))
        reasons = c.get(by_reason) or {} if by_reason else {}
        if reasons:
            detail = ", ".join(f"{_e(k)} {_n(v)}" for k, v in sorted(reasons.items()))
            rows.append(f'<tr><td class="muted">{title}</td><td>{detail}</td></tr>')
    return f'<table id="counts">{"".join(rows)}</table>'


def _sizes(stats: RunStats) -> str:
    if not stats.tokens:
        return '<p class="muted">The manifest is empty.</p>'
    head = (
        "<tr><th>strategy</th><th class=n>chunks</th><th class=n>min</th>"
        "<th class=n>median</th><th class=n>p95</th><th class=n>max</th>"
        "<th class=n>to embed</th><th class=n>tokens to embed</th></tr>"
    )
    rows, charts = [], []
    for strategy in sorted(stats.tokens):
        counts = stats.tokens[strategy]
        total = sum(counts.values())
        embed_rows, embed_tokens = stats.to_embed.get(strategy, [0, 0])
        cells = [
            (total, "chunks"),
            (min(counts), "min"),
            (quantile(counts, 0.5), "median"),
            (quantile(counts, 0.95), "p95"),
            (max(counts), "max"),
            (embed_rows, "to-embed"),
            (embed_tokens, "tokens-to-embed"),
        ]
        tds = "".join(_num_cell(v, stat=name) for v, name in cells)
        rows.append(f'<tr data-strategy="{_e(strategy)}"><td>{_e(strategy)}</td>{tds}</tr>')
        charts.append(
            f"<figure><figcaption>{_e(strategy)}</figcaption>"
            f"{_svg_histogram(strategy, histogram(counts))}</figure>"
        )
    return (
        f'<table id="sizes">{head}{"".join(rows)}</table>'
        '<p class="muted">Over every chunk occurrence in the manifest; median and p95 by '
        "nearest rank. To embed: rows of <code>chunks/</code>.</p>" + "".join(charts)
    )


def _formats(stats: RunStats) -> str:
    if not stats.formats:
        return '<p class="muted">No documents in the manifest.</p>'
    head = (
        "<tr><th>format</th><th class=n>documents</th><th class=n>chunks</th>"
        "<th class=n>new chunks</th></tr>"
    )
    rows = [
        f'<tr data-format="{_e(name)}"><td>{_e(name)}</td>'
        f"{_num_cell(f.documents, stat='documents')}{_num_cell(f.chunks, stat='chunks')}"
        f"{_num_cell(f.new_chunks, stat='new-chunks')}</tr>"
        for name, f in sorted(stats.formats.items(), key=lambda kv: (-kv[1].documents, kv[0]))
    ]
    return (
        f'<table id="formats">{head}{"".join(rows)}</table>'
        '<p class="muted">Documents in the manifest (processed, carried over, and failed ones '
        "that keep their prior rows); failed documents without prior rows are under Errors.</p>"
    )


def _errors(stats: RunStats) -> str:
    if not stats.errors:
        return '<p id="no-errors" class="muted">No document failed.</p>'
    head = "<tr><th>reason</th><th class=n>documents</th><th>examples</th></tr>"
    rows = []
    for reason, e in sorted(stats.errors.items(), key=lambda kv: (-kv[1].documents, kv[0])):
        examples = "".join(
            f'<li class="error-example" data-reason="{_e(reason)}"><code class="uri">{_e(uri)}'
            f'</code> <span class="muted">{_e(stage)}:</span> '
            f'<span class="message">{_e(message)}</span></li>'
            for uri, stage, message in e.examples
        )
        rows.append(
            f'<tr data-reason="{_e(reason)}"><td>{_e(reason)}</td>'
            f'<td class="n" data-value="{e.documents}">{_n(e.documents)}</td>'
            f'<td><ul class="examples">{examples}</ul></td></tr>'
        )
    return f'<table id="errors">{head}{"".join(rows)}</table>'


def _removed(stats: RunStats) -> str:
    if not stats.removed:
        return '<p class="muted">Nothing was removed.</p>'
    rows = "".join(
        f'<tr data-reason="{_e(reason)}"><td>{_e(reason)}</td>'
        f'<td class="n" data-value="{n}">{_n(n)}</td></tr>'
        for reason, n in sorted(stats.removed.items())
    )
    return (
        '<table id="removed"><tr><th>reason</th><th class=n>chunk occurrences</th></tr>'
        f"{rows}</table>"
    )


def _top(stats: RunStats) -> str:
    if not stats.top_new:
        return '<p id="no-new" class="muted">No document has new chunks.</p>'
    head = (
        "<tr><th class=n>#</th><th>document</th><th class=n>new chunks</th>"
        "<th class=n>tokens</th></tr>"
    )
    rows = "".join(
        f'<tr class="top-doc" data-rank="{i}" data-new-chunks="{d.new_chunks}">'
        f'<td class="n">{i}</td><td><code class="uri">{_e(d.source_uri)}</code></td>'
        f'<td class="n">{_n(d.new_chunks)}</td><td class="n">{_n(d.new_tokens)}</td></tr>'
        for i, d in enumerate(stats.top_new, 1)
    )
    return f'<table id="top-new">{head}{rows}</table>'


def render_html(stats: RunStats) -> str:
    """The page, as one string with everything inline."""
    r = stats.report
    sections = [
        ("run-counts", "Counts", _counts(r["counts"])),
        ("chunk-sizes", "Chunk sizes (tokens) by strategy", _sizes(stats)),
        ("documents-by-format", "Documents by format", _formats(stats)),
        ("errors-by-reason", "Errors by reason", _errors(stats)),
        ("removed-by-reason", "Removed by reason", _removed(stats)),
        ("most-new-chunks", f"Top {TOP_DOCUMENTS} documents by new chunks", _top(stats)),
    ]
    body = "".join(
        f'<section id="{sid}"><h2>{title}</h2>{html_}</section>' for sid, title, html_ in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>chunkmill run {_e(r['run_id'])}</title><style>{_CSS}</style></head><body>"
        f"<h1>chunkmill run {_e(r['run_id'])}</h1>{_header(r)}{body}"
        '<p class="muted">Written by <code>chunkmill report</code> from the run\'s '
        "<code>_SUCCESS</code> and tables.</p></body></html>\n"
    )
