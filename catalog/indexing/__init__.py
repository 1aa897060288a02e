"""The catalog's write path, one source at a time: index runs under the source's lock
(runs.py) run source_index (source_index.py), which diffs the documents a source holds
against those stored (diffing.py), chunks what changed (chunks.py, chunker.py), embeds
the chunks through the cache (embedding_cache.py) and switches the source's rows in one
transaction (writes.py)."""
