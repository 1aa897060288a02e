"""Chunk vectors, from the embedding cache (catalog_embeddingcache, by model and text
sha256) or from the embedder, in groups of similar length cached as each is done."""

from __future__ import annotations

import json

import numpy as np
from django.db import connection

from catalog.embedder import Embedder, vector_literal
from catalog.progress import Progress
from catalog.sources.fingerprints import text_sha256

EMBED_GROUP = 64  # texts per embedder call: progress is reported and vectors cached per group


def _cached_vectors(model: str, digests: list[str]) -> dict[str, np.ndarray]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT text_sha256, embedding::text FROM catalog_embeddingcache "
            "WHERE model = %s AND text_sha256 = ANY(%s)",
            [model, list(set(digests))],
        )
        return {digest: np.array(json.loads(literal), dtype=np.float32) for digest, literal in cursor.fetchall()}


def _cache_vectors(model: str, digests: list[str], vectors: np.ndarray) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO catalog_embeddingcache (model, text_sha256, embedding, created_at)
            SELECT %s, d, e::vector, now() FROM unnest(%s::text[], %s::text[]) AS x(d, e)
            ON CONFLICT (model, text_sha256) DO NOTHING
            """,
            [model, digests, [vector_literal(v) for v in vectors]],
        )


def embed_texts(embedder: Embedder, texts: list[str], progress: Progress | None = None) -> tuple[np.ndarray, int]:
    """(vectors, how many came from the cache). Misses are embedded in groups of
    similar length; each group is cached as soon as it is done (committed on its own,
    so a killed run resumes from there), and progress is reported between groups."""
    digests = [text_sha256(t) for t in texts]
    cached = _cached_vectors(embedder.model_id, digests)
    vectors = np.zeros((len(texts), 384), dtype=np.float32)
    misses = []
    for i, digest in enumerate(digests):
        if digest in cached:
            vectors[i] = cached[digest]
        else:
            misses.append(i)
    order = sorted(misses, key=lambda i: len(texts[i]))
    done = len(texts) - len(misses)
    if progress:
        progress("embed", done, len(texts))  # the stage shows while its first group embeds
    for lo in range(0, len(order), EMBED_GROUP):
        idx = order[lo : lo + EMBED_GROUP]
        vectors[idx] = embedder.embed([texts[i] for i in idx])
        _cache_vectors(embedder.model_id, [digests[i] for i in idx], vectors[idx])
        if progress:
            progress("embed", done + lo + len(idx), len(texts))
    return vectors, len(texts) - len(misses)
