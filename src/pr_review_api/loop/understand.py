"""Before the model is asked: what the review's final review must add to understand the change
(specification §21), from the repository's configuration, the settings and the change's description.

The walkthrough is on when `.pr-review.toml` at the base says `walkthrough = true`, or it says
nothing and REVIEW_WALKTHROUGH is set; its files are git's (loop/walkthrough.py). Linked issues
are read from the change's forge with the review's identity (loop/linked_issues.py).
"""

from __future__ import annotations

from dataclasses import replace

from pr_review_api.forge.base import ChangeForge
from pr_review_api.git.store import RepositoryStore
from pr_review_api.loop.linked_issues import read_linked_issues
from pr_review_api.loop.repo_config import RepoConfig
from pr_review_api.loop.understanding import Understanding
from pr_review_api.loop.walkthrough import walkthrough_files
from pr_review_api.loop.workspace import Prepared
from pr_review_api.settings import Settings
from pr_review_api.tools import map_git_errors


def walkthrough_on(config: RepoConfig, settings: Settings) -> bool:
    """The file's `walkthrough` when it says one (its false wins), else REVIEW_WALKTHROUGH."""
    return settings.review_walkthrough if config.walkthrough is None else config.walkthrough


async def with_understanding(
    prepared: Prepared, forge: ChangeForge | None, settings: Settings, store: RepositoryStore
) -> Prepared:
    """`prepared` with what its final review must add; unchanged when it adds nothing."""
    files = None
    if walkthrough_on(prepared.repo_config.config, settings):
        files = await store.run(_files, prepared)
    linked = prepared.context.understanding.linked  # a local review's, given by its caller
    if prepared.pull_request is not None:
        description = prepared.context.description or ""
        linked = await read_linked_issues(prepared.pull_request, description, forge, settings)
    understanding = Understanding(files, linked)
    if understanding == prepared.context.understanding:
        return prepared
    return replace(prepared, context=replace(prepared.context, understanding=understanding))


def _files(prepared: Prepared) -> tuple[str, ...]:
    revisions = prepared.repository.revisions
    with map_git_errors(prepared.unreadable):  # the one git error edge
        return walkthrough_files(
            prepared.repository.git_dir, revisions.merge_base_sha, revisions.head_sha
        )
