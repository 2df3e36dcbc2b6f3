"""A corpus of hostile repositories, written straight into git's object store.

Each repository's head commit is built object by object (`ObjectWriter`), so it can hold
what no working tree, `git add` or even `git mktree` would: entries named `..`, `.`, `a/b`
or `.git`, duplicate and unsorted entries, names with backslashes, control characters or
bytes that are not UTF-8, symbolic links to absolute paths, into `.git`, in loops and in
chains one hop past the limit, gitlinks, and files that are huge, binary, not UTF-8, one
giant line or nothing but characters JSON must escape. Each base commit goes through a
real working tree that holds real symbolic links out of the repository, so a tool that read
the file system instead of git's objects would follow them.

Three sentinels must never appear in a tool result: the content of a file outside every
repository (`OUTSIDE_SENTINEL`), of files inside each real `.git` (`GITDIR_SENTINEL`), and of
tree entries a request may never name (`LOOKALIKE_SENTINEL`: `.git`, `.GIT`, `.g\\u200cit`...).
Every planted text also holds `NEEDLE`, so one search would surface any of them.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from pr_review_api.git_runner import run_git
from pr_review_api.settings import MAX_PATH_BYTES, MAX_SOURCE_FILE_BYTES, MAX_SYMLINK_HOPS
from tests.gitrepo import GitRepo, git

NEEDLE = "hostile-needle"
OUTSIDE_SENTINEL = f"HOSTILE-OUTSIDE-3c9e1a-{NEEDLE}"
GITDIR_SENTINEL = f"HOSTILE-GITDIR-8d20f4-{NEEDLE}"
LOOKALIKE_SENTINEL = f"HOSTILE-LOOKALIKE-51b7e6-{NEEDLE}"
# Put in the test process's environment: a link to /proc/self/environ must not reveal it.
ENVIRON_SENTINEL = "HOSTILE-ENVIRON-e04c77"
FORBIDDEN = (OUTSIDE_SENTINEL, GITDIR_SENTINEL, ENVIRON_SENTINEL)

FILE = b"100644"
EXECUTABLE = b"100755"
LINK = b"120000"
GITLINK = b"160000"
TREE = b"40000"

APP_PY = f"def validate(name: str) -> None:\n    assert name  # {NEEDLE}\n"


# --- Objects ------------------------------------------------------------------------------


class ObjectWriter:
    """Writes loose objects exactly as given: no name, order or mode is checked."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.written = 0

    def _object(self, kind: bytes, data: bytes) -> str:
        raw = kind + b" %d\0" % len(data) + data
        sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        path = self.git_dir / "objects" / sha[:2] / sha[2:]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(zlib.compress(raw, 1))
            self.written += 1
        return sha

    def blob(self, data: bytes) -> str:
        return self._object(b"blob", data)

    def tree(self, entries: Iterable[tuple[bytes, bytes, str]]) -> str:
        """A tree of (mode, name, sha) entries, in the order given."""
        body = b"".join(
            mode + b" " + name + b"\0" + bytes.fromhex(sha) for mode, name, sha in entries
        )
        return self._object(b"tree", body)

    def commit(self, tree: str, parents: Sequence[str], message: str) -> str:
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
        lines += ["author Hostile <h@example.invalid> 1767225600 +0000"]
        lines += ["committer Hostile <h@example.invalid> 1767225600 +0000", "", message, ""]
        return self._object(b"commit", "\n".join(lines).encode())


@dataclass(frozen=True)
class Blob:
    data: bytes
    mode: bytes = FILE


@dataclass(frozen=True)
class Link:
    target: bytes


@dataclass(frozen=True)
class Gitlink:
    sha: str


@dataclass(frozen=True)
class Raw:
    """A tree written exactly as listed: duplicates, odd order and any name kept."""

    entries: tuple[tuple[bytes, Node], ...]


@dataclass(frozen=True)
class Missing:
    """An entry whose object does not exist."""

    mode: bytes = FILE


Node = Union[Blob, Link, Gitlink, Raw, Missing, "Tree"]
Tree = dict[bytes, Node]


def nest(paths: Mapping[str, Node]) -> Tree:
    """A nested tree from slash-separated paths."""
    root: Tree = {}
    for path, node in paths.items():
        raw = path.encode("utf-8", "surrogateescape")
        *dirs, name = raw.split(b"/")
        here = root
        for part in dirs:
            child = here.setdefault(part, {})
            assert isinstance(child, dict), f"{raw!r} crosses a non-directory"
            here = child
        here[name] = node
    return root


def write_node(writer: ObjectWriter, node: Node) -> tuple[bytes, str]:
    """Write a node and everything under it; return its mode and object name."""
    if isinstance(node, Blob):
        return node.mode, writer.blob(node.data)
    if isinstance(node, Link):
        return LINK, writer.blob(node.target)
    if isinstance(node, Gitlink):
        return GITLINK, node.sha
    if isinstance(node, Missing):
        return node.mode, "0" * 39 + "1"
    if isinstance(node, Raw):
        entries = [(name, *write_node(writer, child)) for name, child in node.entries]
        return TREE, writer.tree((mode, name, sha) for name, mode, sha in entries)
    written = [(name, *write_node(writer, child)) for name, child in node.items()]
    # git's order: a tree sorts as if its name ended with "/".
    written.sort(key=lambda e: e[0] + (b"/" if e[1] == TREE else b""))
    return TREE, writer.tree((mode, name, sha) for name, mode, sha in written)


# --- Repositories -------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One call whose outcome is known: "ok" or a tool error code."""

    tool: str
    arguments: Mapping[str, Any]
    expect: str


@dataclass(frozen=True)
class HostileRepo:
    """One hostile repository of the corpus."""

    name: str
    repo: GitRepo
    base: str
    head: str
    checks: tuple[Check, ...]
    corrupt: bool = False
    paths: tuple[str, ...] = ()
    """Every path of the head tree and its directories, as a request would spell it."""

    @property
    def git_dir(self) -> Path:
        return self.repo.git_dir


@dataclass(frozen=True)
class Scale:
    """Sizes of the big entries: reduced for the default run, full under `-m slow`."""

    many_files: int
    depth: int
    huge_bytes: int
    chain: int = MAX_SYMLINK_HOPS


DEFAULT_SCALE = Scale(many_files=1200, depth=120, huge_bytes=MAX_SOURCE_FILE_BYTES + 4096)
FULL_SCALE = Scale(many_files=6000, depth=400, huge_bytes=8 * MAX_SOURCE_FILE_BYTES)


@dataclass
class Corpus:
    """Every hostile repository, the sentinel file outside them all, and request probes."""

    root: Path
    outside: Path
    repos: list[HostileRepo] = field(default_factory=list)

    @property
    def probes(self) -> tuple[str, ...]:
        return probe_paths(self.outside)


@dataclass(frozen=True)
class Spec:
    head: Node
    checks: tuple[Check, ...]
    base: Mapping[str, str | bytes] = field(default_factory=dict)
    corrupt: bool = False


def ok(tool: str, **arguments: Any) -> Check:
    return Check(tool, arguments, "ok")


def refused(code: str, tool: str, **arguments: Any) -> Check:
    return Check(tool, arguments, code)


def _read(path: str) -> dict[str, Any]:
    return {"path": path}


# --- The worlds ---------------------------------------------------------------------------


def _common(outside: Path) -> dict[str, Node]:
    """Entries every world shares: source files and links the on-disk base also holds."""
    return {
        "README.md": Blob(f"# Hostile\n{NEEDLE} in the readme\n".encode()),
        "src/app.py": Blob(APP_PY.encode()),
        "src/lib/util.py": Blob(f"def helper() -> int:\n    return 42  # {NEEDLE}\n".encode()),
        "escape_rel": Link(
            os.path.relpath(outside, outside.parent.parent / "repos" / "x").encode()
        ),
        "escape_abs": Link(str(outside).encode()),
        "into_git": Link(b".git/planted.txt"),
    }


def world_symlinks(outside: Path, scale: Scale) -> Spec:
    links: dict[str, bytes] = {
        "links/to_app": b"../src/app.py",
        "links/to_src": b"../src",
        "links/chain": b"to_app",
        "links/parent": b"..",
        "links/dir_loop": b".",
        "links/dir_loop_up": b"../links",
        "links/to_src_parent": b"../src/..",
        "links/abs_passwd": b"/etc/passwd",
        "links/abs_outside": str(outside).encode(),
        "links/abs_environ": b"/proc/self/environ",
        "links/abs_dev_zero": b"/dev/zero",
        "links/abs_root": b"/",
        "links/grandparent": b"../..",
        "links/up_out": b"../../outside/secret.txt",
        "links/deep_up": b"../src/../../outside/secret.txt",
        "links/into_git": b"../.git/config",
        "links/into_git_dir": b"../.git",
        "links/into_git_upper": b"../.GIT/config",
        "links/into_git_dot": b"./../.git/./HEAD",
        "links/into_git_zw": "../.g\u200cit/config".encode(),
        "links/into_git_space": b"../.git /config",
        "links/dangling": b"../missing.txt",
        "links/loop_a": b"loop_b",
        "links/loop_b": b"loop_a",
        "links/self": b"self",
        "links/drive": b"C:/Windows/win.ini",
        "links/drive_rel": b"c:..\\x",
        "links/unc": b"//server/share/x",
        "links/backslash": b"..\\src\\app.py",
        "links/empty": b"",
        "links/newline": b"../src\n/app.py",
        "links/nul_free_control": b"../src/\x1b[31mapp.py",
        "links/non_utf8": b"../\xff\xfe",
        "links/long": b"a/" * (MAX_PATH_BYTES // 2 + 1),
        "links/huge": b"huge/" + b"ab/" * 400_000,
        "links/through_file": b"../README.md/x",
        "links/tilde": b"~/.ssh/id_rsa",
        "links/env": b"$HOME/.netrc",
        "links/file_url": b"file:///etc/passwd",
    }
    entries: dict[str, Node] = {**_common(outside)}
    entries.update({path: Link(target) for path, target in links.items()})
    for length, folder in ((scale.chain, "ok"), (scale.chain + 1, "over")):
        for hop in range(length):
            last = hop == length - 1
            target = b"../../src/app.py" if last else b"l%03d" % (hop + 1)
            entries[f"chain/{folder}/l{hop:03d}"] = Link(target)
    checks = [
        ok("read_repository_file", path="links/to_app"),
        ok("read_repository_file", path="links/chain"),
        ok("read_repository_file", path="links/to_src/app.py"),
        ok("read_repository_file", path="links/dir_loop/dir_loop/dir_loop/to_app"),
        ok("read_repository_file", path="links/parent/src/app.py"),
        ok("list_repository_files", path="links/to_src"),
        ok("list_repository_files", path="links/parent"),
        ok("list_repository_files", path="links/dir_loop_up"),
        ok("search_repository", query=NEEDLE, path="links/to_src"),
        ok("read_repository_file", path="chain/ok/l000"),
        refused("invalid_path", "read_repository_file", path="chain/over/l000"),
        refused("not_a_file", "read_repository_file", path="links/to_src"),
        refused("not_a_directory", "list_repository_files", path="links/to_app"),
        refused("path_not_found", "read_repository_file", path="links/dangling"),
        refused("path_not_found", "read_repository_file", path="links/through_file"),
        refused("path_not_found", "read_repository_file", path="links/tilde"),
        refused("path_not_found", "read_repository_file", path="links/file_url"),
        refused("invalid_path", "read_repository_file", path="links/loop_a"),
        refused("invalid_path", "read_repository_file", path="links/self"),
        refused("invalid_path", "read_repository_file", path="links/backslash"),
        refused("invalid_path", "read_repository_file", path="links/newline"),
        refused("invalid_path", "read_repository_file", path="links/non_utf8"),
        refused("invalid_path", "read_repository_file", path="links/long"),
        refused("invalid_path", "read_repository_file", path="links/huge"),
        refused("invalid_path", "list_repository_files", path="links/huge"),
    ]
    outside_links = [
        "escape_rel",
        "escape_abs",
        "into_git",
        "links/abs_passwd",
        "links/abs_outside",
        "links/abs_environ",
        "links/abs_dev_zero",
        "links/abs_root",
        "links/grandparent",
        "links/up_out",
        "links/deep_up",
        "links/into_git",
        "links/into_git_dir",
        "links/into_git_upper",
        "links/into_git_dot",
        "links/into_git_zw",
        "links/into_git_space",
        "links/drive",
        "links/unc",
        "links/empty",
        "links/parent/links/abs_passwd",
        "links/to_src_parent/links/up_out",
    ]
    for path in outside_links:
        checks.append(refused("outside_repository", "read_repository_file", path=path))
        checks.append(refused("outside_repository", "search_repository", query=NEEDLE, path=path))
    for path in ("links/grandparent", "links/into_git_dir", "links/abs_root"):
        checks.append(refused("outside_repository", "list_repository_files", path=path))
    return Spec(nest(entries), tuple(checks))


REFUSED_LOOKALIKES = (
    ".git",
    ".GIT",
    ".Git",
    ".gIT",
    ".git.",
    ".git ",
    ".git. .",
    ".g\u200cit",
    "\ufeff.git",
    ".git\u200b",
    ".\u200dgit",
)
# Names that only some file system on some platform confuses with .git. Read from git's
# objects they are ordinary names: their content may be shown, and it is not a sentinel.
NAMED_LOOKALIKES = ("git~1", "GIT~1", ".git::$INDEX_ALLOCATION", ".git:$DATA", "\uff0egit", "_git")


def world_names(outside: Path, scale: Scale) -> Spec:
    marker = Blob(f"{LOOKALIKE_SENTINEL}\n".encode())
    benign = Blob(f"an ordinary name {NEEDLE}\n".encode())
    dot_git: Tree = {
        b"config": marker,
        b"HEAD": marker,
        b"hooks": {b"post-checkout": Blob(marker.data, EXECUTABLE)},
    }
    root_entries: list[tuple[bytes, Node]] = [
        (b"..", Blob(f"a file named .. {NEEDLE}\n".encode())),
        (b".", Blob(f"a file named . {NEEDLE}\n".encode())),
        (b"a/b", Blob(f"one entry with a slash {NEEDLE}\n".encode())),
        (b"a", {b"b": Blob(f"a real a/b {NEEDLE}\n".encode())}),
        (b"dotdot_dir", Raw(((b"..", {b"escape.txt": benign}), (b"x", benign)))),
        (b"dup.txt", Blob(f"first duplicate {NEEDLE}\n".encode())),
        (b"dup.txt", Blob(f"second duplicate {NEEDLE}\n".encode())),
        (b"zz_unsorted", benign),
        (b"aa_unsorted", benign),
    ]
    for name in REFUSED_LOOKALIKES:
        root_entries.append((name.encode(), dict(dot_git)))
        root_entries.append(((name + "_file").encode(), benign))
    for name in NAMED_LOOKALIKES:
        root_entries.append((name.encode(), {b"config": benign}))
    nested: dict[str, Node] = {
        "sub/.git/config": marker,
        "sub/.GIT/hooks/pre-commit": marker,
        "sub/deeper/.Git/HEAD": marker,
        "sub/ok.txt": benign,
    }
    odd: dict[bytes, Node] = {}
    for raw_name in (
        b"..\\..\\evil.txt",
        b"dir\\file.txt",
        b"C:evil.txt",
        b"c:\\windows\\system32\\x",
        b"\\\\server\\share",
        b"new\nline.txt",
        b"tab\there.txt",
        b"bell\x07.txt",
        b"del\x7f.txt",
        b"esc\x1b[31m.txt",
        b"cr\r.txt",
        b"\xff\xfe.txt",
        b"caf\xe9.txt",
        b"\xc0\xaf.txt",
        b"\xed\xa0\x80.txt",
        "\u202eexe.txt".encode(),
        "e\u0301.txt".encode(),
        "\u00e9.txt".encode(),
        "\u0455rc.py".encode(),
        "\u2028sep.txt".encode(),
        "zero\u200bwidth.txt".encode(),
        "\U0001f4a5.txt".encode(),
        "\uff0e\uff0e".encode(),
        "\u2024\u2024".encode(),
        b"-rf",
        b"--output=pwned",
        b"-e",
        b":(top)",
        b"*",
        b"[ab]",
        b"?",
        b"%2e%2e",
        b"n" * 255,
    ):
        odd[raw_name] = benign
    long_path = "/".join(["L" * 250] * ((MAX_PATH_BYTES // 251) + 2)) + "/far.txt"
    entries: dict[str, Node] = {**_common(outside), **nested, long_path: benign}
    tree = nest(entries)
    tree[b"odd"] = odd
    raw_root = Raw(tuple(root_entries) + tuple(tree.items()))
    checks: list[Check] = [
        ok("read_repository_file", path="a/b"),
        ok("read_repository_file", path="odd/-rf"),
        ok("read_repository_file", path="odd/--output=pwned"),
        ok("read_repository_file", path="odd/\u202eexe.txt"),
        ok("search_repository", query="-e", path=""),
        ok("search_repository", query="--output=pwned", path="odd"),
        ok("inspect_git_diff", paths=["odd/*", "odd/:(top)", "odd/?"]),
        refused("invalid_path", "read_repository_file", path=long_path),
        refused("invalid_path", "read_repository_file", path="odd/dir\\file.txt"),
        refused("invalid_path", "read_repository_file", path="odd/new\nline.txt"),
        ok("read_repository_file", path="odd/C:evil.txt"),
        refused("outside_repository", "read_repository_file", path=".."),
        refused("outside_repository", "read_repository_file", path="dotdot_dir/../escape.txt"),
    ]
    for name in REFUSED_LOOKALIKES:
        for path in (f"{name}/config", f"{name}/hooks/post-checkout", name, f"sub/{name}/config"):
            checks.append(refused("invalid_path", "read_repository_file", path=path))
        checks.append(refused("invalid_path", "list_repository_files", path=name))
        checks.append(refused("invalid_path", "search_repository", query=NEEDLE, path=name))
        checks.append(refused("invalid_path", "inspect_git_diff", paths=[f"{name}/config"]))
    return Spec(raw_root, tuple(checks))


def _escaping_line(width: int) -> str:
    unit = '"\\\x01\x1f\u2028\U0001f600<>&'
    return (unit * (width // len(unit) + 1))[:width]


def world_content(outside: Path, scale: Scale) -> Spec:
    cap = MAX_SOURCE_FILE_BYTES
    exact = f"{NEEDLE} exact\n".encode()
    exact += b"y" * (cap - len(exact) - 1) + b"\n"
    heavy = "\n".join(_escaping_line(1000) + NEEDLE for _ in range(cap // 1400)).encode()[:cap]
    heavy = heavy.decode("utf-8", "ignore").encode()
    giant = ("\x01" * (cap // 2 - 40) + NEEDLE + '"' * (cap // 2 - 40)).encode()
    files: dict[str, Node] = {
        **_common(outside),
        "huge/exact.txt": Blob(exact),
        "huge/over.txt": Blob(exact + b"z"),
        "huge/many_mib.txt": Blob((f"{NEEDLE} big\n" * (scale.huge_bytes // 19)).encode()),
        "binary/nul_start.bin": Blob(b"\x00" + NEEDLE.encode() + b"\n"),
        "binary/nul_late.txt": Blob(f"{NEEDLE}\n".encode() * 900 + b"\x00tail\n"),
        "binary/png.png": Blob(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + NEEDLE.encode()),
        "enc/latin1.txt": Blob(f"caf\xe9 {NEEDLE}\n".encode("latin-1")),
        "enc/utf16.txt": Blob(f"{NEEDLE}\n".encode("utf-16")),
        "enc/overlong.txt": Blob(b"\xc0\xaf " + NEEDLE.encode() + b"\n"),
        "enc/surrogate.txt": Blob(b"\xed\xa0\x80 " + NEEDLE.encode() + b"\n"),
        "enc/mixed.txt": Blob(f"good {NEEDLE}\n".encode() + b"bad \xff " + NEEDLE.encode() + b"\n"),
        "enc/bom.txt": Blob(f"\ufeff{NEEDLE}\n".encode()),
        "lines/giant_escaping.txt": Blob(giant),
        "lines/giant_ascii.txt": Blob(NEEDLE.encode() + b"x" * (cap - 100)),
        "lines/escaping_heavy.txt": Blob(heavy),
        "lines/many.txt": Blob(b"".join(b"%d %s\n" % (n, NEEDLE.encode()) for n in range(40_000))),
        "lines/only_newlines.txt": Blob(b"\n" * cap),
        "lines/cr_only.txt": Blob(f"a\r{NEEDLE}\rb\r".encode() * 1000),
        "lines/crlf.txt": Blob(f"one\r\ntwo {NEEDLE}\r\nthree\r\n".encode()),
        "lines/no_newline.txt": Blob(f"first\nlast {NEEDLE}".encode()),
        "lines/empty.txt": Blob(b""),
        "lines/nul_only.bin": Blob(b"\x00" * 4096),
        "lines/u2028.txt": Blob(f"a\u2028b\u2029c {NEEDLE}\n".encode() * 500),
        "lines/nonbmp.txt": Blob(("\U0001f600\U0001d11e" * 2000 + f" {NEEDLE}\n").encode() * 20),
        "lines/long_match.txt": Blob(("q" * 5000 + NEEDLE + "q" * 5000 + "\n").encode() * 20),
    }
    checks = [
        ok("read_repository_file", path="huge/exact.txt"),
        ok("read_repository_file", path="lines/giant_escaping.txt"),
        ok("read_repository_file", path="lines/giant_ascii.txt"),
        ok("read_repository_file", path="lines/escaping_heavy.txt"),
        ok("read_repository_file", path="lines/only_newlines.txt", start_line=cap - 10),
        ok("read_repository_file", path="lines/empty.txt"),
        ok("read_repository_file", path="enc/bom.txt"),
        ok("search_repository", query=NEEDLE, path="lines"),
        ok("search_repository", query='""""', path="lines/giant_escaping.txt"),
        refused("file_too_large", "read_repository_file", path="huge/over.txt"),
        refused("file_too_large", "read_repository_file", path="huge/many_mib.txt"),
        refused("file_too_large", "search_repository", query=NEEDLE, path="huge/over.txt"),
        refused("binary_file", "read_repository_file", path="binary/nul_start.bin"),
        refused("binary_file", "read_repository_file", path="binary/nul_late.txt"),
        refused("binary_file", "read_repository_file", path="binary/png.png"),
        refused("binary_file", "read_repository_file", path="enc/latin1.txt"),
        refused("binary_file", "read_repository_file", path="enc/utf16.txt"),
        refused("binary_file", "read_repository_file", path="enc/overlong.txt"),
        refused("binary_file", "read_repository_file", path="enc/surrogate.txt"),
        refused("binary_file", "read_repository_file", path="enc/mixed.txt"),
        refused("binary_file", "read_repository_file", path="lines/nul_only.bin"),
        refused("invalid_range", "read_repository_file", path="lines/empty.txt", start_line=2),
        refused("invalid_range", "read_repository_file", path="lines/many.txt", start_line=10**9),
        refused(
            "invalid_range", "read_repository_file", path="lines/many.txt", start_line=5, end_line=4
        ),
    ]
    return Spec(nest(files), tuple(checks))


def world_deep(outside: Path, scale: Scale) -> Spec:
    depth = scale.depth
    folder = "/".join(["d"] * depth)
    files: dict[str, Node] = {
        **_common(outside),
        f"{folder}/bottom.txt": Blob(f"the bottom {NEEDLE}\n".encode()),
        f"{folder}/up_ok": Link(b"../" * depth + b"README.md"),
        f"{folder}/up_out": Link(b"../" * (depth + 1) + b"outside/secret.txt"),
        f"{folder}/up_git": Link(b"../" * depth + b".git/config"),
    }
    wide = "/".join(["w" * 200] * (MAX_PATH_BYTES // 201 - 1))
    files[f"{wide}/edge.txt"] = Blob(f"near the path limit {NEEDLE}\n".encode())
    return Spec(
        nest(files),
        (
            ok("read_repository_file", path=f"{folder}/bottom.txt"),
            ok("read_repository_file", path=f"{folder}/up_ok"),
            ok("list_repository_files", path=folder),
            ok("search_repository", query=NEEDLE, path="d"),
            ok("read_repository_file", path=f"{wide}/edge.txt"),
            refused("outside_repository", "read_repository_file", path=f"{folder}/up_out"),
            refused("outside_repository", "read_repository_file", path=f"{folder}/up_git"),
            refused("invalid_path", "read_repository_file", path="d/" * (MAX_PATH_BYTES // 2 + 1)),
        ),
    )


# Neighbours of "/" in byte order: a listing must sort "a-b" < "a.b" < "a/b" < "a0".
ORDER_NAMES = (
    "many/a",
    "many/a-b",
    "many/a.b",
    "many/a/b",
    "many/a/c/d",
    "many/a0",
    "many/A",
    "many/_",
)


def many_path(index: int) -> str:
    return f"many/f{index:05d}.txt"


def world_many(outside: Path, scale: Scale) -> Spec:
    files: dict[str, Node] = {**_common(outside)}
    shared = Blob(f"{NEEDLE}\n".encode())
    for index in range(scale.many_files):
        files[many_path(index)] = shared
    for index in range(scale.many_files // 10):
        files[f"spread/{index % 37:02d}/{index:05d}.py"] = shared
    for name in ORDER_NAMES:
        files[name if name != "many/a" else "many/a_file"] = shared
    return Spec(
        nest(files),
        (
            ok("list_repository_files", path="many", limit=200),
            ok("search_repository", query=NEEDLE, path="", limit=100),
            refused("invalid_cursor", "list_repository_files", path="many", cursor="../x"),
            refused("invalid_cursor", "list_repository_files", path="many", cursor="spread/00"),
            refused("invalid_cursor", "list_repository_files", path="", cursor=".git/config"),
        ),
    )


def world_modes(outside: Path, scale: Scale) -> Spec:
    gitmodules = (
        '[submodule "evil"]\n\tpath = vendor/lib\n\turl = ext::sh -c touch% /tmp/pwned\n'
        '\tupdate = !touch /tmp/pwned\n[submodule "opt"]\n\tpath = vendor/opt\n'
        "\turl = --upload-pack=touch /tmp/pwned\n"
    )
    files: dict[str, Node] = {
        **_common(outside),
        ".gitmodules": Blob(gitmodules.encode()),
        ".gitattributes": Blob(b"* filter=evil diff=evil merge=evil text eol=crlf\n"),
        ".lfsconfig": Blob(b'[lfs]\n\turl = "file:///etc"\n'),
        "vendor/lib": Gitlink("1" * 40),
        "vendor/opt": Gitlink("2" * 40),
        "bin/run.sh": Blob(f"#!/bin/sh\necho {NEEDLE}\n".encode(), EXECUTABLE),
        "old/mode.txt": Blob(f"group writable {NEEDLE}\n".encode(), b"100664"),
        "links/to_gitlink": Link(b"../vendor/lib"),
        "links/into_gitlink": Link(b"../vendor/lib/x"),
    }
    return Spec(
        nest(files),
        (
            ok("read_repository_file", path="bin/run.sh"),
            ok("read_repository_file", path="old/mode.txt"),
            ok("read_repository_file", path=".gitmodules"),
            refused("not_a_file", "read_repository_file", path="vendor/lib"),
            refused("not_a_directory", "list_repository_files", path="vendor/lib"),
            refused("path_not_found", "read_repository_file", path="vendor/lib/x"),
            refused("not_a_file", "read_repository_file", path="links/to_gitlink"),
            refused("path_not_found", "read_repository_file", path="links/into_gitlink"),
            refused("not_a_file", "search_repository", query=NEEDLE, path="vendor/lib"),
        ),
    )


def world_diff(outside: Path, scale: Scale) -> Spec:
    big = "".join(f"{n} {NEEDLE} {_escaping_line(60)}\n" for n in range(4000)).encode()
    files: dict[str, Node] = {
        **_common(outside),
        "big.txt": Blob(big),
        "bin.dat": Blob(b"\x00\x01\x02" * 1000),
        "latin1.txt": Blob(b"caf\xe9\n" * 50),
        "--output=pwned": Blob(b"option-like name\n"),
        "-R": Blob(b"option-like name\n"),
        "renamed.txt": Blob(b"moved content\n" * 20),
        "mode.sh": Blob(b"#!/bin/sh\n", EXECUTABLE),
        "link": Link(b"src/app.py"),
    }
    base: dict[str, str | bytes] = {
        "README.md": "# Hostile\n",
        "bin.dat": b"\x00\x03" * 10,
        "latin1.txt": b"old\n",
        "original.txt": "moved content\n" * 20,
        "mode.sh": "#!/bin/sh\n",
        "link": "not yet a link\n",
    }
    return Spec(
        nest(files),
        (
            ok("inspect_git_diff"),
            ok("inspect_git_diff", max_bytes=131072),
            ok("inspect_git_diff", max_bytes=1),
            ok("inspect_git_diff", paths=["--output=pwned", "-R"]),
            ok("inspect_git_diff", paths=["bin.dat", "latin1.txt", "link"]),
            ok("inspect_git_diff", paths=[":(top)", "*", ":/", "-p", "--stat"]),
            refused("outside_repository", "inspect_git_diff", paths=["../x"]),
            refused("outside_repository", "inspect_git_diff", paths=["/etc/passwd"]),
            refused("invalid_path", "inspect_git_diff", paths=[".git"]),
            refused("invalid_path", "inspect_git_diff", paths=[""]),
        ),
        base=base,
    )


def world_corrupt_empty_name(outside: Path, scale: Scale) -> Spec:
    raw = Raw(((b"ok.txt", Blob(b"fine\n")), (b"", Blob(b"no name\n"))))
    return Spec(raw, (), corrupt=True)


def world_missing_objects(outside: Path, scale: Scale) -> Spec:
    """Entries whose blobs are not in the object store (`ls-tree -l` says "BAD")."""
    files: dict[str, Node] = {
        **_common(outside),
        "ok.txt": Blob(f"fine {NEEDLE}\n".encode()),
        "gone.txt": Missing(),
        "links/gone": Missing(LINK),
        "links/to_gone": Link(b"../gone.txt"),
    }
    return Spec(
        nest(files),
        (
            ok("read_repository_file", path="ok.txt"),
            ok("search_repository", query=NEEDLE, path=""),
            ok("inspect_git_diff"),
            refused("path_not_found", "read_repository_file", path="gone.txt"),
            refused("path_not_found", "read_repository_file", path="links/gone"),
            refused("path_not_found", "read_repository_file", path="links/to_gone"),
        ),
    )


WORLDS: dict[str, Callable[[Path, Scale], Spec]] = {
    "symlinks": world_symlinks,
    "names": world_names,
    "content": world_content,
    "deep": world_deep,
    "many": world_many,
    "modes": world_modes,
    "diff": world_diff,
    "missing_objects": world_missing_objects,
    "corrupt_empty_name": world_corrupt_empty_name,
}


# --- Building -----------------------------------------------------------------------------


def _plant_git_dir(git_dir: Path) -> None:
    """Sentinel text in files of the real .git that a tool could be tricked into reading."""
    (git_dir / "planted.txt").write_text(GITDIR_SENTINEL + "\n")
    (git_dir / "description").write_text(GITDIR_SENTINEL + "\n")
    with (git_dir / "config").open("a") as config:
        config.write(f"# {GITDIR_SENTINEL}\n")
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "exclude").write_text(f"# {GITDIR_SENTINEL}\n")


def _head_paths(git_dir: Path, head: str) -> tuple[str, ...]:
    listing = run_git(git_dir, ["ls-tree", "-r", "-t", "-z", "--name-only", "--full-tree", head])
    names = {raw.decode("utf-8", "surrogateescape") for raw in listing.stdout.split(b"\0") if raw}
    return tuple(sorted(names))


def build_repo(root: Path, name: str, outside: Path, scale: Scale) -> HostileRepo:
    """Build one world: a base through a working tree with real outward links, a raw head."""
    spec = WORLDS[name](outside, scale)
    repo = GitRepo(root / "repos" / name)
    _plant_git_dir(repo.git_dir)
    repo.symlink("escape_rel", os.path.relpath(outside, repo.path))
    repo.symlink("escape_abs", str(outside))
    repo.symlink("into_git", ".git/planted.txt")
    base = repo.commit_files({"README.md": "# Hostile\n", **spec.base}, message="base")
    writer = ObjectWriter(repo.git_dir)
    _, tree = write_node(writer, spec.head)
    head = writer.commit(tree, [base], f"hostile {name}")
    paths = () if spec.corrupt else _head_paths(repo.git_dir, head)
    return HostileRepo(name, repo, base, head, spec.checks, spec.corrupt, paths)


def build_partial_clone(root: Path) -> GitRepo:
    """A blob-less partial clone: its blobs live only on a promisor remote git may not use."""
    source = GitRepo(root / "partial-source")
    source.commit_files({"a.txt": f"{NEEDLE}\n", "b/c.txt": "c\n"}, message="one")
    git(source.path, "config", "uploadpack.allowFilter", "true")
    target = root / "partial-clone"
    git(
        root,
        "clone",
        "-q",
        "--no-checkout",
        "--filter=blob:none",
        source.path.as_uri(),
        str(target),
    )
    clone = GitRepo.__new__(GitRepo)
    clone.path, clone.git_dir = target, target / ".git"
    return clone


def build_corpus(root: Path, scale: Scale = DEFAULT_SCALE) -> Corpus:
    """Every world under `root`; the outside sentinel file lives in `root/outside`."""
    outside = root / "outside" / "secret.txt"
    outside.parent.mkdir(parents=True)
    outside.write_text(OUTSIDE_SENTINEL + "\n")
    corpus = Corpus(root, outside)
    for name in WORLDS:
        corpus.repos.append(build_repo(root, name, outside, scale))
    return corpus


def probe_paths(outside: Path) -> tuple[str, ...]:
    """Request paths that try every escape, whatever the repository holds."""
    absolute = str(outside)
    return (
        "",
        ".",
        "./",
        "/",
        "//",
        "/etc/passwd",
        "/proc/self/environ",
        absolute,
        absolute.lstrip("/"),
        "..",
        "../",
        "../outside/secret.txt",
        "../../outside/secret.txt",
        "src/../../outside/secret.txt",
        "src/../README.md",
        "a/../../x",
        "..\\..\\outside\\secret.txt",
        "src\\app.py",
        "C:\\Windows\\win.ini",
        "C:/Windows/win.ini",
        "c:",
        "\\\\server\\share\\x",
        "//server/share/x",
        "\x00",
        "src/app.py\x00.txt",
        "src\x00",
        "src/\n",
        "\t",
        "\x7f",
        ".git",
        ".git/",
        ".git/config",
        ".git/HEAD",
        ".git/planted.txt",
        "./.git/config",
        "src/../.git/config",
        ".GIT/config",
        ".Git",
        ".git./config",
        ".git /config",
        ".g\u200cit/config",
        "\ufeff.git",
        "git~1/config",
        "GIT~1",
        ".git::$INDEX_ALLOCATION/config",
        "\uff0e\uff0e/x",
        "\u2024\u2024/x",
        "%2e%2e/x",
        "..%2f..%2fx",
        "~",
        "~/.ssh/id_rsa",
        "$HOME",
        "file:///etc/passwd",
        "\udc80",
        "src/\udcff.py",
        "\u202egpj.exe",
        "x" * (MAX_PATH_BYTES + 1),
        "a/" * (MAX_PATH_BYTES // 2 + 1),
        "/" * 10,
        "src//app.py",
        "./src/./app.py",
        "src/app.py/",
        "src/app.py/..",
        "src/app.py/x",
        "-",
        "--",
        "--output=/tmp/pwned",
        "-p",
        ":(top)",
        ":/",
        "*",
        "**",
        "[a]",
        "?",
        "src/*.py",
        "escape_rel",
        "escape_abs",
        "into_git",
    )
