"""Recursive separator chunking (as langchain's RecursiveCharacterTextSplitter), computed as
exact offsets into the document, and language-aware separator lists for code."""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_left
from collections.abc import Sequence

from chunkmill.chunking.base import (
    ParameterError,
    Span,
    TokenCounter,
    chars4,
    check_int,
    check_less,
    rstrip_end,
)

_NONSPACE = re.compile(r"\S")

# The separators, coarsest first: "\n\n" -> "\n" -> ". " -> " " -> "".
DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", ". ", " ", "")


class RecursiveChunker:
    """Split on the first separator present, merge the pieces up to ``chunk_size`` characters
    with overlap, and split pieces still too large on the next separators.

    Definitions. Characters are Unicode code points, whitespace is ``str.isspace``, and
    *trimming* drops leading and trailing whitespace. Separators are literal strings; ``""``
    means "between any two characters" and ends the list (separators after it are never
    used). Each separator occurrence marks a *cut*: a separator that starts with whitespace
    and contains non-whitespace (``"\\ndef "``) is cut after its leading whitespace, so the
    rest (``"def "``) starts the next piece, as a definition should; any other separator
    (``"\\n\\n"``, ``". "``) is cut after its end, so it ends the piece before it. Occurrences
    are found left to right without overlapping, as ``str.split`` does.

    Algorithm, on the trimmed text, for a trimmed range longer than ``chunk_size``:

    1. Take the first separator of the list that occurs in the range (``""`` always does;
       if none does and the list has no ``""``, behave as if it ended with ``""``, so the
       size limit always holds). Cut the range at its occurrences into *pieces*, trim each,
       and drop the whitespace-only ones. For ``""`` the pieces are the non-whitespace
       characters.
    2. A piece longer than ``chunk_size`` is split recursively, as a range, with the
       separators after the one used. The other pieces are merged in runs: a run is the
       maximal sequence of consecutive pieces between two pieces split recursively.
    3. Merging a run: a chunk is the contiguous slice from the start of its first piece to
       the end of its last, so the separators between its pieces are included verbatim.
       Pieces are added while the slice stays within ``chunk_size``. The piece that would
       overflow ends the chunk, and the next chunk starts at the first piece of that chunk
       that starts at or after both ``end - chunk_overlap`` and ``new_piece_end -
       chunk_size`` (langchain's overlap: drop pieces from the front until what remains
       is at most ``chunk_overlap`` long and leaves room for the new piece), or at the new
       piece when there is none.

    A range of at most ``chunk_size`` characters, the whole text included, is one chunk.
    Unlike langchain: lengths are measured on trimmed slices, so a piece of exactly
    ``chunk_size`` characters is kept whole (langchain recurses into pieces of ``>=
    chunk_size``) and whitespace at a chunk's ends never counts; and separators stay in the
    text instead of moving to the start of the next piece (langchain, given ``". "``,
    turns ``"end. Next"`` into the chunks ``"end"`` and ``". Next"``).

    Guarantees, for any ``text`` (besides those of :mod:`chunkmill.chunking.base`):

    * every chunk has ``1 <= len <= chunk_size`` characters and both its first and last
      characters are non-whitespace;
    * starts and ends are both strictly increasing, so no chunk contains another;
    * consecutive chunks overlap by at most ``chunk_overlap`` characters, only within one
      run (as in langchain, no overlap is carried into or out of a recursively split
      piece); every chunk starts and ends at a piece boundary;
    * empty or whitespace-only ``text`` gives ``[]``;
    * time is linear in ``len(text)`` times the number of separators; no chunk text is
      copied.

    Sizes are in characters, as the spec gives them; ``token_counter`` is accepted for the
    common constructor signature and not used.
    """

    name = "recursive"

    def __init__(
        self,
        *,
        chunk_size: int = 1000,
        chunk_overlap: int = 200,
        separators: Sequence[str] | None = None,
        token_counter: TokenCounter = chars4,
    ) -> None:
        check_int("chunk_size", chunk_size, 1)
        check_int("chunk_overlap", chunk_overlap, 0)
        check_less("chunk_overlap", chunk_overlap, "chunk_size", chunk_size)
        if separators is None:
            separators = DEFAULT_SEPARATORS
        # A bare string is a sequence of one-character strings: almost surely a mistake.
        if isinstance(separators, str) or not isinstance(separators, (list, tuple)):
            raise ParameterError("{separators} must be a list of strings, got {0!r}", separators)
        if not separators or not all(isinstance(s, str) for s in separators):
            raise ParameterError(
                "{separators} must be a non-empty list of strings, got {0!r}", separators
            )
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.separators: tuple[str, ...] = tuple(separators)
        self.token_counter = token_counter
        # "" always matches, so separators after it are never used; the character split it
        # stands for is the implied last step of every list.
        usable = self.separators
        if "" in usable:
            usable = usable[: usable.index("")]
        self._cuts = tuple((sep, *_cut_point(sep)) for sep in usable)

    def __repr__(self) -> str:
        return (
            f"RecursiveChunker(chunk_size={self.chunk_size}, "
            f"chunk_overlap={self.chunk_overlap}, separators={list(self.separators)!r})"
        )

    def params(self) -> dict[str, object]:
        return {
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "separators": list(self.separators),
        }

    def split(self, text: str) -> list[Span]:
        first = _NONSPACE.search(text)
        if first is None:
            return []
        spans: list[Span] = []
        self._split(text, first.start(), rstrip_end(text, first.start(), len(text)), 0, spans)
        return spans

    def _split(self, text: str, start: int, end: int, level: int, out: list[Span]) -> None:
        """Chunk the trimmed range [start, end) with the separators from ``level`` on."""
        if end - start <= self.chunk_size:
            out.append(Span(start, end))
            return
        cuts = self._cuts
        for i in range(level, len(cuts)):
            sep, cut, keep = cuts[i]
            found = text.find(sep, start, end)
            if found >= 0:
                self._merge(text, start, end, found, sep, cut, keep, i + 1, out)
                return
        self._split_chars(text, start, end, out)

    def _merge(
        self,
        text: str,
        range_start: int,
        range_end: int,
        found: int,
        sep: str,
        cut: int,
        keep: int,
        level: int,
        out: list[Span],
    ) -> None:
        """Cut the trimmed range [range_start, range_end) at the occurrences of ``sep``, the
        first at ``found``, and merge the trimmed pieces into chunks, recursing into those
        over ``chunk_size`` with the separators from ``level`` on."""
        chunk_size = self.chunk_size
        overlap = self.chunk_overlap
        width = len(sep)
        raw = range_start  # where the next raw piece begins
        start = stop = -1  # the open chunk; -1 while there is none
        # Starts of the open run's pieces; the open chunk's first piece is starts[first].
        starts: list[int] = []
        first = 0
        # One loop for cutting and merging: this is the per-piece hot path.
        while raw < range_end:
            if found >= 0:
                # keep > 0: the piece ends with sep[:cut], whose last non-whitespace is at
                # found + keep - 1. keep == 0: sep[:cut] is whitespace; the text is before it.
                piece_end = found + keep if keep else found
                next_raw = found + cut
                # Left to right, without overlapping, as str.split.
                found = text.find(sep, found + width, range_end)
            else:
                piece_end = next_raw = range_end
            if raw < piece_end and not text[raw].isspace():
                piece_start = raw
            else:
                nonspace = _NONSPACE.search(text, raw, piece_end)
                if nonspace is None:  # a whitespace-only piece
                    raw = next_raw
                    continue
                piece_start = nonspace.start()
            raw = next_raw
            # Only a keep == 0 piece can end in whitespace (text[range_end - 1] is not).
            if text[piece_end - 1].isspace():
                piece_end = rstrip_end(text, piece_start, piece_end)

            if piece_end - piece_start > chunk_size:
                if start >= 0:
                    out.append(Span(start, stop))
                    start = -1
                    starts = []
                    first = 0
                self._split(text, piece_start, piece_end, level, out)
                continue
            starts.append(piece_start)
            if start < 0:
                start, stop = piece_start, piece_end
            elif piece_end - start <= chunk_size:
                stop = piece_end
            else:
                out.append(Span(start, stop))
                # The new piece's own start is >= low (it starts after stop and is at most
                # chunk_size long), so this always finds a piece. low > start, as the new
                # piece overflowed: each chunk starts and ends after the previous one.
                low = max(stop - overlap, piece_end - chunk_size)
                first = bisect_left(starts, low, first)
                start, stop = starts[first], piece_end
        if start >= 0:
            out.append(Span(start, stop))

    def _split_chars(self, text: str, start: int, end: int, out: list[Span]) -> None:
        """The ``""`` separator: what merging one piece per non-whitespace character gives,
        computed a chunk at a time instead of a character at a time."""
        chunk_size = self.chunk_size
        overlap = self.chunk_overlap
        while end - start > chunk_size:
            # Greedy: up to the last non-whitespace character within budget.
            stop = rstrip_end(text, start, start + chunk_size)
            out.append(Span(start, stop))
            # The first character that did not fit; it lies at or after start + chunk_size.
            after = _NONSPACE.search(text, stop, end).start()  # type: ignore[union-attr]
            low = max(stop - overlap, after + 1 - chunk_size)
            start = _NONSPACE.search(text, low, end).start()  # type: ignore[union-attr]
        out.append(Span(start, end))


def _cut_point(sep: str) -> tuple[int, int]:
    """Where a piece boundary falls within ``sep``, and how many of the characters before it
    end the previous piece's trimmed text (0: none, it is whitespace)."""
    lead = len(sep) - len(sep.lstrip())
    cut = lead if 0 < lead < len(sep) else len(sep)
    return cut, len(sep[:cut].rstrip())


# --- language-aware separators --------------------------------------------------------------

# Every list ends with the generic fallbacks: blank line, line, word, character.
_TAIL = ("\n\n", "\n", " ", "")


def _code(*definitions: str) -> tuple[str, ...]:
    return (*definitions, *_TAIL)


# PEP 8 (and black) put two blank lines around top-level definitions: cutting there first
# keeps decorators and comments with the definition they belong to, which "\nclass " alone
# would cut off. Code not laid out that way falls through to the keywords.
_PYTHON = _code(
    "\n\n\n", "\nclass ", "\ndef ", "\nasync def ", "\n\tdef ", "\n    def ",
    "\n\tasync def ", "\n    async def ",
)  # fmt: skip
_JS = (
    "\nfunction ", "\nasync function ", "\nconst ", "\nexport ", "\nclass ", "\nlet ",
    "\nvar ", "\nif ", "\nfor ", "\nwhile ", "\nswitch ", "\ncase ", "\ndefault ",
)  # fmt: skip
_TS = ("\ninterface ", "\ntype ", "\nenum ", "\nnamespace ", "\ndeclare ")
_JAVA_MEMBERS = (
    "\n    public ", "\n    protected ", "\n    private ", "\n    static ", "\n\tpublic ",
    "\n\tprotected ", "\n\tprivate ", "\n\tstatic ",
)  # fmt: skip
_C = (
    "\nstruct ", "\nunion ", "\nenum ", "\ntypedef ", "\nstatic ", "\nextern ", "\nvoid ",
    "\nint ", "\nchar ", "\nunsigned ", "\nlong ", "\nfloat ", "\ndouble ", "\nbool ",
    "\nconst ", "\n#define ", "\n#if", "\nif ", "\nfor ", "\nwhile ", "\nswitch ", "\ncase ",
)  # fmt: skip

_BY_LANGUAGE: dict[str, tuple[str, ...]] = {
    "python": _PYTHON,
    "javascript": _code(*_JS),
    "typescript": _code(*_JS, *_TS),
    "go": _code(
        "\nfunc ",
        "\ntype ",
        "\nvar ",
        "\nconst ",
        "\nif ",
        "\nfor ",
        "\nswitch ",
        "\ncase ",
    ),  # fmt: skip
    "java": _code(
        "\nclass ",
        "\npublic ",
        "\nprotected ",
        "\nprivate ",
        "\nabstract ",
        "\nfinal ",
        "\ninterface ",
        "\nenum ",
        "\nrecord ",
        *_JAVA_MEMBERS,
    ),  # fmt: skip
    "kotlin": _code(
        "\nclass ",
        "\ndata class ",
        "\nsealed class ",
        "\nobject ",
        "\ninterface ",
        "\nfun ",
        "\nval ",
        "\nvar ",
        "\n    fun ",
        "\n    override fun ",
        "\n    private fun ",
        "\n\tfun ",
        "\nwhen ",
        "\nif ",
        "\nfor ",
        "\nwhile ",
    ),  # fmt: skip
    "scala": _code(
        "\nclass ",
        "\ncase class ",
        "\nobject ",
        "\ntrait ",
        "\ndef ",
        "\nval ",
        "\n  def ",
        "\n  val ",
        "\n    def ",
        "\n\tdef ",
        "\nif ",
        "\nfor ",
        "\nwhile ",
        "\nmatch ",
        "\ncase ",
    ),  # fmt: skip
    "csharp": _code(
        "\nnamespace ",
        "\npublic ",
        "\ninternal ",
        "\nclass ",
        "\ninterface ",
        "\nenum ",
        "\nstruct ",
        "\nrecord ",
        "\n    public ",
        "\n    protected ",
        "\n    private ",
        "\n    internal ",
        "\n    static ",
        "\n        public ",
        "\n        protected ",
        "\n        private ",
        "\n        internal ",
        "\n        static ",
        "\n\tpublic ",
        "\n\tprivate ",
    ),  # fmt: skip
    "c": _code(*_C),
    "cpp": _code("\nnamespace ", "\ntemplate", "\nclass ", *_C, "\n    virtual "),
    "rust": _code(
        "\nimpl",
        "\npub fn ",
        "\nfn ",
        "\npub struct ",
        "\nstruct ",
        "\npub enum ",
        "\nenum ",
        "\npub trait ",
        "\ntrait ",
        "\npub mod ",
        "\nmod ",
        "\nconst ",
        "\nstatic ",
        "\n    pub fn ",
        "\n    fn ",
        "\nlet ",
        "\nif ",
        "\nwhile ",
        "\nfor ",
        "\nloop ",
        "\nmatch ",
    ),  # fmt: skip
    "ruby": _code(
        "\nclass ",
        "\nmodule ",
        "\ndef ",
        "\n  def ",
        "\n    def ",
        "\n\tdef ",
        "\nif ",
        "\nunless ",
        "\nwhile ",
        "\nfor ",
        "\ndo ",
        "\nbegin ",
        "\nrescue ",
    ),  # fmt: skip
    "php": _code(
        "\nnamespace ",
        "\nclass ",
        "\nabstract class ",
        "\nfinal class ",
        "\ninterface ",
        "\ntrait ",
        "\nfunction ",
        "\n    public function ",
        "\n    protected function ",
        "\n    private function ",
        "\n    public static function ",
        "\n    function ",
        "\nif ",
        "\nforeach ",
        "\nwhile ",
        "\nswitch ",
    ),  # fmt: skip
    "swift": _code(
        "\nclass ",
        "\nstruct ",
        "\nenum ",
        "\nprotocol ",
        "\nextension ",
        "\nfunc ",
        "\npublic ",
        "\nprivate ",
        "\n    func ",
        "\n    public func ",
        "\n    private func ",
        "\n    init",
        "\nif ",
        "\nfor ",
        "\nwhile ",
        "\nswitch ",
        "\ncase ",
    ),  # fmt: skip
    # ";\n" ends a statement (and is kept with it); keywords then split long statements.
    "sql": _code(
        ";\n",
        "\nCREATE ",
        "\ncreate ",
        "\nINSERT ",
        "\ninsert ",
        "\nUPDATE ",
        "\nupdate ",
        "\nDELETE ",
        "\ndelete ",
        "\nWITH ",
        "\nwith ",
        "\nSELECT ",
        "\nselect ",
        "\nFROM ",
        "\nfrom ",
        "\nWHERE ",
        "\nwhere ",
        "\nJOIN ",
        "\nLEFT JOIN ",
        "\njoin ",
        "\nGROUP BY ",
        "\ngroup by ",
        "\nORDER BY ",
        "\norder by ",
        "\nUNION ",
        "\nunion ",
    ),  # fmt: skip
    "shell": _code(
        "\nfunction ",
        "\nif ",
        "\nfor ",
        "\nwhile ",
        "\nuntil ",
        "\ncase ",
        "\nselect ",
    ),  # fmt: skip
    # Documents, then top-level list items.
    "yaml": _code("\n---", "\n- "),
    "markdown": (
        "\n# ",
        "\n## ",
        "\n### ",
        "\n#### ",
        "\n##### ",
        "\n###### ",
        "\n\n",
        "\n",
        ". ",
        " ",
        "",
    ),  # fmt: skip
}

_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys((".py", ".pyi", ".pyx", ".pyw"), "python"),
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"), "javascript"),
    **dict.fromkeys((".ts", ".mts", ".cts", ".tsx"), "typescript"),
    ".go": "go",
    ".java": "java",
    **dict.fromkeys((".kt", ".kts"), "kotlin"),
    **dict.fromkeys((".scala", ".sc"), "scala"),
    ".cs": "csharp",
    **dict.fromkeys((".c", ".h"), "c"),
    **dict.fromkeys((".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++"), "cpp"),
    ".rs": "rust",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".sql": "sql",
    **dict.fromkeys((".sh", ".bash", ".zsh", ".ksh"), "shell"),
    **dict.fromkeys((".yaml", ".yml"), "yaml"),
    **dict.fromkeys((".md", ".markdown", ".mdx"), "markdown"),
}


def separators_for(path: str) -> tuple[str, ...]:
    """The separators for the file at ``path`` (a path or URI), chosen by its extension,
    case-insensitively: definitions of its language first, then ``"\\n\\n"``, ``"\\n"``,
    ``" "``, ``""``. An unknown or missing extension gives :data:`DEFAULT_SEPARATORS`."""
    # URIs (gs://bucket/a/b.py) use "/" whatever the platform.
    extension = posixpath.splitext(posixpath.basename(path))[1].lower()
    language = _EXTENSIONS.get(extension)
    return DEFAULT_SEPARATORS if language is None else _BY_LANGUAGE[language]
