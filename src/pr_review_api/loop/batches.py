"""Whole coverage of large pull requests: the changed files reviewed in batches
(docs/large-pull-requests.md).

When the changed files will not fit one loop, more than REVIEW_BATCH_MAX_FILES files or a
diff of more than REVIEW_BATCH_MAX_DIFF_BYTES, they are split into batches of related files
(`plan_batches`: a directory's files together, directories in the order of the module tree,
deterministic), and each batch is one review conversation on the review's one `Engine`: the
same tools, checks, deadline and `Tally`, with a first message that names the batch's files
and says the others are reviewed separately. The batches run concurrently (at most
MAX_CONCURRENT_BATCHES at once) and their validated reviews are merged (`merge_reviews`).

Budgets: each batch may take REVIEW_MAX_ROUNDS provider turns and REVIEW_REPAIR_ATTEMPTS
repairs of its own; the tool calls (REVIEW_MAX_TOOL_CALLS), the accumulated tool content,
the tokens (REVIEW_MAX_TOTAL_TOKENS) and the deadline are the review's, shared by every
batch. A batch that ends without a final review (out of rounds or tool calls, a bad turn,
the token budget before it could start) loses only its own findings: a fixed note names it
and the coverage, the union of what every conversation saw, lists its files as not
inspected. When no batch validates, the review ends with the first batch's error; the
deadline ends the whole review, as everywhere.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
from collections.abc import Mapping, Sequence

from pr_review_api.errors import ReviewError, ReviewTimeout
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import truncate_utf8
from pr_review_api.loop.coverage import diff_paths
from pr_review_api.loop.custom_checks import CustomCheck, merge_check_results
from pr_review_api.loop.engine import Engine
from pr_review_api.loop.review import ReviewPolicy, conversation_checks, first_messages
from pr_review_api.loop.understanding import merge_understanding
from pr_review_api.model import SEVERITIES, FinalReview, Finding
from pr_review_api.settings import MAX_FINAL_TEXT_BYTES, MAX_FINDINGS, MAX_NOTES
from pr_review_api.tools import map_git_errors

# Bounds on one review's fan-out: batches past MAX_BATCHES are not reviewed (the coverage
# and a note say so), and no more than MAX_CONCURRENT_BATCHES ask the provider at once.
MAX_BATCHES = 16
MAX_CONCURRENT_BATCHES = 4
# The diff read to size the files; files past it are batched by their count alone.
SIZE_SCAN_BYTES = 16 * 1024 * 1024
_HEADER = "diff --git "

Batch = tuple[str, ...]


def plan_batches(
    paths: Sequence[str], sizes: Mapping[str, int], *, max_files: int, max_bytes: int
) -> list[Batch]:
    """The changed files in batches of related files; one batch when they fit one loop.

    Files are grouped by directory, directories taken in module-tree order (a directory,
    then its subdirectories), files by name. A directory's files share a batch whenever they
    fit one; a batch is filled with whole directories while they fit, and a directory too
    large for one batch is cut in order. A file larger than `max_bytes` is a batch of its
    own. Every path is in exactly one batch; the same input gives the same batches.
    """
    total = sum(sizes.get(path, 0) for path in paths)
    if len(paths) <= max_files and total <= max_bytes:
        return [tuple(sorted(paths))] if paths else []
    batches: list[Batch] = []
    current: list[str] = []
    used = 0
    for group in _by_directory(paths):
        group_bytes = sum(sizes.get(path, 0) for path in group)
        whole = len(group) <= max_files and group_bytes <= max_bytes
        if whole and (len(current) + len(group) > max_files or used + group_bytes > max_bytes):
            batches.append(tuple(current))
            current, used = [], 0
        for path in group:  # a whole group fits here; a large one is cut where it is full
            size = sizes.get(path, 0)
            if current and (len(current) >= max_files or used + size > max_bytes):
                batches.append(tuple(current))
                current, used = [], 0
            current.append(path)
            used += size
    if current:
        batches.append(tuple(current))
    return batches


def _by_directory(paths: Sequence[str]) -> list[list[str]]:
    groups: dict[tuple[str, ...], list[str]] = {}
    for path in sorted(set(paths)):
        directory = posixpath.dirname(path)
        groups.setdefault(tuple(directory.split("/")) if directory else (), []).append(path)
    return [groups[key] for key in sorted(groups)]


def diff_sizes(text: str, *, truncated: bool) -> dict[str, int]:
    """Bytes of each file's section of a git diff (a rename's, under both its paths)."""
    starts = [0] if text.startswith(_HEADER) else []
    at = text.find("\n" + _HEADER)
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n" + _HEADER, at + 1)
    sizes: dict[str, int] = {}
    for number, start in enumerate(starts):
        last = number == len(starts) - 1
        section = text[start : None if last else starts[number + 1]]
        size = len(section.encode("utf-8", "surrogatepass"))
        for path in diff_paths(section, truncated=truncated and last):
            sizes[path] = sizes.get(path, 0) + size
    return sizes


def measure(repository: PinnedRepository, unreadable: type[ReviewError]) -> dict[str, int]:
    """Each changed file's diff bytes, over the first SIZE_SCAN_BYTES of the diff."""
    with map_git_errors(unreadable):
        data, truncated = repository.diff([], SIZE_SCAN_BYTES)
    return diff_sizes(data.decode("utf-8", "replace"), truncated=truncated)


def batch_words(batch: Batch, number: int, count: int) -> str:
    """What a batch's first user message adds: which files are this conversation's."""
    block = json.dumps({"batch_files": list(batch)}, indent=1, ensure_ascii=True)
    return "\n".join(
        [
            "",
            f"This change is large, so it is reviewed in {count} batches of related files, "
            f"each a separate conversation. This conversation reviews batch {number} of "
            f"{count}: the {len(batch)} changed files named in the block below (untrusted "
            "data, encoded as JSON). The other changed files are reviewed separately: inspect "
            "and report on these files, reading other code only as they need it.",
            "<untrusted_batch_files>",
            block.replace("<", "\\u003c"),  # the closing tag stays unforgeable
            "</untrusted_batch_files>",
        ]
    )


async def batched_review(engine: Engine) -> FinalReview | None:
    """The merged review of the change's batches, or None when the change fits one loop."""
    settings = engine.settings
    max_files = settings.review_batch_max_files
    paths = engine.coverage.changed_paths
    if max_files == 0 or len(paths) < 2:
        return None
    prepared = engine.prepared
    sizes = await engine.store.run(measure, prepared.repository, prepared.unreadable)
    plan = plan_batches(
        paths, sizes, max_files=max_files, max_bytes=settings.review_batch_max_diff_bytes
    )
    if len(plan) < 2:
        return None
    reviewed, left = plan[:MAX_BATCHES], plan[MAX_BATCHES:]
    gate = asyncio.Semaphore(MAX_CONCURRENT_BATCHES)
    outcomes = await asyncio.gather(
        *(
            _review_batch(engine, batch, number, len(reviewed), gate)
            for number, batch in enumerate(reviewed, start=1)
        ),
        return_exceptions=True,
    )
    checks = prepared.context.checks
    return merge_reviews(reviewed, _checked(outcomes), left=left, checks=checks)


async def _review_batch(
    engine: Engine, batch: Batch, number: int, count: int, gate: asyncio.Semaphore
) -> FinalReview:
    async with gate:
        messages = await first_messages(engine, paths=list(batch))
        messages[1]["content"] += batch_words(batch, number, count)
        max_rounds = engine.settings.review_max_rounds
        # specification §21: the batch's walkthrough is checked against its own files.
        understanding = engine.prepared.context.understanding.for_batch(batch)
        checks = conversation_checks(engine.prepared.context, list(batch))
        policy = ReviewPolicy(engine, checks, understanding)
        return await engine.converse(policy, messages, max_rounds=max_rounds)


def _checked(outcomes: list[FinalReview | BaseException]) -> list[FinalReview | ReviewError]:
    """Each batch's review or contract error; the deadline and anything else end the review."""
    checked: list[FinalReview | ReviewError] = []
    for outcome in outcomes:
        if isinstance(outcome, ReviewTimeout) or not isinstance(outcome, FinalReview | ReviewError):
            raise outcome
        checked.append(outcome)
    if not any(isinstance(outcome, FinalReview) for outcome in checked):
        raise next(o for o in checked if isinstance(o, ReviewError))
    return checked


def merge_reviews(
    batches: Sequence[Batch],
    outcomes: Sequence[FinalReview | ReviewError],
    *,
    left: Sequence[Batch] = (),
    checks: Sequence[CustomCheck] = (),
) -> FinalReview:
    """One review of the batches': findings deduplicated, most severe first, then capped;
    each custom check's results merged (loop/custom_checks.py)."""
    reviews = [outcome for outcome in outcomes if isinstance(outcome, FinalReview)]
    findings = _unique([finding for review in reviews for finding in review.findings])
    findings.sort(key=lambda finding: SEVERITIES.index(finding.severity))  # stable
    fixed = _fixed_notes(batches, outcomes, left)
    if len(findings) > MAX_FINDINGS:
        fixed.append(
            f"{len(findings) - MAX_FINDINGS} findings past the first {MAX_FINDINGS} were left out."
        )
    model_notes = list(dict.fromkeys(note for review in reviews for note in review.notes))
    summary = " ".join(
        f"Batch {number}: {outcome.summary}"
        for number, outcome in enumerate(outcomes, start=1)
        if isinstance(outcome, FinalReview)
    )
    merged = FinalReview(
        summary=truncate_utf8(summary, MAX_FINAL_TEXT_BYTES),
        findings=findings[:MAX_FINDINGS],
        notes=[*fixed, *model_notes][:MAX_NOTES],
    )
    understood = merge_understanding(reviews)  # specification §21: {} when nothing was asked
    if understood:
        merged = merged.model_copy(update=understood)
    if not checks:
        return merged
    results, check_notes = merge_check_results(checks, [r.check_results() for r in reviews])
    notes = [*fixed, *check_notes, *model_notes][:MAX_NOTES]
    return merged.model_copy(update={"checks": results, "notes": notes})


def _fixed_notes(
    batches: Sequence[Batch], outcomes: Sequence[FinalReview | ReviewError], left: Sequence[Batch]
) -> list[str]:
    """Our own sentences: how the change was split and what no batch validated (no model text)."""
    count = len(batches)
    notes = [
        f"This change was reviewed in {count} batches of related files, each its own "
        "conversation; the coverage is their union."
    ]
    for number, (batch, outcome) in enumerate(zip(batches, outcomes, strict=True), start=1):
        if isinstance(outcome, ReviewError):
            notes.append(
                f"Batch {number} of {count} ({len(batch)} files) ended without a final review "
                f"({outcome.code}); the coverage lists what was not inspected."
            )
    if left:
        files = sum(len(batch) for batch in left)
        notes.append(
            f"{files} changed files past the first {MAX_BATCHES} batches were not reviewed."
        )
    return notes


def _unique(findings: list[Finding]) -> list[Finding]:
    """The first of each (fingerprint, line): one batch may report another's file too."""
    seen: dict[tuple[str, int | None], Finding] = {}
    for finding in findings:
        seen.setdefault((finding.fingerprint(), finding.line), finding)
    return list(seen.values())
