"""Build real git repositories in temporary folders, hostile ones included.

`GitRepo.commit_files` writes through the working tree, as a developer would. `commit_tree`
builds commits from raw tree entries with git's plumbing, so tests can plant what no working
tree can hold: names with backslashes or `.GIT`, symbolic links into `.git`, gitlinks.
`commit_onto` commits plain files over any commit in one `git fast-import`, for fixtures that
make many commits and never look at a working tree (the fake GitHub's repositories).

Thousands of tests build repositories, so a fixture spends as few git processes as it can: no
template copied at `init`, no housekeeping started after each commit, one process for all the
blobs of a tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FILE = "100644"
EXECUTABLE = "100755"
LINK = "120000"
GITLINK = "160000"

_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "HOME": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "LC_ALL": "C",
}
# Options, not the environment: tests tell pr-review's git processes from the fixtures' by the
# GIT_CONFIG_COUNT that pr-review sets (tests/github/support.py).
_NO_MAINTENANCE = ("-c", "maintenance.auto=false")
# A handful of objects stays one pack, instead of a second process that unpacks it.
_FAST_IMPORT = ("-c", "fastimport.unpackLimit=0", "fast-import", "--quiet", "--done")
# The identity and date of a commit made by `commit_onto`, as _ENV sets them for `git commit`.
_FAST_IMPORT_IDENTITY = b"Test Author <author@example.invalid> 1767225600 +0000"

Entry = tuple[str, bytes]  # (mode, content); for a gitlink the content is the commit SHA


def git(cwd: Path, *args: str, input_bytes: bytes | None = None) -> str:
    """Run git for a test fixture; fail loudly."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, input=input_bytes, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode(errors="replace").strip()


class GitRepo:
    """A repository with a working tree, for tests."""

    def __init__(self, path: Path, *, bare: bool = False) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        # No template: its sample hooks and files are copied at every `init` and used by none.
        git(path, "init", "-q", "--template=", "-b", "main", *(["--bare"] if bare else []))
        self.git_dir = path if bare else path / ".git"

    @classmethod
    def copy_of(cls, template: GitRepo, path: Path) -> GitRepo:
        """A repository of its own at `path`, a copy of `template` (objects, refs, index and
        working tree): a fixture builds its repository once a session and gives each test a
        copy, one `copytree` instead of a `git init` and three processes a commit."""
        shutil.copytree(template.path, path, symlinks=True)
        repo = cls.__new__(cls)
        repo.path = path
        repo.git_dir = path if template.git_dir == template.path else path / ".git"
        return repo

    def write(self, files: Mapping[str, str | bytes]) -> None:
        """Write files into the working tree (not committed)."""
        for rel, content in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def commit_files(
        self,
        files: Mapping[str, str | bytes],
        message: str = "change",
        delete: tuple[str, ...] = (),
    ) -> str:
        """Write, stage and commit; return the new commit's SHA."""
        self.write(files)
        for rel in delete:
            (self.path / rel).unlink()
        git(self.path, "add", "-A")
        # A fixture never needs housekeeping: each commit would start `git maintenance`.
        git(self.path, *_NO_MAINTENANCE, "commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def commit_onto(
        self, files: Mapping[str, str | bytes], parent: str | None, message: str = "change"
    ) -> str:
        """Commit regular files over `parent`'s tree (None: a root commit holding only them);
        neither the working tree, the index nor HEAD moves."""
        scratch = FastCommit("refs/fixture/commit-onto", files, parent, message)
        [sha] = import_commits(self.git_dir, [scratch])
        return sha

    def symlink(self, rel: str, target: str) -> None:
        """Create a symbolic link in the working tree."""
        link = self.path / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)

    def head(self) -> str:
        return git(self.path, "rev-parse", "HEAD")

    def branch(self, name: str, start: str) -> None:
        git(self.path, "branch", "-f", name, start)

    def checkout(self, ref: str) -> None:
        git(self.path, "checkout", "-q", ref)

    def commit_tree(
        self, entries: Mapping[str, Entry], parent: str | None = None, message: str = "raw"
    ) -> str:
        """Commit a tree built from raw entries with `git mktree`; nothing touches a worktree."""
        tree = self._mktree(entries)
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args += ["-p", parent]
        return git(self.git_dir, *args)

    def _mktree(self, entries: Mapping[str, Entry]) -> str:
        return self._mktree_of(entries, self._write_blobs(entries))

    def _write_blobs(self, entries: Mapping[str, Entry]) -> dict[bytes, str]:
        """Write every distinct blob of the tree in one `git fast-import` (not one
        `hash-object` each); the object name of each content."""
        contents = list(dict.fromkeys(c for mode, c in entries.values() if mode != GITLINK))
        if not contents:
            return {}
        stream = [b"blob\nmark :%d\n" % n + _data(c) for n, c in enumerate(contents, 1)]
        stream += [b"get-mark :%d\n" % n for n in range(1, len(contents) + 1)]
        stream.append(b"done\n")
        names = git(self.git_dir, *_FAST_IMPORT, input_bytes=b"".join(stream))
        return dict(zip(contents, names.split(), strict=True))

    def _mktree_of(self, entries: Mapping[str, Entry], blobs: Mapping[bytes, str]) -> str:
        children: dict[str, dict[str, Entry]] = {}
        lines: list[bytes] = []
        for path, (mode, content) in entries.items():
            head, sep, rest = path.partition("/")
            if sep:
                children.setdefault(head, {})[rest] = (mode, content)
                continue
            if mode == GITLINK:
                oid, kind = content.decode(), "commit"
            else:
                oid, kind = blobs[content], "blob"
            lines.append(
                f"{mode} {kind} {oid}\t".encode() + path.encode("utf-8", "surrogateescape")
            )
        for name, sub in children.items():
            lines.append(f"040000 tree {self._mktree_of(sub, blobs)}\t".encode() + name.encode())
        return git(self.git_dir, "mktree", "-z", input_bytes=b"\0".join(lines) + b"\0")


@dataclass(frozen=True)
class FastCommit:
    """A commit for `import_commits`: regular files over its parent's tree, on its ref."""

    ref: str
    files: Mapping[str, str | bytes]
    # A commit's name, the index of an earlier commit of the same import, or None (a root).
    parent: str | int | None
    message: str = "change"


def import_commits(git_dir: Path, commits: Sequence[FastCommit]) -> list[str]:
    """Make the commits in one `git fast-import` (a handful of processes fewer than a working
    tree takes for each), each ref forced to its commit; their names. The bytes are stored as
    given, as `git add` stores them without attributes."""
    stream: list[bytes] = []
    for mark, commit in enumerate(commits, 1):
        ref = commit.ref.encode()
        if commit.parent is None:  # the ref's current commit must not become the parent
            stream.append(b"reset " + ref + b"\n")
        stream += [b"commit " + ref + b"\n", b"mark :%d\n" % mark]
        stream += [b"committer " + _FAST_IMPORT_IDENTITY + b"\n", _data(commit.message)]
        if isinstance(commit.parent, int):
            stream.append(b"from :%d\n" % (commit.parent + 1))
        elif commit.parent is not None:
            stream.append(f"from {commit.parent}\n".encode())
        for rel, content in commit.files.items():
            stream += [b"M 100644 inline " + _quoted(rel) + b"\n", _data(content)]
    stream += [b"get-mark :%d\n" % mark for mark in range(1, len(commits) + 1)]
    stream.append(b"done\n")
    # --force: a ref may move to a commit that does not descend from its last, as a forced push.
    return git(git_dir, *_FAST_IMPORT, "--force", input_bytes=b"".join(stream)).split()


def started_git(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The git commands pr-review starts on this thread from now on (told from the fixtures'
    by the GIT_CONFIG_COUNT it sets), without `--git-dir`: a store's background work on
    threads of its own is not counted."""
    recorded: list[list[str]] = []
    original = subprocess.Popen
    caller = threading.current_thread()

    class Recording(original):  # type: ignore[valid-type, misc]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            ours = "GIT_CONFIG_COUNT" in (kwargs.get("env") or {})
            if ours and threading.current_thread() is caller:
                argv = [os.fsdecode(arg) for arg in args]
                recorded.append([arg for arg in argv if not arg.startswith("--git-dir=")])
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    return recorded


def _data(content: str | bytes) -> bytes:
    """A `git fast-import` data block: its exact length, then the bytes."""
    raw = content.encode() if isinstance(content, str) else content
    return b"data %d\n" % len(raw) + raw + b"\n"


def _quoted(path: str) -> bytes:
    """A path as `git fast-import` reads it quoted (C style): any name, spaces, quotes or
    newlines included."""
    out = bytearray(b'"')
    for byte in path.encode("utf-8", "surrogateescape"):
        if byte in b'"\\':
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')
