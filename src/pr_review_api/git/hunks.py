"""The hunks of a diff, file by file: which lines of the new side a review comment may anchor to.

GitHub accepts a review comment on the RIGHT side only on a line inside a hunk of the file's
diff from the merge base to the head: an added line or an unchanged (context) line. `parse_hunks`
reads `git diff`'s unified output and records, for each new path, the right-side line numbers of
those lines. It handles what git prints besides hunks: renames and copies (the new path is
the one that counts), mode changes, binary files (no lines), `\\ No newline at end of file`,
deleted files (`+++ /dev/null`), and C-quoted paths (`"a\\tb"`, octal bytes). Hunk bodies are
consumed by their line counts, so an added line that reads `++ b/x` can never be taken for a
header.

`diff_hunks` runs git (hardened: no external diff, no textconv, fixed prefixes, rename
detection as GitHub does it) and streams its output, keeping only the files asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pr_review_api.git_runner import GitConfig, stream_git

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {
    ord("a"): 7,
    ord("b"): 8,
    ord("t"): 9,
    ord("n"): 10,
    ord("v"): 11,
    ord("f"): 12,
    ord("r"): 13,
    ord('"'): 34,
    ord("\\"): 92,
}
# Every diff the project reads (hunks here, the diff tool, a tree's changes in tree.py):
# output settings a local repository's own config could change, so reviews read one format.
DIFF_CONFIG = GitConfig(
    values=(
        ("diff.noprefix", "false"),
        ("diff.mnemonicPrefix", "false"),
        ("diff.relative", "false"),
        # color.ui=false (runner.py) loses to a repository's own color.diff=always.
        ("color.diff", "false"),
        # diff.submodule=log/diff would print a submodule's history or content, read from
        # .git/modules, in place of the two gitlink SHAs.
        ("diff.submodule", "short"),
        ("diff.external", ""),
        ("core.pager", "cat"),
        # Unusual paths C-quoted, as unquote_path and loop/coverage.py read them.
        ("core.quotePath", "true"),
    )
)


@dataclass
class FileHunks:
    """The right-side lines of one file's hunks, and how each was shown."""

    path: str  # the new path (a rename's destination)
    old_path: str | None = None  # set for a rename or copy
    added: set[int] = field(default_factory=set)
    context: set[int] = field(default_factory=set)
    deleted_lines: int = 0
    binary: bool = False
    # Each hunk's right-side lines, first and last (a hunk of deletions only has none).
    hunks: list[tuple[int, int]] = field(default_factory=list)
    # Each context line's number on the left side (GitLab positions name both sides).
    context_old: dict[int, int] = field(default_factory=dict)

    def anchors(self, line: int) -> bool:
        """Whether a RIGHT-side comment on `line` lands inside one of this file's hunks."""
        return line in self.added or line in self.context

    def spans(self, start: int, end: int) -> bool:
        """Whether RIGHT-side lines `start`..`end` all lie in one hunk: the range GitHub
        accepts for a multi-line comment (every right-side line of a hunk is added or
        context)."""
        return any(first <= start <= end <= last for first, last in self.hunks)


def unquote_path(raw: bytes) -> bytes:
    """A path as git printed it: C-quoted (`"..."` with escapes and octal bytes) or plain."""
    if not (len(raw) >= 2 and raw.startswith(b'"') and raw.endswith(b'"')):
        return raw
    body = raw[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        byte = body[i]
        if byte != ord("\\") or i + 1 >= len(body):
            out.append(byte)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif body[i + 1 : i + 4].isdigit() and len(body[i + 1 : i + 4]) == 3:
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(nxt)
            i += 2
    return bytes(out)


def _header_path(rest: bytes, prefix: bytes) -> bytes | None:
    """The path of a `--- a/x` / `+++ b/x` line (None for /dev/null)."""
    rest = rest.rstrip(b"\n").removesuffix(b"\r")
    # git appends a tab when the name holds a space (so patch can tell where it ends).
    rest = rest.removesuffix(b"\t")
    if rest == b"/dev/null":
        return None
    name = unquote_path(rest)
    return name[len(prefix) :] if name.startswith(prefix) else name


def _decode(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


def parse_hunks(lines: Iterable[bytes], wanted: set[str] | None = None) -> dict[str, FileHunks]:
    """The files of a unified diff (git's output, line by line), keyed by new path.

    `wanted` limits what is kept (None: every file). Deleted files are not keyed: nothing on
    the RIGHT side of them can be commented on.
    """
    parser = _Parser(wanted)
    for line in lines:
        parser.feed(line)
    return parser.files


class _Parser:
    def __init__(self, wanted: set[str] | None) -> None:
        self.wanted = wanted
        self.files: dict[str, FileHunks] = {}
        self.current: FileHunks | None = None
        self.rename_from: bytes | None = None
        self.old_left = 0
        self.new_left = 0
        self.left = 0
        self.right = 0

    def _keep(self, name: str) -> bool:
        return self.wanted is None or name in self.wanted

    def feed(self, line: bytes) -> None:
        if self.old_left > 0 or self.new_left > 0:
            self._content(line)  # inside a hunk: every line is content, whatever it looks like
        elif line.startswith(b"diff --git "):
            self.current = None
            self.rename_from = None
        elif line.startswith((b"rename from ", b"copy from ")):
            self.rename_from = unquote_path(line.split(b" ", 2)[2].rstrip(b"\n"))
        elif line.startswith(b"+++ "):
            self._new_file(line)
        elif line.startswith(b"Binary files "):
            binary = _binary_new_path(line)
            if binary is not None and self._keep(binary):
                self.files.setdefault(binary, FileHunks(binary)).binary = True
        elif line.startswith(b"@@ "):
            match = _HUNK.match(line)
            if match is not None:
                self.old_left = 1 if match[2] is None else int(match[2])
                self.new_left = 1 if match[4] is None else int(match[4])
                self.left = int(match[1])
                self.right = int(match[3])
                if self.current is not None and self.new_left > 0:
                    self.current.hunks.append((self.right, self.right + self.new_left - 1))

    def _new_file(self, line: bytes) -> None:
        path = _header_path(line[4:], b"b/")
        self.current = None
        if path is None:
            return
        name = _decode(path)
        if self._keep(name):
            self.current = self.files.setdefault(name, FileHunks(name))
            if self.rename_from is not None:
                self.current.old_path = _decode(self.rename_from)

    def _content(self, line: bytes) -> None:
        tag = line[:1]
        current = self.current
        if tag == b"\\":
            return  # "\ No newline at end of file" belongs to the line before
        if tag == b"-":
            self.old_left -= 1
            self.left += 1
            if current is not None:
                current.deleted_lines += 1
            return
        if tag == b"+":
            self.new_left -= 1
            if current is not None:
                current.added.add(self.right)
        else:  # " ", or an empty line (a context line whose space an editor ate)
            self.old_left -= 1
            self.new_left -= 1
            if current is not None:
                current.context.add(self.right)
                current.context_old[self.right] = self.left
            self.left += 1
        self.right += 1


def _binary_new_path(line: bytes) -> str | None:
    # "Binary files a/x and b/y differ": unambiguous only when the names hold no " and ".
    text = line.rstrip(b"\n")
    if not text.startswith(b"Binary files ") or not text.endswith(b" differ"):
        return None
    names = text[len(b"Binary files ") : -len(b" differ")]
    parts = names.split(b" and ")
    if len(parts) != 2:
        return None
    path = _header_path(parts[1], b"b/")
    return None if path is None else _decode(path)


def diff_hunks(
    git_dir: Path, merge_base: str, head: str, wanted: set[str] | None = None
) -> dict[str, FileHunks]:
    """The hunks of `git diff merge_base head` (renames detected, 3 lines of context)."""
    args = [
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        "--unified=3",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        merge_base,
        head,
        "--",
    ]
    with stream_git(git_dir, args, config=DIFF_CONFIG) as process:
        assert process.stdout is not None
        return parse_hunks(process.stdout, wanted)
