"""Reads the page ``chunkmill report`` writes back into elements, with the stdlib HTML parser,
so tests check what a browser would show (text with entities decoded, attributes) rather than
the markup's exact spelling."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

# Elements without an end tag in HTML.
_VOID = {"meta", "br", "hr", "img", "input", "link", "source", "wbr", "col", "area", "base"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    parts: list[str] = field(default_factory=list)
    children: list[Element] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def value(self) -> int:
        """The number a cell shows, checked against its ``data-value``."""
        shown = int(self.text.replace(",", ""))
        assert str(shown) == self.attrs.get("data-value"), (self.text, self.attrs)
        return shown

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Descendants with this tag and these attributes (``data_count`` is ``data-count``,
        ``class_`` one of the classes)."""
        found = []
        for child in self.children:
            if _matches(child, tag, attrs):
                found.append(child)
            found += child.find_all(tag, **attrs)
        return found

    def find(self, tag: str | None = None, **attrs: str) -> Element:
        (one,) = self.find_all(tag, **attrs)
        return one


def _matches(el: Element, tag: str | None, attrs: dict[str, str]) -> bool:
    if tag is not None and el.tag != tag:
        return False
    for key, want in attrs.items():
        if key == "class_":
            if want not in (el.attrs.get("class") or "").split():
                return False
        elif el.attrs.get(key.replace("_", "-")) != want:
            return False
    return True


class Page(HTMLParser):
    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source
        self.root = Element("#document", {})
        self._open = [self.root]
        self.feed(source)
        self.close()
        assert self._open == [self.root], [e.tag for e in self._open]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, dict(attrs))
        self._open[-1].children.append(el)
        if tag not in _VOID:
            self._open.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self._open[-1].tag == tag, f"</{tag}> closes <{self._open[-1].tag}>"
        self._open.pop()

    def handle_data(self, data: str) -> None:
        for el in self._open:
            el.parts.append(data)

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        return self.root.find_all(tag, **attrs)

    def find(self, tag: str | None = None, **attrs: str) -> Element:
        return self.root.find(tag, **attrs)

    def by_id(self, ident: str) -> Element:
        return self.find(id=ident)

    def external_references(self) -> list[str]:
        """Anything that would make a browser fetch something or run code: script, link,
        img and the like, src/href attributes (other than in-page ``#`` links), CSS url() and
        @import, and any http(s) address."""
        refs = [
            f"<{el.tag}>"
            for el in self.find_all()
            if el.tag in {"script", "link", "img", "iframe", "object", "embed", "image", "use"}
        ]
        for el in self.find_all():
            for name in ("src", "href", "xlink:href", "srcset", "action", "data"):
                value = el.attrs.get(name)
                if value is not None and not (name == "href" and value.startswith("#")):
                    refs.append(f"{el.tag} {name}={value}")
        refs += re.findall(r"url\(|@import|https?://", self.source, re.IGNORECASE)
        return refs
