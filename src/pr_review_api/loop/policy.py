"""The repository's skip rules for automatic reviews (specification §16), from the BASE commit's
`.pr-review.toml`.

An automatic review (a webhook job, or `review --automatic`, which the Action passes) of a pull
request that a rule matches ends `skipped` before any provider request: nothing is published
but a neutral check saying which rule. Rules, in this order (the first that matches is named):

- `review_bots` false (the default) and the author's login ends in `[bot]`;
- `skip_authors`: a glob matches the author's login;
- `skip_labels`: a glob matches one of the pull request's labels;
- `skip_base_branches`: a glob matches the base branch's name;
- `skip_title`: the title contains one of the strings, ignoring case.

Every glob is matched by `pr_review_api.globs` (linear time, whatever the base commit holds);
the rule named in the check never quotes the pull request's own text (its title, its labels),
only the base's key, so nothing the author wrote reaches the check.
"""

from __future__ import annotations

from pr_review_api.forge.base import ChangeMetadata
from pr_review_api.globs import matches_any
from pr_review_api.loop.repo_config import RepoConfig

BOT_SUFFIX = "[bot]"
LABEL_RULE = "a label matches skip_labels"
TITLE_RULE = "the title contains a skip_title string"
# The rules whose input the pull request's author sets (specification §16): with `fail_on` set, a
# skip by one of these must not leave a passing check on the head. The others rest on who the author
# is or on the base branch the repository chose not to gate (docs/configuration-file.md).
AUTHOR_CONTROLLED_RULES = frozenset({LABEL_RULE, TITLE_RULE})


def skip_rule(metadata: ChangeMetadata, config: RepoConfig) -> str | None:
    """The rule that skips an automatic review of this pull request, or None."""
    author = metadata.author
    if not config.review_bots and author.lower().endswith(BOT_SUFFIX):
        return "the author is a bot (review_bots = false)"
    if author and matches_any(author, config.skip_authors):
        return "the author matches skip_authors"
    if any(matches_any(label, config.skip_labels) for label in metadata.labels if label):
        return LABEL_RULE
    if matches_any(metadata.base_ref, config.skip_base_branches):
        return "the base branch matches skip_base_branches"
    title = metadata.title.casefold()
    if any(part.casefold() in title for part in config.skip_title):
        return TITLE_RULE
    return None
