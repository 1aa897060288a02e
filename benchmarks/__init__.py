"""Lectern's benchmarks: the measurements behind docs/benchmarks.md.

They live beside the product, not inside it: no product module imports them, and the
wheel leaves them out (pyproject.toml's package discovery names the product packages
only). They run from a checkout, with the product's settings and database:
`.venv/bin/python -m benchmarks <command> [options]` (benchmarks/__main__.py).
Datasets come from the path a command is given (`--dataset`, `--corpus`). A synthetic
catalog's build touches only its own partitions: its HNSW index and BM25 blocks are
built once after its rows (catalog.indexing.bulk), however the build ends.
"""
