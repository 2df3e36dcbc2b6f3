"""entries.py: a tree's entries shared with related trees, and the paths of a blob."""

from __future__ import annotations

from pr_review_api.git.entries import MAX_ENTRY_EDITS, Entries, TreeEntry


def entry(oid: str) -> TreeEntry:
    return TreeEntry("file", oid, 1)


def test_paths_of_finds_every_path_of_a_blob_through_edits() -> None:
    base = {"a": entry("1"), "b": entry("1"), "c": entry("2"), "d": entry("3"), "e": entry("1")}
    entries = Entries(base)
    assert sorted(entries.paths_of({"1"})) == ["a", "b", "e"]
    assert entries.paths_of({"9"}) == []
    edited = entries.edited({"a": None, "c": entry("1"), "f": entry("3"), "d": entry("4")})
    assert sorted(edited.paths_of({"1"})) == ["b", "c", "e"]  # a removed, c now holds it
    assert sorted(edited.paths_of({"3", "4"})) == ["d", "f"]  # d's old blob is gone from d
    assert sorted(entries.paths_of({"1"})) == ["a", "b", "e"]  # the original is unchanged
    assert edited._by_blob is entries._by_blob  # one map for every tree over the base


def test_paths_of_after_the_base_is_rebuilt() -> None:
    base = {f"p{n}": entry(str(n)) for n in range(10)}
    first = Entries(base)
    assert first.paths_of({"3"}) == ["p3"]
    many = MAX_ENTRY_EDITS + 1
    edits: dict[str, TreeEntry | None] = {f"q{n}": entry("3") for n in range(many)}
    rebuilt = first.edited(edits)
    assert rebuilt._by_blob is not first._by_blob  # a new base, a new map
    assert len(rebuilt.paths_of({"3"})) == many + 1
