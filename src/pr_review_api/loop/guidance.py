"""Repository guidance for the model (specification §16), all of it from the BASE commit.

Three sources, joined into the one `<repository_instructions>` block of the first user message
(loop/repo_config.py's `instructions_block`), each part labelled with where it came from:

1. `instructions` of `.pr-review.toml`;
2. each `[[path_instructions]]` table whose globs match at least one changed file, once, with
   the changed paths it applies to (at most `MAX_LISTED_PATHS` of them named);
3. unless `instruction_files = false`: `AGENTS.md`, `CLAUDE.md` and
   `.github/copilot-instructions.md` at the base's root, when each is a regular file (a link,
   a folder or a submodule is skipped, nothing followed), read through git's object store, at
   most 16 KiB of each (a longer file is cut on a character boundary and says so).

A head that adds or edits one of these files changes nothing for its own review: only the base
commit is read. Globs are matched by `pr_review_api.globs`, in time linear in each path.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from pr_review_api.git_runner import GitError, git_command, git_environment, run_git
from pr_review_api.globs import compiled_globs
from pr_review_api.jsonutil import truncate_utf8
from pr_review_api.loop.repo_config import RepoConfig

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
MAX_INSTRUCTION_FILE_BYTES = 16 * 1024
MAX_LISTED_PATHS = 20
_GIT_TIMEOUT_SECONDS = 30
_REGULAR_MODES = (b"100644", b"100755")


def repository_guidance(
    git_dir: Path, base_sha: str, config: RepoConfig, changed_paths: Sequence[str]
) -> str | None:
    """The guidance text for the model, or None when the base gives none."""
    parts: list[str] = []
    if config.instructions:
        parts.append(config.instructions)  # the block says it is the maintainers' guidance
    parts += path_instruction_parts(config, changed_paths)
    if config.instruction_files:
        for name in INSTRUCTION_FILES:
            text = read_instruction_file(git_dir, base_sha, name)
            if text:
                parts.append(f"From {name} at the base commit:\n{text}")
    return "\n\n".join(parts) if parts else None


def path_instruction_parts(config: RepoConfig, changed_paths: Sequence[str]) -> list[str]:
    """One part per `[[path_instructions]]` table that matches a changed file."""
    parts = []
    for table in config.path_instructions:
        globs = compiled_globs(table.paths)
        matched = [path for path in changed_paths if globs.matches(path)]
        if not matched:
            continue
        named = ", ".join(matched[:MAX_LISTED_PATHS])
        more = len(matched) - MAX_LISTED_PATHS
        if more > 0:
            named += f" and {more} more"
        parts.append(
            f"From .pr-review.toml (path_instructions for {', '.join(table.paths)}), applying "
            f"to the changed files {named}:\n{table.instructions}"
        )
    return parts


def read_instruction_file(git_dir: Path, base_sha: str, path: str) -> str | None:
    """At most 16 KiB of a regular file at the base commit, as text; None when it is missing,
    not a regular file, unreadable or empty."""
    try:
        listing = run_git(
            git_dir,
            ["ls-tree", "-z", "--full-tree", base_sha, "--", path],
            timeout=_GIT_TIMEOUT_SECONDS,
        ).stdout
    except (GitError, OSError, subprocess.TimeoutExpired):
        return None
    meta, _, name = listing.split(b"\0", 1)[0].partition(b"\t")
    fields = meta.split()
    if name != path.encode() or len(fields) != 3 or fields[0] not in _REGULAR_MODES:
        return None
    data = _read_blob_head(git_dir, fields[2].decode("ascii", "replace"))
    if not data:
        return None
    text = data.decode("utf-8", "replace")
    if len(data) > MAX_INSTRUCTION_FILE_BYTES:
        text = truncate_utf8(text, MAX_INSTRUCTION_FILE_BYTES).rstrip("\ufffd")
        text += "\n[cut at 16 KiB]"
    return text


def _read_blob_head(git_dir: Path, oid: str) -> bytes | None:
    """The first 16 KiB and one byte of a blob (the byte tells that it was cut), never more
    in memory whatever the blob's size."""
    if not all(c in "0123456789abcdef" for c in oid) or not oid:
        return None
    try:
        with subprocess.Popen(
            git_command(git_dir, ["cat-file", "blob", oid]),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=git_environment(),
            cwd=git_dir,
        ) as process:
            data = (
                b""
                if process.stdout is None
                else process.stdout.read(MAX_INSTRUCTION_FILE_BYTES + 1)
            )
            process.kill()
    except OSError:
        return None
    return data
