"""Reading reference sources: what a source holds now (documents.py) and whether it
changed (fingerprints.py), glob sources' files under the source roots (globs.py), what
curators write into upload and inline sources (editing.py, upload_paths.py), BEIR
corpora as upload content (beir.py), and the error a badly configured source raises
(errors.py)."""
