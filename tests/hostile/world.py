"""The hostile world: one fixed hostile repository that the repository and tool suites share.

It sits beside `corpus.py`, the attack corpus: the corpus builds many repositories object by
object to try every attack on every tool, while this world is one repository with known
contents, so the tool suites can assert exact results (this listing, that read) against it.

`build_hostile_world` makes one repository whose head commit holds, beside ordinary source
files, everything a hostile pull request could plant with git's plumbing: symbolic links out
of the tree, into `.git`, dangling, looping or absurdly long; `.git` look-alikes; gitlinks;
names no request can spell; binary, non-UTF-8, oversized and escaping-heavy files. A file
outside the repository (and one inside `.git`) holds a distinctive sentinel that no tool
result may ever contain. The names below are the suites' vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import MAX_SOURCE_FILE_BYTES
from tests.gitrepo import EXECUTABLE, FILE, GITLINK, LINK, Entry, GitRepo

# Never in any tool result: the content of a file outside the repository and one inside .git.
OUTSIDE_SENTINEL = "OUTSIDE-SENTINEL-5e1f0c93-never-in-a-result"
GIT_DIR_SENTINEL = "GIT-DIR-SENTINEL-a77b2d18-never-in-a-result"
# Content of every `.git` look-alike: it must never be listed, read or found.
LOOKALIKE_MARKER = "LOOKALIKE-MARKER-needle"

APP_PY = (
    "from __future__ import annotations\n"
    "\n"
    "def validate_name(name: str) -> None:\n"
    "    if not name:\n"
    '        raise ValueError("empty")\n'
    "\n"
    "def save(widget) -> None:\n"
    "    validate_name(widget.name)\n"
)
UTIL_PY = "def helper() -> int:\n    return 42  # needle\n"
METACHAR_TXT = "match .*[ literally\naxxb only a regex would match\n--output=x is text\nNeedle\n"
GIANT_LINE_CHARS = 900_000
MANY_FILES = 230
QUOTE_FILES = 40
QUOTE_PATH_BYTES = 4096
HUGE_LINK_TARGET = b"huge/" + b"ab/" * 400_000  # loops through itself; far past PATH_MAX

REGULAR_FILES = {
    "README.md": "# Demo\nneedle in the readme\n",
    "src/app.py": APP_PY,
    "src/lib/util.py": UTIL_PY,
    "src-extra/x.py": "needle = 1\n",
    "src.txt": "needle\n",
    "src0/y.py": "needle = 2\n",
    "docs/guide.md": "# Guide\n",
    "text/crlf.txt": "one\r\ntwo needle\r\nthree\r\n",
    "text/no_newline.txt": "first\nlast",
    "text/empty.txt": "",
    "text/metachar.txt": METACHAR_TXT,
}


def quote_path(index: int) -> str:
    """A 4096-byte path made of double quotes, the character JSON escapes to two bytes."""
    head = f"quotes/{index:03d}"
    return head + '"' * (QUOTE_PATH_BYTES - len(head))


def many_path(index: int) -> str:
    return f"many/f{index:03d}.txt"


LINKS = {
    "links/to_app": b"../src/app.py",
    "links/chain": b"to_app",
    "links/to_src": b"../src",
    "links/to_passwd": b"/etc/passwd",
    "links/up_out": b"../../x",
    "links/into_git": b"../.git/config",
    "links/into_git_upper": b"../.GIT/config",
    "links/dangling": b"../missing.txt",
    "links/loop_a": b"loop_b",
    "links/loop_b": b"loop_a",
    "links/self": b"self",
    "links/drive": b"C:/Windows/win.ini",
    "links/backslash": b"..\\src\\app.py",
    "links/empty": b"",
    "links/through_file": b"../README.md/x",
    "links/huge": HUGE_LINK_TARGET,
    "links/padded_ok": b"./" * 2040 + b"../src/app.py",  # 4093 bytes: within PATH_MAX
    "links/padded_over": b"./" * 2050 + b"../src/app.py",  # 4113 bytes: past PATH_MAX
}
# The only links a listing shows: those resolving to a regular file inside the tree.
LISTABLE_LINKS = ("links/chain", "links/padded_ok", "links/to_app")

LOOKALIKES = (
    ".GIT/config",
    ".Git/HEAD",
    ".git /config",
    ".git./config",
    ".g\u200cit/config",
    "\ufeff.git/config",
    "sub/.git/config",
    ".git/planted",
)

UNSPELLABLE = (
    "weird/new\nline.txt",
    "weird/tab\t.txt",
    "weird/back\\slash.txt",
    "weird/\udcff-not-utf8.txt",  # a raw 0xff byte in the tree
)


@dataclass(frozen=True)
class HostileWorld:
    """A repository, its base and head commits, and the sentinel file outside it."""

    repo: GitRepo
    base: str
    head: str
    outside: Path
    entries: dict[str, Entry]

    def pinned(self) -> PinnedRepository:
        return PinnedRepository.open(self.repo.git_dir, self.base, self.head)

    def listable(self) -> list[str]:
        """What a complete listing must show, worked out from the entries, not the code."""
        hidden = {*LOOKALIKES, *UNSPELLABLE}
        files = [
            path
            for path, (mode, _) in self.entries.items()
            if mode in (FILE, EXECUTABLE) and path not in hidden
        ]
        return sorted([*files, *LISTABLE_LINKS])


def _escaping_heavy() -> str:
    """Lines whose JSON escaping is heavy: quotes, backslashes, controls, non-BMP."""
    line = '"\\\x01\x1f\u2028😀' * 40
    return "".join(f"{line}{n}\n" for n in range(600))


def hostile_entries(outside: Path, submodule_sha: str) -> dict[str, Entry]:
    """Every entry of the hostile head tree."""
    entries: dict[str, Entry] = {p: (FILE, c.encode()) for p, c in REGULAR_FILES.items()}
    entries["src/run.sh"] = (EXECUTABLE, b"#!/bin/sh\necho needle\n")
    entries["text/lines500.txt"] = (FILE, "".join(f"line {n}\n" for n in range(1, 501)).encode())
    entries["text/escaping.txt"] = (FILE, _escaping_heavy().encode())
    entries["text/unicode.txt"] = (FILE, "ascii\nnon-BMP 😀 𝄞 needle\n\u2028 sep\n".encode())
    entries["text/giant_line.txt"] = (FILE, b"needle" + b"x" * (GIANT_LINE_CHARS - 6))
    entries["text/long_line.txt"] = (FILE, b"a" * 5000 + b"needle-middle" + b"b" * 5000 + b"\n")
    entries["bin/nul.bin"] = (FILE, b"needle\x00binary\n")
    entries["bin/latin1.txt"] = (FILE, "café needle\n".encode("latin-1"))
    entries["bin/mixed.txt"] = (FILE, b"good needle\nbad \xff needle\n")
    exact = b"needle exact\n" + b"y" * (MAX_SOURCE_FILE_BYTES - 14) + b"\n"
    entries["big/exact.txt"] = (FILE, exact)
    entries["big/over.txt"] = (FILE, exact + b"z")
    for index in range(MANY_FILES):
        entries[many_path(index)] = (FILE, f"needle {index}\n".encode())
    heavy_line = "\x01" * 300 + "needle" + '"' * 300 + "\n"
    for index in range(QUOTE_FILES):
        entries[quote_path(index)] = (FILE, heavy_line.encode())
    entries.update({path: (LINK, target) for path, target in LINKS.items()})
    entries["links/to_outside"] = (LINK, str(outside).encode())
    entries["escape_rel"] = (LINK, b"../outside/secret.txt")
    entries["deep/escape"] = (LINK, b"../../outside/secret.txt")
    for path in LOOKALIKES:
        entries[path] = (FILE, LOOKALIKE_MARKER.encode() + b"\n")
    for path in UNSPELLABLE:
        entries[path] = (FILE, b"needle unspellable\n")
    entries["vendor/lib"] = (GITLINK, submodule_sha.encode())
    return entries


def build_hostile_world(root: Path) -> HostileWorld:
    """Build the hostile repository under `root`; the sentinel lives in `root/outside`."""
    outside = root / "outside" / "secret.txt"
    outside.parent.mkdir(parents=True)
    outside.write_text(OUTSIDE_SENTINEL + "\n")
    repo = GitRepo(root / "repo")
    (repo.git_dir / "planted.txt").write_text(GIT_DIR_SENTINEL + "\n")
    # The base goes through the working tree, so real links towards the sentinel exist on
    # disk: a tool that read the file system instead of git's objects would follow them.
    repo.symlink("escape_rel", "../outside/secret.txt")
    repo.symlink("escape_abs", str(outside))
    repo.symlink("into_git", ".git/planted.txt")
    base = repo.commit_files({"README.md": "# Demo\n"}, message="base")
    entries = hostile_entries(outside, base)
    head = repo.commit_tree(entries, parent=base, message="hostile")
    return HostileWorld(repo, base, head, outside, entries)
