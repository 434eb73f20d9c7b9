"""JSON, JSON Lines and CSV rendered as text a retriever can use: one paragraph per record,
one ``key: value`` line per field, nested keys joined with dots (``address.city: Paris``) and
list items indexed (``tags[0]: red``)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from chunkmill.extract.base import ExtractionError

# CSV dialects tried by the sniffer, in this order of preference.
_DELIMITERS = ",;\t|"
_SNIFF_BYTES = 64 * 1024


def render_json(text: str) -> str:
    """A JSON document: each item of a top-level array is a record; so is each top-level key
    of an object (its lines keep the key). Raises ``ExtractionError("corrupt")`` for text
    that is not JSON."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ExtractionError("corrupt", f"not JSON: {e}") from None
    if isinstance(value, list):
        records = [_lines(item, "") for item in value]
    elif isinstance(value, dict):
        records = [_lines(v, _key("", k)) for k, v in value.items()]
    else:
        records = [_lines(value, "")]
    return _join(records)


def render_jsonl(text: str) -> str:
    """JSON Lines: each non-blank line is a record. Raises ``ExtractionError("corrupt")``
    naming the first line that is not JSON."""
    records = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise ExtractionError("corrupt", f"line {number} is not JSON: {e}") from None
        records.append(_lines(value, ""))
    return _join(records)


def render_csv(text: str, *, tab_separated: bool = False) -> str:
    """CSV (or TSV): the first row names the fields; every further row is a record of
    ``name: value`` lines, empty values left out. The delimiter is sniffed among ``, ; TAB |``
    (tab for TSV). Raises ``ExtractionError("corrupt")`` for a row CSV cannot parse."""
    if tab_separated:
        delimiter = "\t"
    else:
        try:
            delimiter = csv.Sniffer().sniff(text[:_SNIFF_BYTES], delimiters=_DELIMITERS).delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            return ""
        names = [h.strip() or f"column {i + 1}" for i, h in enumerate(header)]
        records = []
        for row in reader:
            lines = []
            for i, value in enumerate(row):
                if value.strip():
                    name = names[i] if i < len(names) else f"column {i + 1}"
                    lines.append(f"{name}: {_one_line(value)}")
            records.append(lines)
    except csv.Error as e:
        raise ExtractionError("corrupt", f"CSV line {reader.line_num}: {e}") from None
    return _join(records)


def _key(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _lines(value: Any, path: str) -> list[str]:
    """``path: scalar`` lines of a JSON value, depth first, without recursion (hostile JSON
    nests as deep as the parser allows)."""
    out: list[str] = []
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict) and v:
            stack.extend(reversed([(_key(where, k), item) for k, item in v.items()]))
        elif isinstance(v, list) and v:
            stack.extend(reversed([(f"{where}[{i}]", item) for i, item in enumerate(v)]))
        else:
            rendered = _one_line(v) if isinstance(v, str) else json.dumps(v)
            out.append(f"{where}: {rendered}" if where else rendered)
    return out


def _one_line(value: str) -> str:
    # A value's own line breaks would make its continuation look like another field.
    return " ".join(value.split())


def _join(records: list[list[str]]) -> str:
    return "\n\n".join("\n".join(lines) for lines in records if lines)
