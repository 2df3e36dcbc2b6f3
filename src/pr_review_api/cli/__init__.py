"""The `pr-review` command line."""

from pr_review_api.cli.commands import main

__all__ = ["main"]
