"""The Gitea requests of the comment commands (specification §15 on a Gitea or Forgejo pull
request, section 19).

How a reply in a review's conversation reaches us, read from Gitea's source (docs/gitea.md
cites the files): a reply written with the conversation's Reply button is a code comment made
by services/pull/review.go's `CreateCodeComment` with `replyReviewID` set, so it is stored in
the review it replies to, on the same path and line; Gitea then notifies it as a created issue
comment (`notify_service.CreateIssueComment`), which services/webhook/notifier.go delivers as
`pull_request_comment` with an `IssueCommentPayload` whose `comment` carries no path, line or
review. So the thread is found here: the comment is one of the code comments of one of our
reviews (`GET .../pulls/{index}/reviews`, ours by our `GET /user` login, then `GET
.../reviews/{id}/comments`), and its thread is the comments of our reviews on the same path and
line (`path`, `position` for the new side, `original_position` for the old), oldest first. A
thread is one of our findings' when its first comment is ours and carries a finding's marker.

Gitea's API has no endpoint that replies in a conversation (`.../reviews/{id}/comments` is
read-only). What Gitea shows as one conversation is every code comment on the same path and
line (services/gitdiff's `LoadComments` groups them per line, whatever their review), so our
answer is a new `COMMENT` review with one comment on the finding's path and line, at the head,
when the head is still the one the finding was posted on (the line is then on the diff); after
a new head, a comment on the pull request that names the path and line instead (a comment on a
line off the new diff would be shown out of place). Our answers carry
`<!-- pr-review:answer=<question comment id> -->`, read only from our own comments.

Reactions (`+1` for `ignore`, `eyes` over the answers' hourly limit) go on the command's
comment through `POST .../issues/comments/{id}/reactions`: Gitea's code comments are issue
comments, so the one endpoint serves both. Every request goes through the job's `GiteaClient`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.gitea.client import GiteaClient, status_error
from pr_review_api.gitea.history import CommentWire, ReviewWire
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.publishing.markers import answered_in, finding_in

MAX_REVIEW_PAGES = 4  # 200 reviews: ours among them are one a head and one an answer
MAX_OUR_REVIEWS = 60  # the newest of ours whose comments are read
MAX_COMMENT_PAGES = 10
_SHA = Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")]

Reaction = Literal["+1", "eyes"]
_Model = TypeVar("_Model", bound=BaseModel)


class _User(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str | None = None


class _IssueComment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int
    body: str = ""
    user: _User | None = None


class _HeadWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sha: _SHA


class _PullWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    head: _HeadWire


@dataclass(frozen=True)
class ThreadComment:
    """One comment of a conversation on a line: its author, text and id."""

    id: int
    author: str
    body: str


@dataclass(frozen=True)
class LineThread:
    """The conversation a comment is in: the comments of our reviews on its path and line,
    oldest first, and the commit the first one's review was posted on."""

    path: str
    line: int  # on the new side (a finding is always posted there)
    comments: list[ThreadComment]
    head: str | None

    def finding(self, login: str) -> str | None:
        """The fingerprint of the finding the thread starts with, when its first comment is
        ours and carries a finding's marker."""
        first = self.comments[0]
        return finding_in(first.body) if first.author.lower() == login.lower() else None

    def answers(self, login: str) -> set[int]:
        """The ids of the questions our comments in the thread answer."""
        ours = (c for c in self.comments if c.author.lower() == login.lower())
        return {question for c in ours for question in answered_in(c.body)}


async def _list(client: GiteaClient, url: str, max_pages: int) -> list[Any]:
    items, _complete = await client.paginated(url, max_pages=max_pages)
    return items


def _parsed(model: type[_Model], items: list[Any]) -> list[_Model]:
    parsed: list[_Model] = []
    for item in items:
        try:
            parsed.append(model.model_validate(item))
        except ValidationError:
            continue  # one odd entry hides nothing else
    return parsed


async def find_thread(
    client: GiteaClient, ref: PullRequestRef, comment_id: int, login: str
) -> LineThread | None:
    """The conversation the comment `comment_id` is in, when it is a code comment of one of
    our reviews on a line of the new side (see the module docstring); else None."""
    reviews = _parsed(ReviewWire, await _list(client, ref.api_url("/reviews"), MAX_REVIEW_PAGES))
    ours = [r for r in reviews if _login(r.user).lower() == login.lower()]
    comments: list[tuple[ReviewWire, CommentWire]] = []
    for review in ours[-MAX_OUR_REVIEWS:]:
        url = ref.api_url(f"/reviews/{review.id}/comments")
        response = await client.request("GET", url)
        if response.status == 404:
            continue  # deleted since it was listed
        if not 200 <= response.status < 300:
            raise status_error(response, anonymous=client.anonymous)
        listing = response.json()
        if not isinstance(listing, list):
            raise GiteaUnavailable("Gitea returned a listing that is not a list.")
        comments += [(review, c) for c in _parsed(CommentWire, listing)]
    asked = next((c for _, c in comments if c.id == comment_id), None)
    if asked is None or not asked.position or asked.position < 0 or not asked.path:
        return None  # not in a review of ours, or on the old side (no finding is there)
    same = sorted(
        ((r, c) for r, c in comments if c.path == asked.path and c.position == asked.position),
        key=lambda pair: pair[1].id,
    )
    first_review = same[0][0]
    head = first_review.commit_id if _is_sha(first_review.commit_id or "") else None
    return LineThread(
        path=asked.path,
        line=asked.position,
        comments=[ThreadComment(c.id, _login(c.user), c.body or "") for _, c in same],
        head=head,
    )


async def answered_on_the_pull_request(
    client: GiteaClient, ref: PullRequestRef, login: str
) -> set[int]:
    """The ids of the questions our comments on the pull request (not in a review) answer."""
    items = await _list(client, ref.issue_api_url("/comments"), MAX_COMMENT_PAGES)
    ours = [c for c in _parsed(_IssueComment, items) if _login(c.user).lower() == login.lower()]
    return {question for c in ours for question in answered_in(c.body)}


async def current_head(client: GiteaClient, ref: PullRequestRef) -> str:
    """The pull request's head now (`GET .../pulls/{index}`)."""
    response = await client.request("GET", ref.api_url())
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=client.anonymous)
    try:
        return _PullWire.model_validate_json(response.body).head.sha
    except ValidationError:
        raise GiteaUnavailable("Gitea returned pull request data that is not valid.") from None


async def post_comment(client: GiteaClient, ref: PullRequestRef, body: str) -> int | None:
    """A comment on the pull request; its id."""
    response = await client.request("POST", ref.issue_api_url("/comments"), json={"body": body})
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=client.anonymous)
    return _id_of(response.json())


async def post_line_reply(
    client: GiteaClient, ref: PullRequestRef, head: str, thread: LineThread, body: str
) -> int | None:
    """A `COMMENT` review at `head` with one comment on the thread's path and line: Gitea shows
    it in the same conversation. The review's id."""
    review = {
        "event": "COMMENT",
        "commit_id": head,
        "body": "",
        "comments": [
            {"path": thread.path, "body": body, "new_position": thread.line, "old_position": 0}
        ],
    }
    response = await client.request("POST", ref.api_url("/reviews"), json=review)
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=client.anonymous)
    return _id_of(response.json())


async def react(client: GiteaClient, ref: PullRequestRef, comment_id: int, name: Reaction) -> None:
    """Our reaction on a comment of the pull request (an issue or code comment). Gitea answers
    200 for a reaction we gave that comment before: a job run again, and no failure."""
    url = ref.repo_api_url(f"/issues/comments/{comment_id}/reactions")
    response = await client.request("POST", url, json={"content": name})
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=client.anonymous)


def _id_of(document: object) -> int | None:
    found = document.get("id") if isinstance(document, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _login(user: BaseModel | None) -> str:
    login = getattr(user, "login", None)
    return login if isinstance(login, str) else ""


def _is_sha(value: str) -> bool:
    return len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value)
