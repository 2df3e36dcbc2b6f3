"""The worker's side of the review conversation (CONTRACT 15): one command job, run.

- `review`: the review of the current head, published even when that head was (`force`).
- `help`: one reply listing the commands (in the review comment's thread, or on the pull
  request).
- `dismiss`: the finding of our comment the `ignore` replied to is stored for the repository
  (jobs/dismissals.py); one `+1` reaction on the `ignore`, no text.
- `answer`: the question is answered in the thread by the answer loop (loop/answer.py) at the
  commit the finding was posted on, its text escaped as a review's. At most
  PR_REVIEW_MAX_ANSWERS_PER_HOUR answers a pull request per hour; over it, one `eyes` reaction.

A merge request's command is jobs/gitlab_commands.py's.
Every job works from the comment its delivery carried (`review_jobs.command`). Our answers
carry the question's id in a marker, and the thread is read before answering: a job run again
after its worker died never answers one question twice. Nothing an answer says changes a
finding's state. The result document is `{"kind", "outcome", ...}`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pr_review_api.forge.urls import forge_of
from pr_review_api.git.store import RepositoryStore
from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.conversation import (
    Repository,
    ReviewComment,
    answer_marker,
    comment,
    react,
    reply,
    review_comment,
    thread,
)
from pr_review_api.jobs.commands import HELP_TEXT, Comment, is_bot
from pr_review_api.jobs.dismissals import DatabaseDismissals, Dismissal, repository_key
from pr_review_api.jobs.gitlab_commands import GitLabConversation, run_gitlab_command
from pr_review_api.jobs.published_heads import Connections
from pr_review_api.jobs.records import JobRecord, answers_in_the_last_hour
from pr_review_api.jobs.runner import JobReviewer, installation_client
from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.answer import Question, answer_at
from pr_review_api.output.inert_markdown import escape
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)


class ConversationJobs:
    """Runs the command jobs of `JobQueue` (see the module docstring)."""

    def __init__(
        self,
        connections: Connections,
        app_credentials: AppCredentials | None,
        reviewer: JobReviewer,
        store: RepositoryStore | None = None,
        model: ModelClient | None = None,
    ) -> None:
        self._connections = connections
        self._app = app_credentials
        self._reviewer = reviewer
        self._store = store
        self.model = model  # tests pass a scripted model; else the provider of the settings
        self.dismissals = DatabaseDismissals(connections)

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        command = record.command or {}
        kind = record.kind
        if kind == "review":
            return await self._reviewer(
                record.pull_request_url, settings, True, record.installation_id, False, force=True
            )
        if forge_of(record.pull_request_url) == "gitlab":
            return await run_gitlab_command(record, settings, self._gitlab(settings))
        the_comment = _comment(command)
        async with self._github(settings, record.installation_id) as github:
            login = await github.login()
            if the_comment is None or is_bot(the_comment.author) or the_comment.author == login:
                return _outcome(kind, "ignored")
            job = _Job(record, the_comment, github, login)
            if kind == "help":
                return await self._help(job)
            if kind == "dismiss":
                return await self._dismiss(job)
            return await self._answer(job, settings, str(command.get("text") or ""))

    def _gitlab(self, settings: Settings) -> GitLabConversation:
        def store() -> RepositoryStore:
            return self._store or self._reviewer.store_for(settings)

        return GitLabConversation(self._connections, self.dismissals, store, self.model)

    @asynccontextmanager
    async def _github(
        self, settings: Settings, installation_id: int | None
    ) -> AsyncIterator[GitHubClient]:
        async with installation_client(settings, self._app, installation_id) as github:
            yield github

    async def _help(self, job: _Job) -> dict[str, Any]:
        top = job.comment.in_reply_to_id or job.comment.comment_id
        if job.comment.review_comment:
            await reply(job.github, job.repository, job.number, top, HELP_TEXT)
        else:
            await comment(job.github, job.repository, job.number, HELP_TEXT)
        return _outcome("help", "replied")

    async def _dismiss(self, job: _Job) -> dict[str, Any]:
        finding = await job.our_finding()
        if finding is None:
            return _outcome("dismiss", "not_our_finding")
        fingerprint = finding.finding_fingerprint()
        assert fingerprint is not None
        await self.dismissals.add(
            Dismissal(
                repository=repository_key(job.record.owner, job.record.repo),
                fingerprint=fingerprint,
                title=finding.finding_title(),
                path=finding.path,
                dismissed_by=job.comment.author,
            )
        )
        await react(job.github, job.repository, job.comment.comment_id, "+1", review_comment=True)
        return {**_outcome("dismiss", "dismissed"), "fingerprint": fingerprint}

    async def _answer(self, job: _Job, settings: Settings, text: str) -> dict[str, Any]:
        finding = await job.our_finding()
        if finding is None:
            return _outcome("answer", "not_our_finding")
        replies = await thread(job.github, job.repository, job.number, finding.id)
        if any(r.author == job.login and job.comment.comment_id in r.answers() for r in replies):
            return _outcome("answer", "answered")  # a run before this one posted it
        async with self._connections() as connection:
            answered = await answers_in_the_last_hour(connection, job.record.pr_key)
        if answered >= settings.pr_review_max_answers_per_hour:
            await react(
                job.github,
                job.repository,
                job.comment.comment_id,
                "eyes",
                review_comment=True,
            )
            return _outcome("answer", "rate_limited")
        earlier = [(r.author or "", r.body) for r in replies if r.id < job.comment.comment_id]
        question = Question(
            finding=finding.body,
            path=finding.path,
            line=finding.line or finding.original_line,
            earlier=earlier,
            asked_by=job.comment.author,
            question=text,
        )
        head = finding.commit_id or finding.original_commit_id
        store = self._store or self._reviewer.store_for(settings)
        answer = await answer_at(
            job.record.pull_request_url, head, question, settings, job.github, store, self.model
        )
        body = escape(answer.text) + "\n\n" + answer_marker(job.comment.comment_id)
        reply_id = await reply(job.github, job.repository, job.number, finding.id, body)
        return {
            **_outcome("answer", "answered"),
            "reply_id": reply_id,
            "answer": answer.model_dump(mode="json"),
        }


class _Job:
    """One command job's comment and GitHub client."""

    def __init__(
        self, record: JobRecord, the_comment: Comment, github: GitHubClient, login: str
    ) -> None:
        self.record = record
        self.comment = the_comment
        self.github = github
        self.login = login
        self.number = record.number
        self.repository = Repository(record.owner, record.repo)

    async def our_finding(self) -> ReviewComment | None:
        """The top-level review comment the command replied to, when it is ours and carries a
        finding's marker; else None."""
        top_id = self.comment.in_reply_to_id
        if top_id is None:
            return None
        top = await review_comment(self.github, self.repository, top_id)
        if top is None or top.author != self.login or top.in_reply_to_id is not None:
            return None
        return top if top.finding_fingerprint() is not None else None


def _comment(command: dict[str, Any]) -> Comment | None:
    try:
        return Comment(
            comment_id=int(command["comment_id"]),
            body=str(command["body"]),
            author=str(command["author"]),
            pull_author=command.get("pull_author"),
            review_comment=bool(command["review_comment"]),
            in_reply_to_id=command.get("in_reply_to_id"),
            commit_id=command.get("commit_id"),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _outcome(kind: str, outcome: str) -> dict[str, Any]:
    return {"kind": kind, "outcome": outcome}
