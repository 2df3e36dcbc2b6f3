"""What the Gitea tests share: a client of the fake Gitea, the pull request's URLs, and an oracle
of what Gitea would make active in a text we post."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef, parse_pull_request_url
from pr_review_api.model import FinalReview, Finding, ReviewResult, Revisions, Usage
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea, PullFixture

PATH = "acme/widget"
REVIEWER = "review-bot"


def client_for(fake: FakeGitea, token: str | None = GITEA_TOKEN, **overrides: Any) -> GiteaClient:
    """A client of `fake`; GITEA_TOKEN signs in as REVIEWER, a writer of PATH."""
    fake.add_token(GITEA_TOKEN, REVIEWER)
    fake.grant(PATH, REVIEWER, "write")
    return GiteaClient(fake.settings(Path("unused"), token=token, **overrides))


def pull_ref(fake: FakeGitea, index: int = 3, path: str = PATH) -> PullRequestRef:
    settings = fake.settings(Path("unused"))
    return parse_pull_request_url(f"{fake.server_url}/{path}/pulls/{index}", settings)


def finding(
    path: str, line: int | None, severity: str = "medium", title: str = "T", **extra: Any
) -> Finding:
    return Finding.model_validate(
        {
            "severity": severity,
            "title": title,
            "explanation": f"Explained {path}:{line}.",
            "path": path,
            "line": line,
            "evidence": "e",
            "recommendation": "r",
            **extra,
        }
    )


def result_of(
    pull: PullFixture, ref: PullRequestRef, findings: list[Finding], **review: Any
) -> ReviewResult:
    """A validated review of the pull request's current head, as the loop returns it."""
    return ReviewResult(
        pull_request=ref.info,
        revisions=Revisions(
            base_sha=pull.base_sha, head_sha=pull.head_sha, merge_base_sha=pull.merge_base
        ),
        model="test-model",
        review=FinalReview.model_validate(
            {"summary": "Summary.", "findings": findings, "notes": [], **review}
        ),
        usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15),
        rounds=2,
        tool_calls=1,
        trace=None,
    )


def push_head(fake: FakeGitea, pull: PullFixture, files: dict[str, str]) -> PullFixture:
    """A later head on top of the pull request's head (a push to its branch)."""
    repo = pull.repo
    head = repo.commit(files, pull.head_sha, "later")
    repo.publish(head, f"refs/pull/{pull.index}/head")
    document = fake.documents[(repo.id, pull.index)]
    document["head"]["sha"] = head
    later = PullFixture(
        repo, pull.index, pull.base_sha, head, pull.merge_base, pull.base_branch, pull.url
    )
    fake._pulls[(repo.id, pull.index)] = later
    return later


# --- an oracle of what Gitea would make active in a text we post ------------------------------
#
# Gitea renders Markdown (goldmark; markdown-it-py's CommonMark stands in here), then runs its
# post-processors on every text node outside <code> and <pre> (modules/markup/html.go,
# `PostProcessDefault`, and `visitNode`, which skips code and pre). What their patterns match is
# written below in Python's syntax (our reading of Go's RE2 semantics): Go's `\s` is ASCII
# `[\t\n\f\r ]`, its `\w` ASCII, its `$` the end of the text (`\Z` here).
_S = r"[\t\n\f\r ]"
GITEA_PATTERNS = {
    # modules/references/references.go
    "mention": re.compile(
        rf"(?:{_S}|^|\(|\[)(@[-\w][-.\w]*?|@[-\w][-.\w]*?/[-\w][-.\w]*?)"
        rf"(?:{_S}|\Z|[:,;.?!]({_S}|\Z)|'|\)|\])",
        re.ASCII,
    ),
    "issue or pull reference": re.compile(
        rf"(?:{_S}|^|\(|\[|\'|\")([#!][0-9]+)(?:{_S}|\Z|\)|\]|\'|\"|[:;,.?!]{_S}|[:;,.?!]\Z)",
        re.ASCII,
    ),
    "external tracker key": re.compile(
        rf"(?:{_S}|^|\(|\[|\"|\')([A-Z]{{1,10}}-[1-9][0-9]*)(?:{_S}|\Z|\)|\]|:|\.({_S}|\Z)|\"|\'|,)",
        re.ASCII,
    ),
    "cross-repository reference": re.compile(
        rf"(?:{_S}|^|\(|\[)([0-9a-zA-Z-_\.]+/[0-9a-zA-Z-_\.]+[#!][0-9]+)"
        rf"(?:{_S}|\Z|\)|\]|[:;,.?!]{_S}|[:;,.?!]\Z)",
        re.ASCII,
    ),
    "commit cross reference": re.compile(
        rf"(?:{_S}|^|\(|\[)([0-9a-zA-Z-_\.]+)/([0-9a-zA-Z-_\.]+)@([0-9a-f]{{7,64}})"
        rf"(?:{_S}|\Z|\)|\]|[:;,.?!]{_S}|[:;,.?!]\Z)",
        re.ASCII,
    ),
    # modules/markup/html.go
    "commit": re.compile(
        rf"(?:{_S}|^|\(|\[)([0-9a-f]{{7,64}})(?:{_S}|\Z|\)|\]|[.,:]({_S}|\Z))", re.ASCII
    ),
    "e-mail": re.compile(
        rf"(?:{_S}|^|\(|\[)([a-zA-Z0-9.!#$%&'*+\/=?^_`{{|}}~-]+@[a-zA-Z0-9]"
        r"(?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9]{2,}(?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+)"
        rf"(?:{_S}|\Z|\)|\]|;|,|\?|!|\.({_S}|\Z))",
        re.ASCII,
    ),
    "emoji shortcode": re.compile(r":[-+\w]+:", re.ASCII),
    "wiki short link": re.compile(r"\[\[(.*?)\]\](\w*)", re.ASCII),
    # linkProcessor and the full-URL patterns (xurls with `https?://` and any custom scheme);
    # any `scheme:` is refused here, which covers `mailto:` and custom schemes too.
    "URL": re.compile(r"(?i)\b[a-z][a-z0-9+.-]*:(?://)?[^\s\u2060]", re.ASCII),
    # modules/markup/common/linkify.go, on the raw text: `www.` autolinks.
    "www autolink": re.compile(r"(?i)\bwww\.", re.ASCII),
}
# Read from the raw text while parsing, outside code: Gitea's math extension
# (modules/markup/markdown/math: `\(`, `\[`, `$`) and its linkify extension
# (modules/markup/common/linkify.go: `http:`, `https:`, `ftp:`, `www.` at a word's start, and
# e-mail addresses).
RAW_RULES = {
    "math": re.compile(r"\\[(\[]|\$"),
    "linkify": re.compile(r"(?i)(?:^|[ *_~(])(?:https?:|ftp:|www\.)", re.MULTILINE),
    "linkify e-mail": re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9]"),
}
# What our own templates render: headings, bold, lists, code, line breaks.
OUR_TAGS = frozenset({"p", "br", "h3", "h4", "strong", "ul", "li", "sub", "pre", "code"})


class _TextNodes(HTMLParser):
    """The text nodes of rendered HTML outside <code> and <pre>, and every tag opened."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.tags: set[str] = set()
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self._code += tag in ("code", "pre")

    def handle_endtag(self, tag: str) -> None:
        self._code -= tag in ("code", "pre")

    def handle_data(self, data: str) -> None:
        if not self._code:
            self.texts.append(data)


def rendered(markdown: str) -> str:
    out: str = MarkdownIt("commonmark").render(markdown)
    return out


def active_parts(markdown: str, *, code: bool = False) -> list[str]:
    """What Gitea would make of a text we post, beyond our own layout: tags we never write,
    what the parser reads in the raw text (not for `code`, where it does not look), and every
    post-processor pattern that matches a rendered text node outside code (which is also what
    the stripped-text readers see, entities decoded). Empty for an inert text."""
    parser = _TextNodes()
    parser.feed(rendered(markdown))
    found = [f"tag {tag}" for tag in parser.tags - OUR_TAGS]
    if not code:
        found += [rule for rule, pattern in RAW_RULES.items() if pattern.search(markdown)]
    for text in parser.texts:
        found += [rule for rule, pattern in GITEA_PATTERNS.items() if pattern.search(text)]
    return found


def visible_text(markdown: str) -> str:
    """The text a reader sees, without the invisible joiners."""
    parser = _TextNodes()
    parser.feed(rendered(markdown))
    return "".join(parser.texts).replace("\u2060", "")


# Model text for property tests: the characters and pieces Gitea's parsers react to, and any
# other printable character.
MODEL_TEXT = st.lists(
    st.one_of(
        st.sampled_from(list("@#!:[]()<>&;$\\`*_~/.-|= \n\t'\"")),
        st.sampled_from(["www.", "http://", "https:", "\u2060", "\r", "\u202e", "[[", "]]"]),
        st.sampled_from(["deadbeef1", "ABC-12", "x@y.io", ":+1:", "a/b#1", "a/b@abcdef0"]),
        st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]),
    ),
    max_size=60,
).map("".join)
