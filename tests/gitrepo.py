"""Build real git repositories in temporary folders, hostile ones included.

`GitRepo.commit_files` writes through the working tree, as a developer would. `commit_tree`
builds commits from raw tree entries with git's plumbing, so tests can plant what no working
tree can hold: names with backslashes or `.GIT`, symbolic links into `.git`, gitlinks.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

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
        git(path, "init", "-q", "-b", "main", *(["--bare"] if bare else []))
        self.git_dir = path if bare else path / ".git"

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
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        return self.head()

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
                oid = git(self.git_dir, "hash-object", "-w", "--stdin", input_bytes=content)
                kind = "blob"
            lines.append(
                f"{mode} {kind} {oid}\t".encode() + path.encode("utf-8", "surrogateescape")
            )
        for name, sub in children.items():
            lines.append(f"040000 tree {self._mktree(sub)}\t".encode() + name.encode())
        return git(self.git_dir, "mktree", "-z", input_bytes=b"\0".join(lines) + b"\0")
