"""Repository guidance for the model (specification §16), all of it from the BASE commit.

Three sources, joined into the one `<repository_instructions>` block of the first user message
(loop/repo_config.py's `instructions_block`), each part labelled with where it came from:

1. `instructions` of `.pr-review.toml`;
2. each `[[path_instructions]]` table whose globs match at least one changed file, once, with
   the changed paths it applies to (at most `MAX_LISTED_PATHS` of them named);
3. unless `instruction_files = false`: `AGENTS.md`, `CLAUDE.md` and
   `.github/copilot-instructions.md` at the base's root, when each is a regular file (a link,
   a folder or a submodule is skipped, nothing followed), read through git's object store, at
   most 16 KiB of each (a longer file is cut on a character boundary and says so), named in
   one listing with `.pr-review.toml` (repo_config.read_base_files).

A head that adds or edits one of these files changes nothing for its own review: only the base
commit is read. Globs are matched by `pr_review_api.globs`, in time linear in each path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pr_review_api.globs import compiled_globs
from pr_review_api.jsonutil import truncate_utf8
from pr_review_api.loop.repo_config import (
    CONFIG_FILE,
    BaseFile,
    RepoConfig,
    Wanted,
)

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
MAX_INSTRUCTION_FILE_BYTES = 16 * 1024
MAX_LISTED_PATHS = 20
# Everything a review reads of its base commit, in one listing (loop/workspace.py).
BASE_FILES = (
    CONFIG_FILE,
    *(Wanted(name, MAX_INSTRUCTION_FILE_BYTES, cut=True) for name in INSTRUCTION_FILES),
)


def repository_guidance(
    config: RepoConfig, changed_paths: Sequence[str], files: Mapping[str, BaseFile]
) -> str | None:
    """The guidance text for the model, or None when the base gives none; `files` are the
    base commit's `BASE_FILES` (repo_config.read_base_files)."""
    parts: list[str] = []
    if config.instructions:
        parts.append(config.instructions)  # the block says it is the maintainers' guidance
    parts += path_instruction_parts(config, changed_paths)
    if config.instruction_files:
        for name in INSTRUCTION_FILES:
            text = instruction_text(files[name])
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


def instruction_text(file: BaseFile) -> str | None:
    """An instruction file's text as the model sees it: at most 16 KiB of a regular file at
    the base commit; None when it is missing, not a regular file, unreadable or empty."""
    state, data = file
    if state != "file" or not data:
        return None
    text = data.decode("utf-8", "replace")
    if len(data) > MAX_INSTRUCTION_FILE_BYTES:
        text = truncate_utf8(text, MAX_INSTRUCTION_FILE_BYTES).rstrip("\ufffd")
        text += "\n[cut at 16 KiB]"
    return text
