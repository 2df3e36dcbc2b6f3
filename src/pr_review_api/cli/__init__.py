"""The `pr-review` command line."""

try:
    from pr_review_api.cli.commands import main
except KeyboardInterrupt:
    # A Ctrl-C while the command line loads (seconds on a busy machine): the status of an
    # interrupted command (commands.EXIT_INTERRUPTED), and no traceback.
    raise SystemExit(130) from None

__all__ = ["main"]
