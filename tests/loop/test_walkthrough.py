"""loop/walkthrough.py: the files a walkthrough must name come from git (a rename by its new
path, a deletion by its old one), each exactly once; a batched review checks each batch against
its own files and merges their entries (specification §21)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pr_review_api.llm.testing import stop_turn
from pr_review_api.llm.turn import Turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.understanding import Understanding, merge_understanding
from pr_review_api.loop.walkthrough import (
    batch_files,
    coverage_share,
    walkthrough_files,
    walkthrough_problem,
)
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import FinalReview, LinkedIssue, WalkthroughEntry
from pr_review_api.settings import load_settings
from tests.conftest import PROVIDER_KEY
from tests.gitrepo import GitRepo

MODULE = "".join(
    f"value_{n} = compute({n})  # a line long enough to count as the same file\n" for n in range(40)
)


def entry(*paths: str) -> WalkthroughEntry:
    return WalkthroughEntry(paths=list(paths), summary="x")


def test_renames_by_new_path_deletions_by_old(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({"old/name.py": MODULE, "gone.py": "x = 1\n", "kept.py": "a\n"})
    head = repo.commit_files(
        {"new/name.py": MODULE, "kept.py": "b\n", "added.py": "c\n"},
        delete=("old/name.py", "gone.py"),
    )
    files = walkthrough_files(repo.git_dir, base, head)
    assert files == ("added.py", "gone.py", "kept.py", "new/name.py")
    assert batch_files(files, {"old/name.py", "kept.py"}) == ("kept.py",)


def test_every_file_once_and_nothing_else() -> None:
    expected = ("a.py", "b.py", "c.py")
    assert walkthrough_problem([entry("a.py", "b.py"), entry("c.py")], expected) is None
    missing = walkthrough_problem([entry("a.py")], expected)
    assert missing == (
        "The walkthrough leaves out 2 changed file(s).",
        'Your walkthrough leaves out 2 changed file(s): ["b.py", "c.py"]; put every changed '
        "file in exactly one entry.",
    )
    other = walkthrough_problem([entry("a.py", "b.py", "c.py"), entry("README")], expected)
    assert other is not None
    assert other[0] == "Walkthrough entry 2 names a path that is not a changed file."
    twice = walkthrough_problem([entry("a.py", "b.py"), entry("c.py", "a.py")], expected)
    assert twice is not None
    assert twice[0] == "Walkthrough entry 2 names a changed file that another entry names."
    assert coverage_share([entry("a.py")], expected) == 1 / 3
    assert coverage_share([], ()) == 1.0


def test_batches_merge_their_entries_and_verdicts() -> None:
    def review(entries: list[WalkthroughEntry], verdict: str) -> FinalReview:
        base = FinalReview(summary="s", findings=[], notes=[])
        linked = [LinkedIssue(ref="#1", addressed=verdict, explanation=verdict)]  # type: ignore[arg-type]
        return base.model_copy(update={"walkthrough": entries, "linked_issues": linked})

    merged = merge_understanding([review([entry("a.py")], "yes"), review([entry("b.py")], "no")])
    assert merged["walkthrough"] == [entry("a.py"), entry("b.py")]
    verdicts = merged["linked_issues"]
    assert isinstance(verdicts, list)
    [verdict] = verdicts
    assert isinstance(verdict, LinkedIssue)
    assert verdict.addressed == "partly"
    assert verdict.explanation == "Batch 1: yes Batch 2: no"
    assert merge_understanding([FinalReview(summary="s", findings=[], notes=[])]) == {}
    assert Understanding(("a.py", "b.py")).for_batch({"b.py"}).walkthrough == ("b.py",)


class BatchWalker:
    """Answers each batch's conversation with a walkthrough of the batch's own files."""

    def __init__(self) -> None:
        self.schemas: list[str] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        self.schemas.append(str(messages[0]["content"]))
        first = str(messages[1]["content"])
        block = first.split("<untrusted_batch_files>\n", 1)[1].split("\n</untrusted_batch", 1)[0]
        files = json.loads(block)["batch_files"]
        walkthrough = [{"paths": files, "summary": f"{len(files)} file(s) change."}]
        review = {"summary": "s", "findings": [], "notes": [], "walkthrough": walkthrough}
        return stop_turn(review)


def test_a_batched_review_is_checked_per_batch_and_merged(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({"a/x.py": "1\n", "b/y.py": "2\n", "c/z.py": "3\n"})
    head = repo.commit_files({"a/x.py": "10\n", "b/y.py": "20\n", "c/z.py": "30\n"})
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY, review_batch_max_files=1, review_walkthrough=True
    )
    model = BatchWalker()
    result = asyncio.run(
        run_review(LocalTarget(repo.path, base, head), settings, ReviewOptions(model=model))
    )
    assert len(model.schemas) == 3
    assert all('"walkthrough"' in schema for schema in model.schemas)
    named = sorted(path for e in result.review.walkthrough_entries() for path in e.paths)
    assert named == ["a/x.py", "b/y.py", "c/z.py"]
