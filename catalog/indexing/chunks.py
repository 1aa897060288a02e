"""A document's chunks as they are indexed: cut by the chunker to what the embedding model
reads whole, each with its heading and its lexical postings; and the stamp that says how
they were cut, which every document keeps so that a later run rebuilds what was cut
otherwise (catalog.indexing.diffing)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from catalog import analysis
from catalog.embedder import Embedder
from catalog.indexing.chunker import CHUNKER_VERSION, chunk_text, fit_to_model
from catalog.indexing.chunker import Chunk as TextChunk
from catalog.models import Catalog, indexed_text
from catalog.sources.documents import DocumentInput

HEADING_CHARS = 200  # longest title indexed as a chunk heading


@dataclass
class PreparedChunk:
    document: int  # index into the document list
    chunk: TextChunk
    heading: str
    token_count: int
    terms: Counter[str]
    length: int

    @property
    def text(self) -> str:
        return indexed_text(self.heading, self.chunk.content)


def chunking_stamp(catalog: Catalog, embedder: Embedder | None) -> str:
    """What decides how prepare_chunks cuts the catalog's documents: the chunker's rules,
    the catalog's size and overlap, and the model (its token limit re-splits chunks, its
    vectors are stored; none: lexical only)."""
    model = f"{embedder.model_id}@{embedder.max_tokens}" if embedder is not None else "lexical"
    return f"chunker{CHUNKER_VERSION} {catalog.chunk_size}/{catalog.chunk_overlap} {model}"


def _approximate_tokens(texts: list[str]) -> list[int]:
    return [len(t.split()) + 2 for t in texts]


def _heading_counter(embedder: Embedder | None, title: str) -> Callable[[list[str]], list[int]]:
    """Token counts of texts as they will be embedded: with the title as heading."""
    count = embedder.count_tokens if embedder is not None else _approximate_tokens
    return lambda texts: count([indexed_text(title, text) for text in texts])


def prepare_chunks(catalog: Catalog, documents: list[DocumentInput], embedder: Embedder | None) -> list[PreparedChunk]:
    """Chunks of every document with their postings.

    A chunk that does not contain its document's title is indexed with the title as a
    heading (lexically and for the embedding), so a passage deep in a document still
    matches what the document is about; the token budget reserves room for it.
    """
    prepared = []
    for index, doc in enumerate(documents):
        title = doc.title.strip()[:HEADING_CHARS]
        pieces = chunk_text(doc.loaded_text, size=catalog.chunk_size, overlap=catalog.chunk_overlap)
        fitted = fit_to_model(doc.loaded_text, pieces, count_tokens=_heading_counter(embedder, title),
                              max_tokens=embedder.max_tokens if embedder else 10**9, overlap=catalog.chunk_overlap)
        for piece, tokens in fitted:
            heading = "" if not title or title in piece.content else title
            terms, length = analysis.term_frequencies(indexed_text(heading, piece.content))
            prepared.append(PreparedChunk(index, piece, heading, tokens, terms, length))
    return prepared
