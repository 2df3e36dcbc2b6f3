"""Path rules: which requested paths name something inside the repository, and which stored
paths a request could spell (and so may be listed)."""

from __future__ import annotations

import re

from pr_review_api.errors import ToolError
from pr_review_api.settings import MAX_PATH_BYTES

DRIVE = re.compile(r"^[A-Za-z]:")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Code points that HFS+ ignores in names; ".g\u200cit" is ".git" there.
_IGNORABLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]")


def is_dot_git(component: str) -> bool:
    """Whether a name is `.git` or a look-alike a case- or space-folding file system takes as it."""
    return _IGNORABLE.sub("", component).rstrip(" .").casefold() == ".git"


def split_path(raw: str) -> list[str]:
    """Check a requested repository path and split it into components.

    Absolute, drive, UNC and `..` paths point outside the repository; NULs, control
    characters, backslashes and `.git` components are invalid. `.` and empty components
    are dropped, so "./src//a.py" names "src/a.py" and "" names the root.
    """
    try:
        # A lone surrogate cannot become a git argument (UnicodeEncodeError in Popen) nor a
        # tree path, so it is refused here rather than raised from a tool.
        size = len(raw.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolError("invalid_path", "The path is not valid UTF-8.") from None
    if size > MAX_PATH_BYTES:
        raise ToolError("invalid_path", "The path is too long.")
    if raw.startswith("/") or DRIVE.match(raw):
        raise ToolError("outside_repository", "Absolute paths are not allowed.")
    if CONTROL.search(raw) or "\\" in raw:
        raise ToolError("invalid_path", "The path contains a forbidden character.")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    for part in parts:
        if part == "..":
            raise ToolError("outside_repository", "Parent-directory components are not allowed.")
        if is_dot_git(part):
            raise ToolError("invalid_path", "Git's internal directory cannot be read.")
    return parts


# Paths of these characters, no component starting with ".", pass split_path unchanged: the
# fast path of reachable, which nearly every path of a real tree takes.
_PLAIN_PATH = re.compile(r"[\w+,=@~-][\w.+,=@~-]*(?:/[\w+,=@~-][\w.+,=@~-]*)*", re.ASCII)


def reachable(path: str) -> bool:
    """Whether a path stored in the tree could be named by a request (and so shown)."""
    if len(path) <= MAX_PATH_BYTES and _PLAIN_PATH.fullmatch(path):
        return True
    try:
        return split_path(path) == path.split("/")
    except ToolError:
        return False
