"""The review's workspace: a target (a pull request, or two local revisions) pinned to commits.

`prepare()` turns a target into a `Prepared` review: a `PinnedRepository` at the head commit, the
pull request's identity, and the context the first user message is built from. A pull request
(or a GitLab merge request) is fetched into the cache by its forge (forge/base.py); a local
repository is read in place, its working tree never touched. `with_repo_config` adds what the
base commit's `.pr-review.toml` says.
"""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from pr_review_api.errors import InvalidRepository, ReviewError
from pr_review_api.forge.base import ChangeForge, ChangeMetadata
from pr_review_api.forge.checkout import cache_trimmer, unavailable_error
from pr_review_api.git.limits import Work
from pr_review_api.git.repository import PinnedRepository, resolve_commit
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git_runner import GIT_FAILURES, run_git
from pr_review_api.loop.custom_checks import applicable
from pr_review_api.loop.guidance import BASE_FILES, repository_guidance
from pr_review_api.loop.linked_issues import NO_LINKED_ISSUES, LinkedIssues
from pr_review_api.loop.prompts import ReviewContext
from pr_review_api.loop.repo_config import (
    NO_REPO_CONFIG,
    REPO_CONFIG_PATH,
    LoadedRepoConfig,
    config_from,
    read_base_files,
)
from pr_review_api.loop.understanding import Understanding
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings
from pr_review_api.tools import map_git_errors

MAX_SHOWN_REVISION_CHARS = 80


@dataclass(frozen=True)
class ChangeTarget:
    """Review a change (a pull request, a merge request) given by its URL on its forge."""

    url: str


@dataclass(frozen=True)
class LocalTarget:
    """Review two revisions of a local repository. `linked` (the evaluation's cases) are
    issues the caller already holds, given to the model as a forge's would be
    (specification §21)."""

    repo: Path
    base: str
    head: str
    linked: LinkedIssues = NO_LINKED_ISSUES


ReviewTarget = ChangeTarget | LocalTarget


@dataclass(frozen=True)
class Prepared:
    repository: PinnedRepository
    pull_request: PullRequestInfo | None
    context: ReviewContext
    repo_config: LoadedRepoConfig = NO_REPO_CONFIG
    # What the host said of the pull request (author, labels, base branch): the skip rules.
    metadata: ChangeMetadata | None = None

    @property
    def unreadable(self) -> type[ReviewError]:
        """The error a git failure while reading the pinned repository becomes.

        A local repository is the user's input (invalid_repository, CLI exit 2); a pull
        request's was fetched from GitHub into the cache (github_unavailable, 502), a merge
        request's from GitLab (gitlab_unavailable, 502). See `tools.map_git_errors`, the one
        mapping both the tools and the final checks use.
        """
        if self.pull_request is None:
            return InvalidRepository
        return unavailable_error(self.pull_request.forge)


def repository_store(settings: Settings) -> RepositoryStore:
    """The repository store a process reviews through (the CLI per run, the service and each
    jobs worker for their life): its search-index builds trim the cache they grow first."""
    return RepositoryStore(settings, before_build=cache_trimmer(settings))


@asynccontextmanager
async def prepare(
    target: ReviewTarget,
    forge: ChangeForge | None,
    store: RepositoryStore,
    work: Work,
) -> AsyncIterator[Prepared]:
    """Pin the target's commits for one review: fetched into the cache by the change's `forge`
    (forge/select.py), or read locally (`forge` None)."""
    if isinstance(target, LocalTarget):
        yield await store.run(prepare_local, target, store, work)
        return
    assert forge is not None
    async with forge.open_change(target.url) as pull:
        # Pinning reads the cache: the one git edge; a failure is the forge's.
        with map_git_errors(forge.unavailable):
            metadata = pull.metadata
            repository = await store.run(
                PinnedRepository.open,
                pull.git_dir,
                metadata.base_sha,
                metadata.head_sha,
                store=store,
                work=work,
            )
            context = await store.run(
                context_for, repository, pull.info.url, pull.metadata.title, pull.metadata.body
            )
        yield Prepared(repository, pull.info, context, metadata=pull.metadata)


def prepare_local(
    target: LocalTarget, store: RepositoryStore | None = None, work: Work | None = None
) -> Prepared:
    git_dir = _local_git_dir(target.repo)
    base = _commit(git_dir, "--base", target.base, store)
    head = _commit(git_dir, "--head", target.head, store)
    try:
        repository = PinnedRepository.open(git_dir, base, head, store=store, work=work)
        # The local path is never shown to the model: it may name the user's machine.
        context = context_for(repository, "a local repository", None, None)
        if target.linked.issues:
            context = replace(context, understanding=Understanding(linked=target.linked))
    except GIT_FAILURES:  # GitError, OSError, a timeout: as in tools.map_git_errors
        # A corrupt tree (an empty entry name) or a partial clone whose blobs git may not
        # fetch makes ls-tree fail; that GitError escaped run_review, which must raise only
        # contract errors.
        raise InvalidRepository("The repository's commits could not be read.") from None
    return Prepared(repository, None, context)


def _commit(git_dir: Path, option: str, revision: str, store: RepositoryStore | None) -> str:
    try:
        # With the store, a full SHA is told by its long-lived reader: no process started.
        sha = resolve_commit(git_dir, revision, store)
    except GIT_FAILURES:  # resolve_commit answers None for a failed git; not for these
        raise InvalidRepository("The repository's commits could not be read.") from None
    if sha is None:
        # The user's own input, on their own terminal: shown bounded, with no control characters.
        raise InvalidRepository(
            f'The {option} revision "{_shown(revision)}" does not name a commit in the repository.'
        )
    return sha


def _shown(text: str) -> str:
    clean = "".join("?" if unicodedata.category(char)[0] == "C" else char for char in text)
    if len(clean) > MAX_SHOWN_REVISION_CHARS:
        return clean[:MAX_SHOWN_REVISION_CHARS] + "..."
    return clean


def _local_git_dir(repo: Path) -> Path:
    if not repo.is_dir():
        raise InvalidRepository("The repository path is not a directory.")
    try:
        found = run_git(None, ["rev-parse", "--absolute-git-dir"], cwd=repo, timeout=30)
    except GIT_FAILURES:  # a timeout, or a folder git may not enter, is no repository either
        raise InvalidRepository("The path is not a git repository.") from None
    return Path(found.stdout.decode(errors="surrogateescape").strip())


def with_repo_config(prepared: Prepared) -> Prepared:
    """.pr-review.toml from the BASE commit, never the head (loop/repo_config.py)."""
    repository = prepared.repository
    git_dir, base_sha = repository.git_dir, repository.revisions.base_sha
    # The configuration and the instruction files: one listing, kept per base by the store.
    files = read_base_files(git_dir, base_sha, BASE_FILES, repository.store)
    loaded = config_from(files[REPO_CONFIG_PATH])
    changed = [path for _, path in prepared.context.changed_files]
    # Instructions, path instructions and instruction files: one block (loop/guidance.py).
    instructions = repository_guidance(loaded.config, changed, files)
    checks = applicable(loaded.config.checks, changed)  # specification §20: only those that apply
    context = replace(prepared.context, repository_instructions=instructions, checks=checks)
    return replace(prepared, context=context, repo_config=loaded)


def context_for(
    repository: PinnedRepository, identity: str, title: str | None, description: str | None
) -> ReviewContext:
    revisions = repository.revisions
    return ReviewContext(
        identity=identity,
        base_sha=revisions.base_sha,
        head_sha=revisions.head_sha,
        merge_base_sha=revisions.merge_base_sha,
        changed_files=repository.changed_files(),
        title=title,
        description=description,
    )
