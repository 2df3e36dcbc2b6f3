"""Model text as Gitea Markdown that renders as itself and does nothing (specification §§10, 19).

Gitea renders Markdown with goldmark, then post-processes the rendered HTML
(modules/markup/html.go, `PostProcessDefault`): on every text node outside `<code>` and `<pre>`
its processors find mentions `@user` and `@org/team`, issue and pull references `#12`, `!12`,
`owner/repo#12` and `ABC-123` (modules/references/references.go), commit cross references
`owner/repo@sha`, commit SHAs (7 to 64 hex digits), URLs, e-mail addresses, emoji shortcodes
`:name:` and `[[wiki links]]`. It also reads mentions and references (to notify people and to
cross-reference issues) from the raw text stripped of its Markdown (modules/markup/mdstripper).
A backslash escape is consumed before the post-processors run, so it cannot hide any of those;
and Gitea's math extension reads `\\(`, `\\[` and `$` as math delimiters, so backslashes cannot
be used for parentheses and brackets either. So every piece of model text (`escape`) gets:

- every ASCII punctuation character written as a numeric character reference (`&#64;` for
  `@`): CommonMark never reads a character reference as structure, so no emphasis, heading,
  list, table, code span, link, image, autolink, raw HTML, HTML comment (our markers among
  them), math or footnote can start in model text, and the raw text holds no `@`, `#`, `!`,
  `/`, `:` or `$` for the stripped-text readers and the math parser to see;
- a WORD JOINER (U+2060, invisible) after each character that opens a pattern of the
  post-processors, which see the references decoded: `@`, `#`, `!`, `:` (emoji shortcodes
  and every `scheme:`), `[` (`[[wiki]]`); before the `-` of `ABC-123`; inside `www.`; and
  between every six hex digits of a longer run (no commit SHA of 7 or more);
- leading blanks dropped (no indented code block) and line breaks kept as hard breaks;
  control and bidirectional-override characters removed.

`code_span` shows text verbatim instead (a path), as `output/inert_markdown.code_block` does a
suggestion's `diff` block: Gitea's post-processors skip `<code>` and `<pre>`, and the
stripped-text readers skip code.
"""

from __future__ import annotations

import re

from pr_review_api.output.inert_markdown import (
    CONTROL_AND_BIDI,
    WORD_JOINER,
    break_keys_and_hashes,
    escaped_punctuation,
    hard_breaks,
)

# The characters that open one of Gitea's post-processor patterns (see the module docstring).
_SIGILS = frozenset("@#!:[")
_WWW = re.compile(r"(?i)(www)\.")  # every `www.`, whatever precedes it
_BACKTICK_RUN = re.compile(r"`+")


def _escape_line(line: str) -> str:
    line = _WWW.sub(lambda m: m[1] + WORD_JOINER + ".", line)
    return escaped_punctuation(break_keys_and_hashes(line), _reference, _SIGILS)


def _reference(char: str) -> str:
    """A numeric character reference (`&#64;`): Gitea consumes a backslash escape too early."""
    return f"&#{ord(char)};"


def _clean(text: str) -> str:
    return CONTROL_AND_BIDI.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def escape(text: str) -> str:
    """`text` as inert Gitea Markdown: it renders as itself and mentions, references, links,
    embeds and formats nothing."""
    return hard_breaks([_escape_line(line.lstrip()) for line in _clean(text).split("\n")])


def escape_inline(text: str) -> str:
    """`text` on one line (a title): line breaks become spaces."""
    return escape(" ".join(_clean(text).split()))


def code_span(text: str) -> str:
    """`text` on one line as a code span, shown verbatim (a path): a fence of backticks
    longer than any run inside, padded with a space when the text touches a backtick."""
    text = " ".join(_clean(text).split("\n"))
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_text(text: str) -> str:
    """Raw text for a code block (a suggestion's diff): its line breaks made `\\n`, every
    control and bidirectional override removed; the block itself shows it verbatim."""
    return _clean(text)
