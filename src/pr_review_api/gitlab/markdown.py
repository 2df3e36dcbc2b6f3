"""Model text as GitLab Markdown that renders as itself and does nothing (specification §§10, 17).

GitLab renders more than GitHub does, and part of it after Markdown, on the rendered text (its
reference filters), where a backslash escape has already been consumed. So every piece of
model text (and every path) gets both defences `output/inert_markdown.py` uses for GitHub:

- every ASCII punctuation character is backslash-escaped (CommonMark allows it for all of
  them): no emphasis, heading, list, table, code span, link `[x](url)`, image, autolink
  `<url>`, raw HTML, HTML comment (our markers among them), entity, math `$x$` or quote
  `>>>` can start in model text;
- a WORD JOINER (U+2060, invisible) follows each character that opens one of GitLab's
  references, so no reference pattern can match on the rendered text whether or not the
  renderer honours the escape: `@user`, `@group/sub`, `@all` (mentions); `#12`, `!34`, `&5`
  (issues, merge requests, epics, and their cross-project forms `group/project#12`);
  `~label`, `~"two words"`, `%milestone`, `%"two words"`, `$snippet`, `*iteration:`,
  `^alert#1`; `[[wiki]]`, `[[_TOC_]]`, `[contact:x]`, `[vulnerability:1]`; `{+ inline diff +}`;
  `:emoji:`; and `scheme://` (autolinks);
- `www.` (autolinks), `ABC-123` (an external issue tracker's keys) and runs of seven or more
  hex digits (commit references, which GitLab links when the commit exists) are broken with a
  joiner too.

GitLab also runs **quick actions**: a line of a note or a discussion that starts with `/` and a
command name (`/merge`, `/approve`, `/close`, ...) is executed with our token's rights before
the note is saved. Every line `escape` returns starts with a character other than `/`, `\\s`
or a control (leading blanks are dropped, `/` is written `\\/`), so no line of model text can be
one, whatever it holds. Text we show raw (a suggestion's replacement in a code block) is
checked with `starts_quick_action` by the caller, which then does not show it raw.
"""

from __future__ import annotations

import re

from pr_review_api.output.inert_markdown import (
    CONTROL_AND_BIDI,
    WORD_JOINER,
    backslashed,
    break_keys_and_hashes,
    escaped_punctuation,
    hard_breaks,
)

# The characters that open a GitLab reference, a filter-made link or a wiki/TOC tag.
_SIGILS = frozenset("@#!&~%$*^[{:")
_WWW = re.compile(r"(?i)\b(www)\.")
# GitLab's quick-action extractor (lib/gitlab/quick_actions/extractor.rb) matches
# `^\/<command>` case-insensitively after deleting every carriage return; we refuse more:
# any line whose first non-blank characters are `/` and a letter or `_` (whatever the word:
# GitLab adds commands), while `//` and `/*` (comments in code) start no command.
_QUICK_ACTION_LINE = re.compile(r"^\s*/[a-z_]", re.MULTILINE | re.IGNORECASE)


def starts_quick_action(text: str) -> bool:
    """Whether a line of raw `text` (shown as is, in a code block) starts with `/` and a
    word, after blanks: GitLab could take it for a quick action, so it is never posted raw."""
    # GitLab deletes carriage returns before it looks; a renderer may break lines at them.
    return any(_QUICK_ACTION_LINE.search(text.replace("\r", cut)) is not None for cut in ("", "\n"))


def _escape_line(line: str) -> str:
    line = _WWW.sub(lambda m: m[1] + WORD_JOINER + ".", line)
    return escaped_punctuation(break_keys_and_hashes(line), backslashed, _SIGILS)


def escape(text: str) -> str:
    """`text` as inert GitLab Markdown: it renders as itself, references, links, embeds and
    runs nothing, and none of its lines can start a quick action."""
    text = CONTROL_AND_BIDI.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    # Blanks dropped at a line's start: no indented code block, no `  /close`.
    return hard_breaks([_escape_line(line.lstrip()) for line in text.split("\n")])


def escape_inline(text: str) -> str:
    """`text` on one line (a title, a path): line breaks become spaces."""
    return escape(" ".join(text.split()))
