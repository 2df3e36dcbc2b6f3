"""How many syntax errors a source file holds, for the languages we parse (specification §14).

A suggestion is kept only when the file with the replacement applied has no more syntax
errors than the file at the head: a fix must not break the parse (a file that did not parse
before may still not parse after, no worse). The parsers are tree-sitter's, one prebuilt
grammar wheel per language (`tree-sitter-python` and the like): tree-sitter-language-pack 1.x
downloads its grammars from the internet on first use, which a review may neither do nor
trust. The language is chosen by the file's extension; other files are not parsed.

An error is an ERROR node (text the grammar could not fit) or a MISSING node (a token the
parser invented to recover, such as a closing bracket). Parsing is CPU work of up to a 1 MiB
file (about a second for 1 MiB of Python on a busy machine, bench/syntax.py): callers run it on
a worker thread, never on the event loop. A file is parsed once (`SyntaxBaseline`); each
patched version is parsed incrementally from that tree, which re-reads only around the edit
(about a tenth of a full parse of 1 MiB).

Error recovery can make a parse far slower than usual (an unclosed bracket in the middle of a
large table of data: seconds), and most of a parse happens after the last byte is read. Every
parse therefore has a deadline that tree-sitter's progress callback checks while it parses, not
only while it reads; past it, or on any other failure of the parse, `ParseTooSlow`. The review
runs these parses in a child process with a memory limit (`loop/syntax_child.py`): one tree of
1 MiB of dense code can take hundreds of megabytes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import PurePosixPath

import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_go
import tree_sitter_java
import tree_sitter_javascript
import tree_sitter_python
import tree_sitter_ruby
import tree_sitter_rust
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Point, Tree

_CHUNK_BYTES = 4096

_GRAMMARS: dict[str, Callable[[], object]] = {
    "python": tree_sitter_python.language,
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "go": tree_sitter_go.language,
    "rust": tree_sitter_rust.language,
    "java": tree_sitter_java.language,
    "c": tree_sitter_c.language,
    "cpp": tree_sitter_cpp.language,
    "ruby": tree_sitter_ruby.language,
}

_EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",  # C++ headers parse as C with the same errors before and after: a fair compare
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".rb": "ruby",
}


def language_of(path: str) -> str | None:
    """The language we parse `path` as, by its extension, or None."""
    return _EXTENSIONS.get(PurePosixPath(path).suffix.lower())


@functools.cache
def _language(name: str) -> Language:
    return Language(_GRAMMARS[name]())


class ParseTooSlow(Exception):
    """A parse did not finish: it outlasted its deadline (time.monotonic()), or failed."""


def _parse(parser: Parser, source: bytes, deadline: float, old: Tree | None = None) -> Tree:
    def read(offset: int, _point: Point) -> bytes:
        return source[offset : offset + _CHUNK_BYTES]

    def halt(_offset: int, _has_error: bool) -> bool:
        return time.monotonic() > deadline

    try:
        if halt(0, False):  # tree-sitter may not ask before a small input is done
            raise ParseTooSlow
        # A halted parse raises ValueError; an exception in a callback comes out as itself or,
        # from the read after the last byte, as SystemError: every one is a parse not done.
        if old is None:  # the keyword takes a Tree, never None
            tree = parser.parse(read, progress_callback=halt)
        else:
            tree = parser.parse(read, old, progress_callback=halt)
    except Exception as error:  # py-tree-sitter's failures share no base class
        parser.reset()  # else the next parse would resume this one, on other bytes
        raise ParseTooSlow from error
    if tree is None:  # only without a language, which every parser here has
        raise ParseTooSlow
    return tree


def syntax_errors(language: str, source: bytes, deadline: float = float("inf")) -> int:
    """The ERROR and MISSING nodes of `source` parsed as `language` (a `language_of` name).

    A parser per call: tree-sitter's parsers are not shared between threads."""
    return _count(_parse(Parser(_language(language)), source, deadline).root_node)


class SyntaxBaseline:
    """A file at the head, parsed once: its error count, and the count of edited versions.

    Not shared between threads (tree-sitter's parsers are not)."""

    def __init__(self, language: str, source: bytes, deadline: float = float("inf")) -> None:
        self._parser = Parser(_language(language))
        self._source = source
        self._tree = _parse(self._parser, source, deadline)
        self.errors = _count(self._tree.root_node)

    def errors_with(self, patched: bytes, deadline: float = float("inf")) -> int:
        """The errors of `patched`, parsed incrementally: the bytes it shares with the head
        at its start and at its end are taken as unchanged."""
        old = self._source
        prefix, suffix = edit_span(old, patched)
        old_end, new_end = len(old) - suffix, len(patched) - suffix
        tree = self._tree.copy()
        tree.edit(
            prefix,
            old_end,
            new_end,
            _point(old, prefix),
            _point(old, old_end),
            _point(patched, new_end),
        )
        return _count(_parse(self._parser, patched, deadline, tree).root_node)


def edit_span(old: bytes, new: bytes) -> tuple[int, int]:
    """The lengths of the longest common prefix and suffix of two versions (not overlapping):
    `new` is `old` with the bytes between them replaced."""
    prefix = _common_prefix(old, new)
    return prefix, _common_suffix(old, new, min(len(old), len(new)) - prefix)


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix (a binary search of C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """The length of the longest common suffix, at most `limit`."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def _point(source: bytes, offset: int) -> Point:
    """Row and byte column of `offset`, as tree-sitter counts them."""
    row = source.count(b"\n", 0, offset)
    return Point(row, offset - (source.rfind(b"\n", 0, offset) + 1))


def _count(root: Node) -> int:
    """Errors under `root`, walking only subtrees that hold one (`has_error`)."""
    found = 0
    pending = [root]
    while pending:
        node = pending.pop()
        if node.is_error or node.is_missing:
            found += 1
        pending.extend(child for child in node.children if child.has_error or child.is_missing)
    return found
