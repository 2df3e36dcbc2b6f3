"""What our earlier posts' markers say (publishing/markers.py, specification §10): which heads we
reviewed and in what order, which review to name for a head, where our summary is kept, and which of
our comments open a finding's thread. Only the publishing identity's posts count."""

from __future__ import annotations

from pr_review_api.publishing.markers import (
    Post,
    finding_marker,
    head_marker,
    ordered_markers,
    read_markers,
)

BOT = "pr-review-bot"
H1, H2, H3, H4 = ("1" * 40, "2" * 40, "3" * 40, "4" * 40)
FULL = "### pr-review\n\nSummary.\n\n"


def test_the_last_head_is_the_last_our_first_review_appended() -> None:
    # The first review carries every head; a later head with new findings has its own review.
    first = Post(BOT, FULL + "".join(head_marker(h) for h in (H1, H2, H3, H4)), 1, "u1", 0)
    short = Post(BOT, "**Findings:** 1 low\n\n" + head_marker(H3), 2, "u2", 1)
    state = read_markers([first, short], BOT, reviews=True)
    assert state.last_head == H4
    assert state.summary == first


def test_reviews_of_older_versions_keep_their_order() -> None:
    posts = [Post(BOT, FULL + head_marker(h), n, f"u{n}", n) for n, h in enumerate((H1, H2))]
    assert read_markers(posts, BOT, reviews=True).last_head == H2
    # Then a head with nothing new: the oldest full review is rewritten to carry it.
    posts[0] = Post(BOT, FULL + head_marker(H1) + head_marker(H3), 0, "u0", 0)
    assert read_markers(posts, BOT, reviews=True).last_head == H3


def test_a_head_names_our_newest_review_that_carries_it() -> None:
    first = Post(BOT, FULL + head_marker(H1) + head_marker(H2), 1, "u1", 0)
    short = Post(BOT, "**Findings:** 1 low\n\n" + head_marker(H2), 2, "u2", 1)
    state = read_markers([first, short], BOT, reviews=True)
    assert state.review_of(H2) == (2, "u2")
    assert state.review_of(H1) == (1, "u1")
    assert state.review_of(H3) is None


def test_the_summary_is_our_oldest_full_review_with_a_head_marker() -> None:
    planted = Post("octocat", FULL + head_marker(H1), 1, "u1", 0)
    unmarked = Post(BOT, FULL + "\\" + head_marker(H1), 2, "u2", 1)
    short = Post(BOT, "**Findings:** none\n\n" + head_marker(H2), 3, "u3", 2)
    full = Post(BOT, FULL + head_marker(H3), 4, "u4", 3)
    state = read_markers([planted, unmarked, short, full], BOT, reviews=True)
    assert state.summary == full
    assert read_markers([planted, unmarked, short], BOT, reviews=True).summary is None


def test_only_our_top_level_comments_with_a_finding_open_a_thread() -> None:
    marked = "**high** · T\n\n" + finding_marker("a" * 32)
    posts = [
        Post(BOT, marked, 1, path="a.py", line=3),
        Post(BOT, marked, 2, path="a.py", line=3, reply=True),
        Post(BOT, "**high** · T", 3, path="a.py", line=3),
        Post("octocat", marked, 4, path="a.py", line=3),
    ]
    state = read_markers(posts, BOT, reviews=False)
    assert [p.review_id for p in state.finding_comments] == [1]
    assert state.heads == []


def test_markers_come_in_order_once_each() -> None:
    body = head_marker(H2) + finding_marker("b" * 32) + head_marker(H1) + head_marker(H2)
    body += finding_marker("a" * 32) + "\\" + finding_marker("c" * 32) + head_marker("5" * 16)
    assert ordered_markers(body) == ([H2, H1], ["b" * 32, "a" * 32])
