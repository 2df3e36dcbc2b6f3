"""The walkthrough (specification §21): every changed file in exactly one entry, checked against the
change's own file list, never the model's word.

The files a walkthrough must describe come from git (`walkthrough_files`): a rename by its new
path, a deletion by its old one, every other change by its path. A batched review
(loop/batches.py) checks each batch's walkthrough against the batch's own files and merges the
entries (`merge_walkthroughs`). A walkthrough that leaves a file out, names one twice, or names a
path that did not change is a final-review check failure: the words that say so are fixed (the
model's text is never repeated; the paths we name are git's, already in the first message).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path

from pr_review_api.git.hunks import DIFF_CONFIG
from pr_review_api.git_runner import run_git
from pr_review_api.model import MAX_WALKTHROUGH_SUMMARY_CHARS, WalkthroughEntry

# Paths a repair turn names, at most: the model has the whole list in its first message.
MAX_NAMED_PATHS = 10
_GIT_TIMEOUT_SECONDS = 60

WALKTHROUGH_SCHEMA = {
    "description": (
        "Every changed file (a renamed file by its new path, a deleted file by its old path) "
        "in exactly one entry, and no other path. Group files whose changes belong together; "
        f"summary says in at most {MAX_WALKTHROUGH_SUMMARY_CHARS} characters what the change "
        "to them does."
    ),
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "paths": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "summary": {"type": "string", "maxLength": MAX_WALKTHROUGH_SUMMARY_CHARS},
        },
        "required": ["paths", "summary"],
        "additionalProperties": False,
    },
}

WALKTHROUGH_RULES = """\
- The final review must carry "walkthrough": a table of the change for a reader who has not \
seen it. Every changed file (a renamed file by its new path, a deleted file by its old path) \
appears in exactly one entry, and no other path does; group the files whose changes belong \
together, and say in one or two plain sentences (at most 300 characters) what their change does.
"""


def walkthrough_files(git_dir: Path, merge_base: str, head: str) -> tuple[str, ...]:
    """The paths a walkthrough must name: git's changed files with renames found (a rename by
    its new path, a deletion by its old one), sorted."""
    output = run_git(
        git_dir,
        ["diff", "--name-status", "-z", "-M", "--no-ext-diff", merge_base, head],
        config=DIFF_CONFIG,
        timeout=_GIT_TIMEOUT_SECONDS,
    ).stdout
    fields = output.split(b"\0")
    paths: set[str] = set()
    at = 0
    while at < len(fields) and fields[at]:
        status = fields[at].decode(errors="replace")
        # A rename or copy has two paths (old, new); the new one is the file at the head.
        width = 2 if status[:1] in ("R", "C") else 1
        names = fields[at + 1 : at + 1 + width]
        if len(names) < width:
            break
        paths.add(names[-1].decode(errors="replace"))
        at += 1 + width
    return tuple(sorted(paths))


def batch_files(expected: Sequence[str], batch: Collection[str]) -> tuple[str, ...]:
    """The walkthrough paths a batch answers for: those among its files (a rename by its new
    path, so a batch holding only the old one answers for nothing of it)."""
    return tuple(path for path in expected if path in batch)


def walkthrough_problem(
    entries: Sequence[WalkthroughEntry], expected: Sequence[str]
) -> tuple[str, str] | None:
    """(the contract's sentence, the repair turn's words) when the walkthrough does not name
    every expected file exactly once and nothing else; None when it does."""
    wanted = set(expected)
    seen: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        for path in entry.paths:
            if path not in wanted:
                return (
                    f"Walkthrough entry {index} names a path that is not a changed file.",
                    f"Walkthrough entry {index} names a path that is not one of the changed "
                    "files; name each changed file by its path in the list of changed files.",
                )
            if path in seen:
                return (
                    f"Walkthrough entry {index} names a changed file that another entry names.",
                    f"Walkthrough entry {index} names a changed file that an earlier entry "
                    "already names; put each changed file in exactly one entry.",
                )
            seen.add(path)
    missing = [path for path in expected if path not in seen]
    if not missing:
        return None
    named = json.dumps(missing[:MAX_NAMED_PATHS], ensure_ascii=True)
    more = len(missing) - MAX_NAMED_PATHS
    return (
        f"The walkthrough leaves out {len(missing)} changed file(s).",
        f"Your walkthrough leaves out {len(missing)} changed file(s): {named}"
        + (f" and {more} more" if more > 0 else "")
        + "; put every changed file in exactly one entry.",
    )


def merge_walkthroughs(parts: Sequence[Sequence[WalkthroughEntry]]) -> list[WalkthroughEntry]:
    """The batches' entries in batch order (each batch was checked against its own files)."""
    return [entry for part in parts for entry in part]


def coverage_share(entries: Sequence[WalkthroughEntry], changed: Collection[str]) -> float:
    """The share of `changed` files some entry names (the evaluation's walkthrough coverage);
    1.0 when nothing changed."""
    if not changed:
        return 1.0
    named = {path for entry in entries for path in entry.paths}
    return sum(1 for path in changed if path in named) / len(changed)
