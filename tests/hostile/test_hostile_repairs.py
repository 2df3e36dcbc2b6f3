"""Repair messages (REVIEW_REPAIR_ATTEMPTS) are fixed words, whatever the model wrote."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from pr_review_api.loop.final_review import SCHEMA_NAMES, FinalReviewRejected, parse_final_review
from pr_review_api.loop.workspace import LocalTarget
from tests.hostile.provider_support import DEFAULT_RUN, prepared_once
from tests.hostile.support import FIGURES

# --- Repair messages (REVIEW_REPAIR_ATTEMPTS) never carry the model's text ------------------

_NAMES = "|".join(sorted(SCHEMA_NAMES))
_UNKNOWN = rf'(an unknown field|the unknown field "({_NAMES})")'
_WHERE = rf"(the top level|({_NAMES}|\d+)(\.({_NAMES}|\d+))*)"


_REPAIR = re.compile(
    "("
    + "|".join(
        [
            r"Your final review was empty\.",
            r"Your final review was not valid JSON\.",
            r"Your final review was wrapped in a Markdown code fence\.",
            rf"Your final review does not match the schema at {_WHERE}\.",
            rf"Your final review has {_UNKNOWN} at {_WHERE}\.",
            r"Finding \d+'s path does not name a regular file at the head commit; use the "
            r"repository-relative path of an existing file\.",
            r"Finding \d+'s line is past the end of its file, which has \d+ lines\.",
        ]
    )
    + ")"
    + re.escape(
        " Reply with the final review only: one JSON object matching the schema in the system "
        "message, with no Markdown fence and no text before or after it."
    )
)


_hostile_text = st.text(
    st.characters(codec="utf-8") | st.sampled_from('\x1b\x07`{}"'),
    max_size=40,
)


_keys = st.sampled_from(sorted(SCHEMA_NAMES)) | _hostile_text


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | _hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


_finding = st.fixed_dictionaries(
    {
        "severity": st.sampled_from(["high", "low", "blocker"]),
        "title": _hostile_text,
        "explanation": st.just("e"),
        "path": st.sampled_from(["src/app.py", "README.md", "nope.py", "src", "./src/app.py"])
        | _hostile_text,
        "line": st.none() | st.integers(0, 40),
        "evidence": st.just("e"),
        "recommendation": st.just("r"),
    },
    optional={"extra": _values},
)


_document = st.fixed_dictionaries(
    {"summary": _hostile_text, "findings": st.lists(_finding, max_size=3), "notes": st.just([])},
    optional={"verdict": _values},
) | st.dictionaries(_keys, _values, max_size=4)


_content = (
    _document.map(json.dumps)
    | _document.map(lambda doc: "```json\n" + json.dumps(doc) + "\n```")
    | _hostile_text
)


@DEFAULT_RUN
@given(content=_content)
def test_repair_messages_are_fixed_words_whatever_the_model_wrote(
    widget: LocalTarget, content: str
) -> None:
    repository = prepared_once(widget).repository
    rejected: FinalReviewRejected | None = None
    try:
        parse_final_review(content, repository, tolerant=False)
    except FinalReviewRejected as exc:
        rejected = exc
    if rejected is None:
        return  # a valid review: nothing to repair
    assert _REPAIR.fullmatch(rejected.repair), rejected.repair
    assert rejected.message.isascii()
    assert rejected.message.isprintable()
    FIGURES["repair messages checked"] += 1
