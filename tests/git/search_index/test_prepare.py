"""search_index/prepare.py: the build's other process, and the batches it writes on its pipe.

A batch goes through the framing unchanged, a stream cut short is refused, and a real child
process reads a real repository's blobs in the batches the build asks for.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pr_review_api.git.search_index import build
from pr_review_api.git.search_index.prepare import read_batch, write_batch
from pr_review_api.git.search_index.schema import prepare_blobs
from tests.gitrepo import GitRepo, git


def test_a_batch_crosses_the_pipe_unchanged() -> None:
    blobs = [(f"{n:040x}", f"needle {n}\n".encode() * n) for n in range(5)]
    blobs += [("f" * 64, b"\0binary"), ("e" * 40, b"x" * 40_000)]  # a SHA-256 id; packed
    prepared = prepare_blobs(blobs)
    stream = io.BytesIO()
    write_batch(stream, prepared)
    write_batch(stream, prepared)
    stream.seek(0)
    for _ in range(2):
        again = read_batch(stream)
        assert again is not None
        assert again.blobs == prepared.blobs
        assert again.postings.grams.tolist() == prepared.postings.grams.tolist()
        assert again.postings.lengths.tolist() == prepared.postings.lengths.tolist()
        assert again.postings.data == prepared.postings.data
    assert read_batch(stream) is None
    assert [kind for _, _, kind in prepared.blobs][-1] is True  # 40,000 bytes: compressed
    assert prepared.blobs[-2][1] is None


def test_a_batch_cut_short_is_refused() -> None:
    stream = io.BytesIO()
    write_batch(stream, prepare_blobs([("a" * 40, b"some text here\n")]))
    with pytest.raises(ValueError, match="ended early"):
        read_batch(io.BytesIO(stream.getvalue()[:-3]))


def test_the_child_process_prepares_the_blobs_in_batches(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"f{n:02}.txt": f"needle {n}\n" for n in range(25)} | {"bin": "a\0b"}
    head = repo.commit_files(files)
    oids = [line.split()[2] for line in git(repo.path, "ls-tree", "-r", head).splitlines()]
    monkeypatch.setattr(build, "BATCH_BLOBS", 10)  # passed to the child on its command line
    batches = list(build.prepared_batches(Path(repo.git_dir), oids))
    assert [len(batch.blobs) for batch in batches] == [10, 10, 6]
    assert [oid for batch in batches for oid, _, _ in batch.blobs] == oids
    assert sum(body is None for batch in batches for _, body, _ in batch.blobs) == 1
    assert all(len(batch.postings.grams) for batch in batches)
