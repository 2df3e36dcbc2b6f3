"""How many syntax errors a source file holds, for the languages we parse (CONTRACT 14).

A suggestion is kept only when the file with the replacement applied has no more syntax
errors than the file at the head: a fix must not break the parse (a file that did not parse
before may still not parse after, no worse). The parsers are tree-sitter's, one prebuilt
grammar wheel per language (`tree-sitter-python` and the like): tree-sitter-language-pack 1.x
downloads its grammars from the internet on first use, which a review may neither do nor
trust. The language is chosen by the file's extension; other files are not parsed.

An error is an ERROR node (text the grammar could not fit) or a MISSING node (a token the
parser invented to recover, such as a closing bracket). Parsing is CPU work of up to a 1 MiB
file: callers run it on a worker thread, never on the event loop.
"""

from __future__ import annotations

import functools
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
from tree_sitter import Language, Node, Parser

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


def syntax_errors(language: str, source: bytes) -> int:
    """The ERROR and MISSING nodes of `source` parsed as `language` (a `language_of` name).

    A parser per call: tree-sitter's parsers are not shared between threads."""
    tree = Parser(_language(language)).parse(source)
    return _count(tree.root_node)


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
