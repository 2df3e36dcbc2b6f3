"""The search index: a repository's searchable text on disk, shared by every process.

`git grep <tree>` inflates every blob of the tree on every search, seconds of CPU on a
kernel-sized repository, and a text store in memory costs each process its own gigabyte and a
fill. The search index is one SQLite file per repository, in its index folder
(`RepositoryStore.index_dir`, inside the cache, so the cache's bound and eviction cover it).
A search asks the index for the blobs holding every trigram of its literal, then finds the
literal in those bodies itself (git/search.py): the index only narrows, the exact match and
every rule of `git grep -F -n -I` decide. Any SQLite error makes the index count as absent:
search falls back to `git grep`, never fails because of it.

The words every module of the package uses, each in one sense:

- stored blob: a blob with a row in the file (its text too, unless it holds a NUL byte);
- a head's search blobs: the blobs a search of the head reads (`Snapshot.search_blobs`);
- missing blobs: a head's search blobs that are not stored;
- complete head: a head with no missing blobs. It is *marked complete* in the file (`heads`),
  so any process knows it in one look-up, and a snapshot found complete is *remembered* by
  the process that read it, so it is not looked up again;
- generation: one index file, `search-<n>.sqlite`; the *current generation* is the highest,
  the one searches read. A remade index is the next generation, never the old name. A
  file's *token* is a random name written into it: a reader that finds another token knows
  the file was remade under it;
- stale: a generation holding far more than its latest head needs (old heads' blobs): the
  next build writes a new generation;
- inline add: a head's few missing blobs added within the search that found them missing
  (or the head's preparation);
- tail: the text bodies stored with no posting lists (an inline add of a new head's changed
  files, at most TAIL_ADD_BYTES): every search of a head reads its tail bodies whole, and once
  the tail holds a build's batch it is listed as one segment (`build.post_tail`);
- build: the background work that adds a head's missing blobs in batches, one transaction
  each; one builder per index folder over every process (the build lock), one writer at a
  time (the write lock), pausing while a search runs `git grep` (the searching lock);
- incomplete head: a head this process last found its index short of and has not seen
  complete since: what a closing one-shot process leaves for a background build.

The modules:

- `schema`: the file format: its tables and version, opening it to read or to write, and the
  writes (storing blobs as a segment or into the tail, marking a head complete);
- `postings`: the trigram posting lists, made and read in bulk;
- `prepare`: a build's other process, which reads, compresses and indexes its batches;
- `reader`: `SearchIndex`, one generation read by any number of threads; reads never write;
- `folder`: the index folder: its generations and its locks between processes;
- `build`: adding missing blobs: inline, or by a build in the background;
- `schedule`: `SearchIndexes`, a process's indexes: which head is complete, and when a
  head's missing blobs are added and by whom.

numpy: `postings` is the one module built on it, and the others import it (and numpy) inside
the functions that search or write an index, never at their top. Every process imports the
store, and numpy's import alone is 13 MB of resident memory, which a process that never reads
an index (a tree with no text to search, a listing, a small repository searched by
`git grep`) should not pay: on a 1,000,000-entry tree it was the margin over the memory target.
"""
