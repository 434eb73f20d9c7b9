"""HTML and DOCX rendered as Markdown-like text: headings become ``#`` lines, so the
``section`` strategy splits them the way it splits Markdown; everything else becomes plain
paragraphs, without markup, scripts or styles."""

from __future__ import annotations

import io
import re

from chunkmill.extract.base import ExtractionError

# Elements whose content is never text a reader sees.
_SKIP = frozenset(
    {"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object",
     "canvas", "select", "button"}
)  # fmt: skip
# Elements that end a paragraph (their content is a block of its own).
_BLOCKS = frozenset(
    {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "li", "ul",
     "ol", "dl", "dt", "dd", "table", "thead", "tbody", "tfoot", "tr", "blockquote", "pre",
     "figure", "figcaption", "form", "fieldset", "address", "details", "summary", "hr", "br",
     "body", "html", "caption", "h1", "h2", "h3", "h4", "h5", "h6"}
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"\s+")


def html_to_text(html: str) -> str:
    """The visible text of an HTML document: one paragraph per block element, separated by
    blank lines; ``<hN>`` as a Markdown heading of level N; table cells joined by ``" | "``;
    ``<pre>`` kept verbatim; whitespace elsewhere collapsed. The result may be empty."""
    from bs4 import BeautifulSoup, NavigableString, Tag
    from bs4.element import PreformattedString

    soup = BeautifulSoup(html, "lxml")
    blocks: list[str] = []
    current: list[str] = []

    def flush(prefix: str = "") -> None:
        text = _SPACES.sub(" ", "".join(current)).strip()
        current.clear()
        text = text.removesuffix(" |")  # the separator after a row's last cell
        if text:
            blocks.append(prefix + text)

    # An explicit stack, not recursion: hostile HTML nests thousands of levels deep.
    stack: list[tuple[object, bool]] = [(soup, False)]
    pre_depth = 0
    while stack:
        node, leaving = stack.pop()
        if isinstance(node, Tag):
            name = node.name
            if leaving:
                if name == "pre":
                    pre_depth -= 1
                    if pre_depth == 0:  # verbatim: no whitespace collapsed
                        text = "".join(current).strip("\n")
                        current.clear()
                        if text.strip():
                            blocks.append(text)
                elif pre_depth:
                    pass  # inside <pre>, elements do not break the text
                elif name in _HEADINGS:
                    flush("#" * _HEADINGS[name] + " ")
                elif name in _BLOCKS:
                    flush()
                elif name in _CELLS:
                    current.append(" | ")
                continue
            if name in _SKIP:
                continue
            if name in _BLOCKS and pre_depth == 0:
                flush()
            if name == "pre":
                pre_depth += 1
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.contents))
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
            # PreformattedString: comments, doctypes, CDATA, processing instructions.
            current.append(str(node))
    flush()
    return "\n\n".join(blocks)


def docx_to_text(data: bytes) -> str:
    """The text of a DOCX file: paragraphs in body order, ``Heading N`` (and ``Title``)
    styles as Markdown headings, each table row as one line of cells joined by ``" | "``.
    Raises ``ExtractionError("corrupt")`` for a file python-docx cannot open."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except MemoryError:
        raise
    except Exception as e:
        raise ExtractionError("corrupt", f"python-docx: {type(e).__name__}: {e}") from e
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = item.text.strip()
            if not text:
                continue
            style = item.style.name if item.style is not None else ""
            level = _heading_level(style or "")
            blocks.append(("#" * level + " " if level else "") + text)
        elif isinstance(item, Table):
            rows = [" | ".join(c.text.strip() for c in row.cells) for row in item.rows]
            rows = [r for r in rows if r.strip(" |")]
            if rows:
                blocks.append("\n".join(rows))
    return "\n\n".join(blocks)


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    match = re.fullmatch(r"Heading ([1-6])", style)
    return int(match.group(1)) if match else 0


# SVG elements whose text a reader sees (or a screen reader reads): <text> (with its
# <tspan>s), <title> and <desc>.
_SVG_TEXT = frozenset({"text", "title", "desc"})
# A <tspan> placed on its own (x, y, dx or dy) starts a new run: a space keeps it apart
# from the run before it, which its position, not a character, separated.
_SVG_POSITION = ("x", "y", "dx", "dy")


def svg_to_text(data: bytes) -> str:
    """The text of an SVG image: each ``<title>``, ``<desc>`` and ``<text>`` element (with
    its ``<tspan>`` runs) on a line of its own, in document order, whitespace collapsed. The
    XML is parsed without resolving entities, loading a DTD or touching the network, so a
    hostile file can neither expand entities nor read files or URLs. Raises
    ``ExtractionError("corrupt")`` for bytes that are not XML."""
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, recover=False
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        raise ExtractionError("corrupt", f"SVG: {e}") from None
    lines = []
    for element in root.iter(etree.Element):
        if etree.QName(element).localname not in _SVG_TEXT:
            continue
        if any(etree.QName(a).localname in _SVG_TEXT for a in element.iterancestors()):
            continue  # its text is part of the enclosing element's
        text = _SPACES.sub(" ", _svg_runs(element)).strip()
        if text:
            lines.append(text)
    return "\n".join(lines)


def _svg_runs(element) -> str:
    from lxml import etree

    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str):  # not a comment or processing instruction
            positioned = any(child.get(name) is not None for name in _SVG_POSITION)
            parts.append((" " if positioned else "") + _svg_runs(child))
        elif isinstance(child, etree._Entity):
            parts.append(" ")  # an unresolved entity: never expanded
        parts.append(child.tail or "")
    return "".join(parts)
