"""A document's chunks as they are indexed: cut by the chunker to what the embedding model
reads whole, each with its heading and its lexical postings; and the stamp that says how
they were cut, which every document keeps so that a later run rebuilds what was cut
otherwise (catalog.indexing.diffing), and which a run without a model reads leniently
(CurrentCut)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from catalog import analysis
from catalog.embedder import Embedder
from catalog.indexing.chunker import CHUNKER_VERSION, chunk_text, fit_to_model
from catalog.indexing.chunker import Chunk as TextChunk
from catalog.models import Catalog, indexed_text
from catalog.sources.documents import DocumentInput
from catalog.sources.locators import chunk_locator, document_positions

HEADING_CHARS = 200  # longest title indexed as a chunk heading


@dataclass
class PreparedChunk:
    document: int  # index into the document list
    chunk: TextChunk
    heading: str
    token_count: int
    terms: Counter[str]
    length: int
    locator: dict[str, Any] = field(default_factory=dict)  # where it sits (catalog.sources.locators)

    @property
    def text(self) -> str:
        return indexed_text(self.heading, self.chunk.content)


LEXICAL = "lexical"  # the fit of chunks cut with no model loaded: unfitted, without vectors


def chunking_stamp(catalog: Catalog, embedder: Embedder | None) -> str:
    """The stamp a run with `embedder` writes on the documents it cuts: how chunk_text
    cut them (the chunker's rules, the catalog's size and overlap), then what
    fit_to_model fitted them to (the model's id and token limit; its vectors are stored)
    or `lexical` (no model was loaded: chunks unfitted and without vectors)."""
    model = f"{embedder.model_id}@{embedder.max_tokens}" if embedder is not None else LEXICAL
    return f"{_cut(catalog)} {model}"


def _cut(catalog: Catalog) -> str:
    return f"chunker{CHUNKER_VERSION} {catalog.chunk_size}/{catalog.chunk_overlap}"


@dataclass(frozen=True)
class CurrentCut:
    """Which stored documents a run leaves alone as cut the way it would cut them.

    With a model loaded, only those stamped exactly as it would stamp them: a document
    cut lexically (while the model was down or switched off) or for another model is cut
    again, fitted to the model and embedded. With none loaded, every document cut by the
    same chunker, size and overlap, whatever it was fitted to: a worker whose model
    failed to load must not re-cut documents (dropping their vectors) merely because it
    has no model; what it cuts for other reasons is stamped `lexical`, so the model,
    once back, embeds it.
    """

    stamp: str  # what the run writes on the documents it cuts
    cut: str  # the stamp's chunker, size and overlap
    model_bound: bool  # a model is loaded: the stamp's model part must match too

    def holds(self, stamp: str) -> bool:
        return stamp == self.stamp if self.model_bound else stamp.startswith(f"{self.cut} ")

    def held(self) -> Q:
        """The documents `holds` accepts, as a filter."""
        return Q(chunking=self.stamp) if self.model_bound else Q(chunking__startswith=f"{self.cut} ")


def current_cut(catalog: Catalog, embedder: Embedder | None) -> CurrentCut:
    return CurrentCut(chunking_stamp(catalog, embedder), _cut(catalog), embedder is not None)


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
    matches what the document is about; the token budget reserves room for it. Each
    chunk is located in its document (its lines, pages or slides, and heading path).
    """
    prepared = []
    for index, doc in enumerate(documents):
        positions = document_positions(doc.path, doc.loaded_text, doc.locator)
        title = doc.title.strip()[:HEADING_CHARS]
        pieces = chunk_text(doc.loaded_text, size=catalog.chunk_size, overlap=catalog.chunk_overlap)
        fitted = fit_to_model(doc.loaded_text, pieces, count_tokens=_heading_counter(embedder, title),
                              max_tokens=embedder.max_tokens if embedder else 10**9, overlap=catalog.chunk_overlap)
        for piece, tokens in fitted:
            heading = "" if not title or title in piece.content else title
            terms, length = analysis.term_frequencies(indexed_text(heading, piece.content))
            locator = chunk_locator(doc.locator, positions.locate(piece.start, piece.end))
            prepared.append(PreparedChunk(index, piece, heading, tokens, terms, length, locator))
    return prepared
