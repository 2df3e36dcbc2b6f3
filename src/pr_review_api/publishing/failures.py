"""How a publication fails on any forge: one fixed sentence (`PublishFailure`), told in the
forge's own words (`PublishWords`: github/history.py's, gitlab/history.py's)."""

from __future__ import annotations

from dataclasses import dataclass


class PublishFailure(Exception):
    """Publishing failed; `message` is a fixed sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class PublishWords:
    """How a forge's refusals to publish are told: its name, what it calls a change, and
    what a token needs to publish there."""

    forge: str
    change: str
    token_needs: str


def status_failure(status: int, what: str, words: PublishWords) -> PublishFailure:
    """A fixed sentence for a forge's answer that ends the publication."""
    forge = words.forge
    if status in (401, 403):
        return PublishFailure(
            f"{forge} refused to let us {what} (status {status}); the token needs "
            f"{words.token_needs}."
        )
    if status == 404:
        return PublishFailure(f"{forge} did not find the {words.change} when we tried to {what}.")
    if status >= 500:
        return PublishFailure(f"{forge} answered with a server error (status {status}).")
    return PublishFailure(f"{forge} answered with an unexpected status ({status}).")
