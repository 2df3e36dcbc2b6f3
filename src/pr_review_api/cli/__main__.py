"""`python -m pr_review_api.cli`."""

from pr_review_api.cli.commands import main

main(prog_name="pr-review")
