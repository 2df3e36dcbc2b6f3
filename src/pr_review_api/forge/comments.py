"""What a command job needs from the forge of its change, as one interface (specification §§15, 17).

jobs/comments.py keeps the job's mechanics (the answers' hourly count, the dismissals
table, the answer loop, the result document) and speaks to the forge only through a
`ChangeComments`: read the command its delivery carried, tell whether it replied to one of
our findings, reply, react, post an answer. forge/github_comments.py (review comments,
reactions) and forge/gitlab_comments.py (discussion notes, award emoji) implement it;
forge/select.py's `open_comments` picks one by the change's URL, with the client of the
job's identity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, Protocol

from pr_review_api.forge.clients import ClientT, ForgeClients
from pr_review_api.ledger import NumberedChange


class CommandRecord(NumberedChange, Protocol):
    """The job a command is (jobs/records.py's `JobRecord`), as the comments seam reads it:
    its change's owner, repository and number, and these."""

    @property
    def pull_request_url(self) -> str: ...
    @property
    def installation_id(self) -> int | None: ...
    @property
    def command(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Command:
    """The command as its delivery carried it (never fetched again)."""

    author: str
    text: str  # what follows the address: a question, for an `answer`


@dataclass(frozen=True)
class CommandFinding:
    """One of our findings, the command replied to: what a dismissal stores and what a
    question is asked about."""

    fingerprint: str
    title: str  # as our comment shows it, our escaping undone
    path: str | None
    body: str
    line: int | None
    head: str | None  # the commit it was posted on (None: unknown)


@dataclass(frozen=True)
class FindingThread:
    """The finding's thread as the command found it."""

    answered: bool  # our answer to this command is in it (a run before this one posted it)
    earlier: list[tuple[str, str]]  # (author, text) of the replies before the command


class ChangeComments(ABC):
    """One command on a change, through the forge's client of the job's identity."""

    @property
    @abstractmethod
    def dismissals_key(self) -> str:
        """The repository's key in the dismissals table (any case)."""

    @abstractmethod
    def clients(self) -> ForgeClients:
        """The client the answer loop reads the change through (loop/answer.py's `answer_at`):
        the job's one, of the change's forge."""

    @abstractmethod
    async def command(self) -> Command | None:
        """The command, or None: to be ignored (unreadable, a bot's, or one of ours)."""

    @abstractmethod
    async def help(self) -> None:
        """Reply with the list of commands (in the command's thread when it has one)."""

    @abstractmethod
    async def our_finding(self) -> CommandFinding | None:
        """The finding the command replied to, when the thread is one of our findings'; the
        thread and the answer below are that finding's."""

    @abstractmethod
    async def thread(self) -> FindingThread:
        """The finding's thread: whether we answered the command already, what came before."""

    @abstractmethod
    async def acknowledge_dismissal(self) -> None:
        """The dismissal is stored: say so on the command, with no text."""

    async def acknowledge(self) -> None:
        """A command is done (a learning stored or removed, specification §20): one reaction, as a
        dismissal's, and no text."""
        await self.acknowledge_dismissal()

    @abstractmethod
    def comment_url(self, change_url: str) -> str | None:
        """The command's comment on the forge's pages (a learning's `url`), or None."""

    @abstractmethod
    async def hold_off(self) -> None:
        """Over the answers' hourly limit: say so on the command, with no text."""

    @abstractmethod
    async def post_answer(self, text: str) -> int | None:
        """Reply in the finding's thread with the model's answer, made inert for the forge and
        marked as the command's; the reply's id."""


class ClientComments(ChangeComments, Generic[ClientT]):
    """A command's comments through its forge's client of the job's identity (`client`), the
    repository's key in the dismissals table given by the forge (`dismissals_key`)."""

    def __init__(self, client: ClientT, dismissals_key: str) -> None:
        self.client = client
        self._dismissals_key = dismissals_key

    @property
    def dismissals_key(self) -> str:
        return self._dismissals_key

    def clients(self) -> ForgeClients:
        return ForgeClients((self.client,))
