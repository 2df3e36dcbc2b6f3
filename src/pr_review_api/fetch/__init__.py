"""What every forge fetches a change into: the repository cache, a forge's remote, its files
and locks, git over HTTP, the limits of a change's metadata."""
