"""The catalog write path: resolve a source's files, chunk, embed, write.

source_index() orchestrates:
  1. collect the source's documents (glob files under a source root, upload rows, inline text)
  2. chunk each document to fit the embedding model; analyse each chunk into postings
  3. embed all chunks in length-sorted batches (outside any transaction)
  4. in one transaction: replace the source's documents, chunks and postings, adjust
     term document frequencies and recompute the catalog's BM25 statistics
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from catalog import analysis
from catalog.chunker import Chunk as TextChunk
from catalog.chunker import chunk_text, fit_to_model
from catalog.diffing import Diff, StoredDocument, diff_documents, stat_unchanged
from catalog.embedder import Embedder, get_embedder, vector_literal
from catalog.models import Catalog, Document, ReferenceSource, UploadedFile, indexed_text
from catalog.paths import upload_path_problem

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst"}
EMBED_GROUP = 64  # texts per embedder call: progress is reported and vectors cached per group
HEADING_CHARS = 200  # longest title indexed as a chunk heading
Progress = Callable[[str, int, int], None]


class SourceError(Exception):
    """A source that cannot be read as configured (bad glob, bad upload, ...)."""


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class DocumentInput:
    path: str
    title: str
    text: str | None  # None: not read, unchanged by size and mtime (see catalog.diffing)
    size: int
    mtime: float | None = None
    sha256: str = ""
    replaces: int | None = None  # the stored document this one supersedes

    def __post_init__(self) -> None:
        if not self.sha256 and self.text is not None:
            self.sha256 = text_sha256(self.text)

    @property
    def loaded_text(self) -> str:
        """The text of a document being indexed or stored: always read by then (a full
        rebuild first reads what the stat cache skipped: _read_unread)."""
        if self.text is None:
            raise RuntimeError(f"{self.path}: its text was never read")
        return self.text


@dataclass
class Collected:
    documents: list[DocumentInput]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    fingerprint: str = ""


@dataclass
class IndexReport:
    documents: int  # in the source now
    chunks: int  # written by this run
    embedded: bool
    skipped: list[tuple[str, str]]
    timings: dict[str, float]
    reused_embeddings: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0

    @property
    def counts(self) -> dict[str, int]:
        return {"documents_added": self.added, "documents_changed": self.changed,
                "documents_removed": self.removed, "documents_unchanged": self.unchanged,
                "chunks_embedded": self.chunks - self.reused_embeddings if self.embedded else 0,
                "chunks_reused": self.reused_embeddings, "chunks_written": self.chunks}


# --- resolving files --------------------------------------------------------------------


def source_roots() -> list[Path]:
    return [Path(root).resolve() for root in settings.LECTERN_SOURCE_ROOTS]


def root_and_pattern(pattern: str) -> tuple[Path, str]:
    """The source root a glob reads from and the pattern relative to it.

    Refuses `..` anywhere and absolute patterns outside every configured root.
    """
    roots = source_roots()
    if not pattern.strip():
        raise SourceError("empty glob pattern")
    if ".." in PurePosixPath(pattern).parts or "\x00" in pattern:
        raise SourceError(f"glob {pattern!r} may not contain '..'")
    if not os.path.isabs(pattern):
        if not roots:
            raise SourceError("no source roots are configured (LECTERN_SOURCE_ROOTS)")
        return roots[0], pattern
    for root in roots:
        try:
            return root, str(PurePosixPath(pattern).relative_to(root))
        except ValueError:
            continue
    raise SourceError(f"glob {pattern!r} is outside the configured source roots")


def _glob_entries(pattern: str) -> tuple[list[tuple[str, Path, os.stat_result]], list[tuple[str, str]]]:
    """([(relative path, real path, stat)], [(relative path, reason skipped)]).

    Real paths are found by resolving each distinct parent directory once and only
    symlinked files themselves: a scan of 10,000 files costs one lstat each, not a
    full path resolution each.
    """
    root, relative = root_and_pattern(pattern)
    parents: dict[str, Path] = {}
    files, skipped = [], []
    for match in sorted(glob.glob(relative, root_dir=root, recursive=True)):
        folder, name = os.path.split(match)
        if folder not in parents:
            parents[folder] = (root / folder).resolve()
        real = parents[folder] / name
        try:
            info = os.lstat(real)
            if stat.S_ISLNK(info.st_mode):
                real = real.resolve()
                info = real.stat()
        except OSError:
            skipped.append((match, "unreadable or a dangling symlink"))
            continue
        if not real.is_relative_to(root):
            skipped.append((match, "symlink points outside the source root"))
        elif stat.S_ISREG(info.st_mode):
            files.append((match, real, info))
    return files, skipped


def glob_resolve(pattern: str) -> tuple[list[tuple[str, Path]], list[tuple[str, str]]]:
    """([(relative path, real path)], [(relative path, reason skipped)]) for a glob."""
    files, skipped = _glob_entries(pattern)
    return [(relative, real) for relative, real, _ in files], skipped


class SourceChanged(SourceError):
    """A glob source's files are no longer the ones it was indexed (and approved) from."""


def glob_listing(pattern: str, *, max_bytes: int) -> list[str]:
    """The relative paths glob_file_read serves for `pattern`: its files inside the
    source root (glob_resolve's rules) of at most `max_bytes`."""
    files, _ = _glob_entries(pattern)
    return [relative for relative, _, info in files if info.st_size <= max_bytes]


def glob_file_read(*, pattern: str, path: str, fingerprint_indexed: str, max_bytes: int) -> bytes | None:
    """The bytes of `path` when glob_listing(pattern) lists it, else None.

    Paths are looked up among the files the glob resolves, never joined to a root, so
    the root confinement is glob_resolve's alone. A file is served only while the
    source's files are the ones `fingerprint_indexed` was computed from (what was
    indexed, and what an approval is bound to), else SourceChanged; the file opened must
    be the one listed (same inode, size and mtime, not a symlink swapped in since).
    """
    files, _ = _glob_entries(pattern)
    found = next(((real, info) for relative, real, info in files if relative == path), None)
    if found is None or found[1].st_size > max_bytes:
        return None
    if fingerprint((relative, info.st_size, info.st_mtime) for relative, _, info in files) != fingerprint_indexed:
        raise SourceChanged(f"the files of {pattern!r} changed since they were indexed")
    real, listed = found
    try:
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SourceChanged(f"{path!r} cannot be opened as listed: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if (opened.st_ino, opened.st_size, opened.st_mtime_ns) != (listed.st_ino, listed.st_size, listed.st_mtime_ns):
            raise SourceChanged(f"{path!r} changed while it was being read")
        return handle.read()


def fingerprint(entries: Iterable[tuple[str, int, float | None]]) -> str:
    """sha256 over the sorted (relative path, size, mtime in microseconds) of a source's files."""
    digest = hashlib.sha256()
    for path, size, mtime in sorted(entries):
        digest.update(f"{path}\0{size}\0{int((mtime or 0) * 1_000_000)}\n".encode())
    return digest.hexdigest()


def _title_of(path: str, text: str) -> str:
    for line in text.splitlines()[:50]:
        if line.startswith("# "):
            return line[2:].strip()[:500]
    return PurePosixPath(path).stem.replace("-", " ").replace("_", " ")[:500]


def _glob_stats(source: ReferenceSource) -> tuple[list[tuple[str, Path, os.stat_result]], list[tuple[str, str]]]:
    return _glob_entries(source.location)


def source_fingerprint(*, source: ReferenceSource) -> str:
    """The fingerprint a source has now, computed without reading file contents."""
    if source.kind == ReferenceSource.Kind.GLOB:
        files, _ = _glob_stats(source)
        return fingerprint((relative, info.st_size, info.st_mtime) for relative, _, info in files)
    if source.kind == ReferenceSource.Kind.INLINE:
        return text_sha256(source.content)
    return uploads_fingerprint(UploadedFile.objects.filter(source=source).values_list("path", "sha256"))


def uploads_fingerprint(entries: Iterable[tuple[str, str]]) -> str:
    """sha256 over the sorted (path, content sha256) of an upload source's files."""
    entries = sorted(entries)
    if not entries:
        return ""
    digest = hashlib.sha256()
    for path, sha in entries:
        digest.update(f"{path}\0{sha}\n".encode())
    return digest.hexdigest()


def _read_glob(source: ReferenceSource, stored: dict[str, StoredDocument]) -> Collected:
    files, skipped = _glob_stats(source)
    documents, stats = [], []
    for relative, real, info in files:
        stats.append((relative, info.st_size, info.st_mtime))
        if real.suffix.lower() not in TEXT_SUFFIXES:
            skipped.append((relative, f"unsupported file type {real.suffix or '(none)'}; md, txt and rst are read"))
            continue
        known = stored.get(relative)
        if known is not None and stat_unchanged(known, info.st_size, info.st_mtime):
            documents.append(DocumentInput(relative, "", None, info.st_size, info.st_mtime, known.sha256))
            continue
        try:
            text = real.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            skipped.append((relative, f"not UTF-8 text (byte {exc.start})"))
            continue
        documents.append(DocumentInput(relative, _title_of(relative, text), text, info.st_size, info.st_mtime))
    return Collected(documents, skipped, fingerprint(stats))


def stored_documents(source: ReferenceSource) -> list[StoredDocument]:
    rows = Document.objects.filter(source=source).values_list("pk", "path", "content_sha256", "size", "mtime")
    return [StoredDocument(*row) for row in rows]


def source_collect(*, source: ReferenceSource, stored: list[StoredDocument] | None = None) -> Collected:
    """The documents a source holds now, with its fingerprint. Glob files whose size and
    mtime match `stored` are not read (their text is None)."""
    if source.kind == ReferenceSource.Kind.GLOB:
        return _read_glob(source, {doc.path: doc for doc in stored or []})
    if source.kind == ReferenceSource.Kind.INLINE:
        path = f"{source.slug}.md"
        doc = DocumentInput(path, source.name or source.slug, source.content, len(source.content.encode()))
        return Collected([doc], [], doc.sha256)
    rows = UploadedFile.objects.filter(source=source).order_by("path")
    documents = [DocumentInput(u.path, u.title, u.text, u.size, None, u.sha256) for u in rows]
    return Collected(documents, [], uploads_fingerprint((d.path, d.sha256) for d in documents))


# --- preparing chunks -------------------------------------------------------------------


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


# --- writing ----------------------------------------------------------------------------


def _delete_document_rows(cursor: CursorWrapper, document_pks: list[int]) -> None:
    """Remove documents with their chunks and postings, releasing their term counts."""
    if not document_pks:
        return
    cursor.execute(
        """
        UPDATE catalog_term t SET df = t.df - x.n
        FROM (SELECT unnest(p.terms) AS term_id, count(*) AS n
              FROM catalog_postings p JOIN catalog_chunk c ON c.id = p.chunk_id
              WHERE c.document_id = ANY(%s) GROUP BY 1) x
        WHERE t.id = x.term_id
        """,
        [document_pks],
    )
    # Term-major rows by their key, from each chunk's term ids (no scan of the index).
    cursor.execute(
        """
        DELETE FROM catalog_termposting t
        USING catalog_chunk c JOIN catalog_postings p ON p.chunk_id = c.id, unnest(p.terms) AS x(term_id)
        WHERE c.document_id = ANY(%s) AND t.term_id = x.term_id AND t.chunk_id = c.id
        """,
        [document_pks],
    )
    cursor.execute(
        "DELETE FROM catalog_postings p USING catalog_chunk c WHERE c.id = p.chunk_id AND c.document_id = ANY(%s)",
        [document_pks],
    )
    cursor.execute("DELETE FROM catalog_chunk WHERE document_id = ANY(%s)", [document_pks])
    cursor.execute("DELETE FROM catalog_document WHERE id = ANY(%s)", [document_pks])


def _upsert_terms(cursor: CursorWrapper, catalog_id: int, df: Counter[str]) -> dict[str, int]:
    if not df:
        return {}
    texts = sorted(df)  # a fixed order: concurrent writers lock term rows alike
    cursor.execute(
        """
        INSERT INTO catalog_term (catalog_id, text, df)
        SELECT %s, t, d FROM unnest(%s::text[], %s::int[]) AS x(t, d) ORDER BY t
        ON CONFLICT (catalog_id, text) DO UPDATE SET df = catalog_term.df + EXCLUDED.df
        RETURNING id, text
        """,
        [catalog_id, texts, [df[t] for t in texts]],
    )
    return {text: term_id for term_id, text in cursor.fetchall()}


def refresh_catalog_stats(cursor: CursorWrapper, catalog_id: int) -> None:
    """Recompute N, total length and the vocabulary's idf sum (rank_bm25's average idf)."""
    cursor.execute("DELETE FROM catalog_term WHERE catalog_id = %s AND df <= 0", [catalog_id])
    cursor.execute(
        "SELECT count(*), coalesce(sum(length), 0) FROM catalog_postings WHERE catalog_id = %s", [catalog_id]
    )
    n_chunks, total = cursor.fetchone()
    cursor.execute(
        """
        SELECT count(*), coalesce(sum(ln(%s - df + 0.5) - ln(df + 0.5)), 0)
        FROM catalog_term WHERE catalog_id = %s
        """,
        [float(n_chunks), catalog_id],
    )
    n_terms, idf_sum = cursor.fetchone()
    Catalog.objects.filter(pk=catalog_id).update(
        chunk_count=n_chunks, token_total=total, term_count=n_terms, idf_sum=idf_sum, updated_at=timezone.now()
    )


def _write_chunks(cursor: CursorWrapper, source: ReferenceSource, documents: list[Document],
                  prepared: list[PreparedChunk], vectors: np.ndarray | None) -> None:
    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence('catalog_chunk', 'id')) FROM generate_series(1, %s)", [len(prepared)]
    )
    ids = [row[0] for row in cursor.fetchall()]
    df: Counter[str] = Counter()
    for item in prepared:
        df.update(item.terms.keys())
    term_ids = _upsert_terms(cursor, source.catalog_id, df)
    prefix = f"{source.catalog.slug}:{source.slug}:"
    raw = cursor.cursor  # psycopg cursor: COPY is far faster than INSERTs here
    columns = ("id, key, catalog_id, source_id, document_id, ordinal, byte_offset, content, heading, token_count, "
               "embedding")
    with raw.copy(f"COPY catalog_chunk ({columns}) FROM STDIN") as copy:
        for i, item in enumerate(prepared):
            doc = documents[item.document]
            vector = vector_literal(vectors[i]) if vectors is not None else None
            copy.write_row((ids[i], f"{prefix}{doc.path}:{item.chunk.byte_offset}", source.catalog_id, source.id,
                            doc.id, item.chunk.ordinal, item.chunk.byte_offset, item.chunk.content,
                            item.heading, item.token_count, vector))
    with raw.copy("COPY catalog_postings (chunk_id, catalog_id, length, terms, tfs) FROM STDIN") as copy:
        for i, item in enumerate(prepared):
            terms = sorted(item.terms.items(), key=lambda kv: term_ids[kv[0]])
            copy.write_row((ids[i], source.catalog_id, item.length,
                            [term_ids[t] for t, _ in terms], [n for _, n in terms]))
    # The same postings term-major, in key order: BM25 reads these.
    cursor.execute(
        """
        INSERT INTO catalog_termposting (term_id, chunk_id, tf, dl)
        SELECT x.term_id, p.chunk_id, x.tf, p.length
        FROM catalog_postings p CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf)
        WHERE p.chunk_id = ANY(%s) ORDER BY 1, 2
        """,
        [ids],
    )


def source_apply_diff(source: ReferenceSource, collected: Collected, diff: Diff[DocumentInput],
                      prepared: list[PreparedChunk], vectors: np.ndarray | None) -> None:
    """Switch the source to its new state in one transaction: readers see the old rows
    or the new ones, never a mix; unchanged documents and their chunks are untouched."""
    with transaction.atomic():
        # One writer per catalog at a time: term frequencies and statistics stay exact.
        # no_key: rows that reference the catalog (runs, sources) can still be inserted.
        Catalog.objects.select_for_update(no_key=True).filter(pk=source.catalog_id).first()
        with connection.cursor() as cursor:
            _delete_document_rows(cursor, diff.stale_pks)
            documents = Document.objects.bulk_create([
                Document(catalog_id=source.catalog_id, source=source, path=d.path, title=d.title, text=d.loaded_text,
                         content_sha256=d.sha256, size=d.size, mtime=d.mtime)
                for d in diff.to_index
            ])
            for pk, size, mtime in diff.restat:
                Document.objects.filter(pk=pk).update(size=size, mtime=mtime)
            if prepared:
                _write_chunks(cursor, source, documents, prepared, vectors)
            refresh_catalog_stats(cursor, source.catalog_id)
        status = ReferenceSource.Status.READY if vectors is not None else ReferenceSource.Status.LEXICAL_ONLY
        ReferenceSource.objects.filter(pk=source.pk).update(
            status=status, fingerprint=collected.fingerprint, last_error=_skipped_note(collected.skipped),
            indexed_at=timezone.now(),
        )


def source_replace_rows(source: ReferenceSource, collected: Collected, prepared: list[PreparedChunk],
                        vectors: np.ndarray | None) -> None:
    """Replace all of a source's rows by `collected` (chunks prepared from all of it)."""
    diff = Diff(added=list(collected.documents), removed=[doc.pk for doc in stored_documents(source)])
    source_apply_diff(source, collected, diff, prepared, vectors)


def _skipped_note(skipped: list[tuple[str, str]]) -> str:
    return "\n".join(f"skipped {path}: {reason}" for path, reason in skipped)


def source_index(*, source: ReferenceSource, progress: Progress | None = None, full: bool = False) -> IndexReport:
    """Bring a source's index up to date; see the module docstring for the steps.

    Only added and changed documents are chunked and embedded (`full` re-does all). On
    failure the source keeps its previous rows and records the error.
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.INDEXING)
    try:
        stored = stored_documents(source)
        collected = source_collect(source=source, stored=stored)
        diff = diff_documents(stored, collected.documents, full=full)
        if full:
            _read_unread(source, diff.changed)
        timings["collect"] = time.perf_counter() - started
        _report(progress, "collect")
        embedder = get_embedder()
        prepared = prepare_chunks(source.catalog, diff.to_index, embedder)
        timings["chunk"] = time.perf_counter() - started - sum(timings.values())
        _report(progress, "chunk")
        vectors, reused = None, 0
        if embedder is not None:
            vectors, reused = embed_texts(embedder, [p.text for p in prepared], progress)
        timings["embed"] = time.perf_counter() - started - sum(timings.values())
        source_apply_diff(source, collected, diff, prepared, vectors)
        timings["write"] = time.perf_counter() - started - sum(timings.values())
        _report(progress, "write")
    except Exception as exc:
        ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.ERROR,
                                                             last_error=f"{type(exc).__name__}: {exc}")
        raise
    logger.info("indexed %s: +%d ~%d -%d =%d documents, %d chunks in %.2fs", source, len(diff.added),
                len(diff.changed), len(diff.removed), diff.unchanged, len(prepared), time.perf_counter() - started)
    return IndexReport(len(collected.documents), len(prepared), embedder is not None, collected.skipped, timings,
                       reused, len(diff.added), len(diff.changed), len(diff.removed), diff.unchanged)


def _report(progress: Progress | None, stage: str) -> None:
    if progress:
        progress(stage, 1, 1)


def _read_unread(source: ReferenceSource, documents: list[DocumentInput]) -> None:
    """A full rebuild needs the text of files the stat cache skipped."""
    unread = {doc.replaces: doc for doc in documents if doc.text is None and doc.replaces is not None}
    for old in Document.objects.filter(pk__in=list(unread)):
        unread[old.pk].text, unread[old.pk].title = old.text, old.title


# --- importing --------------------------------------------------------------------------


def parse_beir_jsonl(lines: Iterable[str]) -> list[DocumentInput]:
    """BEIR corpus lines ({"_id", "title"?, "text"}) as documents; the title is
    prepended to the text so that both are searchable. Raises SourceError naming the
    first bad line."""
    documents, seen = [], set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("_id"), str) or not row["_id"]:
            raise SourceError(f"line {number}: needs a non-empty string '_id'")
        title, text = row.get("title") or "", row.get("text") or ""
        if not isinstance(title, str) or not isinstance(text, str):
            raise SourceError(f"line {number}: 'title' and 'text' must be strings")
        if row["_id"] in seen:
            raise SourceError(f"line {number}: duplicate _id {row['_id']!r}")
        seen.add(row["_id"])
        body = f"{title}\n\n{text}" if title and text else title or text
        documents.append(DocumentInput(row["_id"], title[:500], body, len(body.encode("utf-8"))))
    return documents


def upload_source_ensure(*, catalog: Catalog, slug: str) -> ReferenceSource:
    """The upload source `slug` of `catalog`, created if missing."""
    source, _ = ReferenceSource.objects.get_or_create(
        catalog=catalog, slug=slug,
        defaults={"name": slug, "kind": ReferenceSource.Kind.UPLOAD, "location": slug},
    )
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {slug!r} exists and is a {source.kind} source, not an upload")
    return source


def uploads_replace(*, source: ReferenceSource, documents: list[DocumentInput]) -> None:
    with transaction.atomic():
        UploadedFile.objects.filter(source=source).delete()
        UploadedFile.objects.bulk_create([
            UploadedFile(source=source, path=d.path, title=d.title, text=d.loaded_text, sha256=d.sha256, size=d.size)
            for d in documents
        ])


def upload_put(*, source: ReferenceSource, path: str, title: str, text: str) -> UploadedFile:
    """Add or replace one file of an upload source (the next run indexes it). The API
    refuses a bad path with a 400 first: here it is an invariant."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources take files")
    if problem := upload_path_problem(path):
        raise ValueError(f"invalid upload path {path!r}: {problem}")
    doc = DocumentInput(path, title, text, len(text.encode("utf-8")))
    upload, _ = UploadedFile.objects.update_or_create(
        source=source, path=path, defaults={"title": title, "text": text, "sha256": doc.sha256, "size": doc.size})
    return upload


def upload_delete(*, source: ReferenceSource, path: str) -> bool:
    """Remove one file of an upload source; False when it has no such file."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources have files to delete")
    return UploadedFile.objects.filter(source=source, path=path).delete()[0] > 0


def inline_set(*, source: ReferenceSource, content: str) -> ReferenceSource:
    if source.kind != ReferenceSource.Kind.INLINE:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source, not inline")
    source.content = content
    source.full_clean()
    source.save(update_fields=["content", "updated_at"])
    return source
