"""Review coverage: which of the changed files the model actually looked at (specification §5).

Every tool result passes through the loop, so the loop can say exactly what the model saw. The
changed files are the prompt's list (`PinnedRepository.changed_files()`: merge base to head,
renames split into a deletion of the old path and an addition of the new one). A changed file
is inspected when the model

- read it at the head: a successful `read_repository_file` on it, even of one line. A read
  through a symbolic link counts for the file the link resolves to (the file whose text the
  model received; a changed link itself is covered only by a diff, as a read never shows
  where it points); or
- received a diff holding that file's changes: an `inspect_git_diff` result or the diff inlined
  in the first message (`REVIEW_INLINE_DIFF_BYTES`). A renamed file's section covers both its
  paths (the model saw the old path go and the new one come); a deleted file is covered by the
  section that shows its removal.

A file only listed by `list_repository_files` or only matched by `search_repository` is not
inspected: the model saw its name or one line, not the change.

A diff cut by `max_bytes` covers only the sections it actually holds. The section being cut
counts when the cut falls after its first hunk header (`@@ -a,b +c,d @@`): the model saw part of
that file's change, so "a diff cut in the middle of the third file covers files one to three".
It does not count when the cut falls inside its header lines (`diff --git`, `index`, `---`,
`+++`), where the model saw only that the file changed; and a section without hunks (a binary
file, a pure rename, a mode change, an empty file) counts only when it is complete.

With REVIEW_REQUIRE_EVIDENCE, the same results also feed the record of the code lines the model
received (`ReceivedCode`, loop/evidence.py), whatever the path of the file they show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pr_review_api.errors import ToolError
from pr_review_api.loop.evidence import ReceivedCode
from pr_review_api.model import Coverage
from pr_review_api.settings import MAX_NOT_INSPECTED

if TYPE_CHECKING:  # only for annotations: the tracker never opens a repository itself
    from pr_review_api.git.repository import PinnedRepository

_HEADER = "diff --git "
_HUNK = "@@ "
_NAMED = ("rename from ", "rename to ", "copy from ", "copy to ")
# git's C-style quoting of unusual paths (core.quotePath=false leaves bytes >= 0x80 alone).
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_OCTAL = re.compile(r"[0-3][0-7]{2}")


class CoverageTracker:
    """What one review's model has seen of its changed files."""

    def __init__(
        self,
        repository: PinnedRepository,
        changed_files: Iterable[tuple[str, str]],
        *,
        received: ReceivedCode | None = None,
    ):
        self._repository = repository
        self._changed = dict.fromkeys(path for _, path in changed_files)
        self._inspected: set[str] = set()
        # REVIEW_REQUIRE_EVIDENCE (loop/evidence.py): the code lines the model received are
        # recorded from the same results coverage sees; None when the rule is off.
        self.received = received

    @property
    def changed_paths(self) -> list[str]:
        """The changed files, in the prompt's order."""
        return list(self._changed)

    def saw_tool_result(self, name: str, result: Mapping[str, Any]) -> None:
        """Note a tool result the model received (failed calls show nothing)."""
        if result.get("ok") is not True:
            return
        if name == "read_repository_file":
            self.saw_read(str(result["path"]))
        elif name == "inspect_git_diff":
            self.saw_diff(str(result["diff"]), truncated=bool(result["truncated"]))
            return  # saw_diff fed the evidence recorder
        if self.received is not None:
            self.received.saw_tool_result(name, result)

    def saw_read(self, path: str) -> None:
        """A successful read of `path` at the head, as the model spelled it."""
        try:
            resolved = self._repository.resolve(path)
        except ToolError:
            return
        self._see([resolved.path])

    def saw_diff(self, text: str, *, truncated: bool) -> None:
        """A diff the model received; `truncated` when a byte cap cut it."""
        self._see(diff_paths(text, truncated=truncated))
        if self.received is not None:
            self.received.saw_diff(text)

    def _see(self, paths: Iterable[str]) -> None:
        self._inspected.update(path for path in paths if path in self._changed)

    def coverage(self) -> Coverage:
        """The document's `coverage`: counts, and the first changed files never seen."""
        missing = sorted(path for path in self._changed if path not in self._inspected)
        return Coverage(
            changed_files=len(self._changed),
            inspected_files=len(self._inspected),
            not_inspected=missing[:MAX_NOT_INSPECTED],
        )


def diff_paths(text: str, *, truncated: bool) -> set[str]:
    """The paths (old and new) of every file whose changes `text`, a git diff, holds.

    `truncated` says the text was cut: its last line may be partial and its last section is
    judged by the rule in this module's docstring. Paths are repository-relative, unquoted.
    """
    lines = text.split("\n")
    if truncated or not lines[-1]:
        lines.pop()  # a partial line, or the empty string after the final newline
    starts = [index for index, line in enumerate(lines) if line.startswith(_HEADER)]
    paths: set[str] = set()
    for number, start in enumerate(starts):
        last = number == len(starts) - 1
        section = lines[start : starts[number + 1] if not last else len(lines)]
        cut = truncated and last
        if cut and not any(line.startswith(_HUNK) for line in section[1:]):
            continue
        paths.update(_section_paths(section))
    return paths


def _section_paths(section: list[str]) -> list[str]:
    named: dict[str, str] = {}
    for line in section[1:]:
        if line.startswith(_HUNK):
            break  # extended headers come before the first hunk
        for prefix in _NAMED:
            if line.startswith(prefix):
                path = _path(line[len(prefix) :])
                if path is not None:
                    named[prefix.split()[1]] = path
    if "from" in named and "to" in named:
        return [named["from"], named["to"]]
    same = _same_paths(section[0][len(_HEADER) :])
    return [] if same is None else [same]


def _same_paths(rest: str) -> str | None:
    """The path of a header `a/P b/P` (both sides the same, as for any non-rename)."""
    if rest.startswith('"'):
        taken = _take_quoted(rest)
        if taken is None:
            return None
        old, remainder = taken
        new = _take_quoted(remainder[1:]) if remainder.startswith(' "') else None
        if new is None or new[1] or old[2:] != new[0][2:]:
            return None
        return old[2:] if old.startswith("a/") and new[0].startswith("b/") else None
    half = (len(rest) - 5) // 2
    path = rest[2 : 2 + half]
    return path if half > 0 and rest == f"a/{path} b/{path}" else None


def _path(text: str) -> str | None:
    """A path of a `rename from`/`rename to` line, unquoted."""
    if not text.startswith('"'):
        return text or None
    taken = _take_quoted(text)
    return taken[0] if taken is not None and taken[0] and not taken[1] else None


def _take_quoted(text: str) -> tuple[str, str] | None:
    """A C-quoted string at the start of `text`, unquoted, and what follows its closing quote."""
    out = bytearray()
    index = 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return out.decode("utf-8", "replace"), text[index + 1 :]
        if char != "\\":
            out += char.encode("utf-8", "replace")
            index += 1
            continue
        escape = text[index + 1 : index + 2]
        if escape in _ESCAPES:
            out.append(_ESCAPES[escape])
            index += 2
        elif _OCTAL.fullmatch(text[index + 1 : index + 4]):
            out.append(int(text[index + 1 : index + 4], 8))
            index += 4
        else:
            return None
    return None
