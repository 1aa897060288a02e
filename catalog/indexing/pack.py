"""Packing a whole catalog's BM25 blocks (catalog_termblock) from its forward rows in
numpy, for a bulk load: the forward rows stream out by COPY in binary, in chunk order,
a batch at a time; each batch is sorted by term (stable: chunk order kept) and cut into
blocks exactly as catalog.indexing.blocks.blocks_sql cuts them (a term's postings every
TERM_BLOCK_POSTINGS, never across a multiple of 2**31 in chunk ids); each term's last,
unfilled block waits for the next batch, so batching changes no block; the blocks go
back by binary COPY. Memory stays bounded by the batch, whatever the catalog's size.

SQL (blocks_sql) packs the same blocks in six times the time at 1M chunks (277 s against
41): it sorts the unnested postings twice, for two window functions, and aggregates three
ordered string_agg per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg

from catalog.models import TERM_BLOCK_POSTINGS

# Forward rows per batch: about 12M postings at 1M chunks, some 500 MB of arrays at the sort.
BATCH_ROWS = 250_000
# A forward row in COPY's binary format: a field count (int16), then each field's length
# (int4) and value: 0::int2 first, which puts every value after it on a 4-byte boundary
# (a row is 76 + 16n bytes), then chunk_id int8 and length int4, then terms and tfs as
# int4 arrays, each a 20-byte header (ndim, flags, element type, size, lower bound) and,
# per element, its length and value. In words of 4 bytes from the row's start:
_CHUNK_WORD, _LENGTH_WORD, _TERMS_WORD = 3, 6, 14  # the chunk id's high word; then low
_ROW_BYTES, _ROW_BYTES_PER_TERM = 76, 16
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # then flags and extension length, both 0
_COPY_TRAILER = b"\xff\xff"


@dataclass
class Postings:
    """Postings as parallel arrays."""

    terms: np.ndarray
    chunks: np.ndarray
    tfs: np.ndarray
    dls: np.ndarray

    def __len__(self) -> int:
        return len(self.terms)

    def take(self, index: np.ndarray) -> Postings:
        return Postings(self.terms[index], self.chunks[index], self.tfs[index], self.dls[index])

    @staticmethod
    def empty() -> Postings:
        return Postings(np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int32))

    @staticmethod
    def joined(parts: list[Postings]) -> Postings:
        return Postings(*(np.concatenate([getattr(p, f) for p in parts])
                          for f in ("terms", "chunks", "tfs", "dls")))


def rows_decode(rows: list[bytes]) -> Postings:
    """The postings of forward rows, each as COPY's binary format gives it (one row, no
    header), in the rows' order, each row's in its arrays' order."""
    sizes = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    counts = (sizes - _ROW_BYTES) // _ROW_BYTES_PER_TERM
    if np.any(sizes != _ROW_BYTES + _ROW_BYTES_PER_TERM * counts) or np.any(counts <= 0):
        raise ValueError("a forward row is not (int2, int8, int4, int4[n], int4[n]) with n > 0")
    words = np.frombuffer(b"".join(rows), dtype=">i4")
    starts = (np.cumsum(sizes) - sizes) // 4
    chunk_ids = (words[starts + _CHUNK_WORD].astype(np.int64) << 32
                 | words[starts + _CHUNK_WORD + 1].astype(np.int64) & 0xFFFFFFFF)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    terms_at = np.repeat(starts + _TERMS_WORD, counts) + 2 * within
    tfs_at = terms_at + np.repeat(2 * counts + 6, counts)  # past the terms and the tfs' length and header
    return Postings(terms=words[terms_at].astype(np.int32), chunks=np.repeat(chunk_ids, counts),
                    tfs=words[tfs_at].astype(np.int32), dls=np.repeat(words[starts + _LENGTH_WORD], counts))


@dataclass(frozen=True)
class Blocks:
    """Blocks cut from term-sorted postings: each one's start in them and its end."""

    starts: np.ndarray
    ends: np.ndarray


def blocks_cut(postings: Postings, size: int) -> Blocks:
    """Cut postings sorted by term, then chunk, into blocks of `size` per term and era
    (chunk id >> 31)."""
    n = len(postings)
    eras = postings.chunks >> 31
    group_starts = np.flatnonzero(np.r_[True, (postings.terms[1:] != postings.terms[:-1])
                                        | (eras[1:] != eras[:-1])])
    group_sizes = np.diff(np.r_[group_starts, n])
    rank = np.arange(n) - np.repeat(group_starts, group_sizes)
    starts = np.flatnonzero(rank % size == 0)
    return Blocks(starts, np.r_[starts[1:], n])


def _big_endian(values: np.ndarray) -> bytes:
    return values.astype(">i4").tobytes()


# The fixed part of a catalog_termblock row in COPY's binary format: the field count,
# then each field's length and value up to min_dl, then the length of chunk_ids.
_BLOCK_HEAD = np.dtype([
    ("fields", ">i2"), ("catalog_size", ">i4"), ("catalog", ">i8"), ("term_size", ">i4"), ("term", ">i4"),
    ("first_size", ">i4"), ("first", ">i8"), ("last_size", ">i4"), ("last", ">i8"), ("postings_size", ">i4"),
    ("postings", ">i4"), ("max_tf_size", ">i4"), ("max_tf", ">i4"), ("min_dl_size", ">i4"), ("min_dl", ">i4"),
    ("ids_size", ">i4"),
])


def blocks_copy_data(catalog_id: int, postings: Postings, blocks: Blocks) -> bytes:
    """The catalog_termblock rows of `blocks` (cut from `postings`, not necessarily all
    of them) in COPY's binary format (no signature, no trailer), in _BLOCKS_COPY's column order."""
    sizes = blocks.ends - blocks.starts
    starts = np.cumsum(sizes) - sizes  # each block's start in the postings it covers
    covered = postings.take(np.repeat(blocks.starts - starts, sizes) + np.arange(int(sizes.sum())))
    head = np.zeros(len(sizes), dtype=_BLOCK_HEAD)
    head["fields"] = 10
    for name, width in (("catalog", 8), ("term", 4), ("first", 8), ("last", 8), ("postings", 4), ("max_tf", 4),
                        ("min_dl", 4)):
        head[f"{name}_size"] = width
    head["catalog"], head["term"], head["postings"] = catalog_id, covered.terms[starts], sizes
    head["first"], head["last"] = covered.chunks[starts], covered.chunks[starts + sizes - 1]
    if len(starts):
        head["max_tf"] = np.maximum.reduceat(covered.tfs, starts)
        head["min_dl"] = np.minimum.reduceat(covered.dls, starts)
    head["ids_size"] = 4 * sizes
    heads, lengths = head.tobytes(), (4 * sizes).astype(">i4").tobytes()
    ids = _big_endian(covered.chunks - np.repeat(head["first"], sizes))
    tfs, dls = _big_endian(covered.tfs), _big_endian(covered.dls)
    width = _BLOCK_HEAD.itemsize
    parts: list[bytes] = []
    for k, (start, end) in enumerate(zip((4 * starts).tolist(), (4 * (starts + sizes)).tolist(), strict=True)):
        length = lengths[4 * k:4 * k + 4]
        parts += (heads[width * k:width * (k + 1)], ids[start:end], length, tfs[start:end], length, dls[start:end])
    return b"".join(parts)


class BlockPacker:
    """Packs batches of postings in chunk order into full blocks, holding back each
    term's unfilled last block until the next batch (or the end) fills or ends it."""

    def __init__(self, catalog_id: int, size: int = TERM_BLOCK_POSTINGS) -> None:
        self.catalog_id, self.size = catalog_id, size
        self.held: Postings | None = None
        self.written = 0  # blocks given out

    def add(self, batch: Postings, *, last: bool) -> bytes:
        postings = Postings.joined([self.held, batch]) if self.held is not None else batch
        postings = postings.take(np.argsort(postings.terms, kind="stable"))
        blocks = blocks_cut(postings, self.size)
        self.held = None
        if not last and len(blocks.starts):
            ends_group = np.r_[postings.terms[blocks.starts[1:]] != postings.terms[blocks.starts[:-1]], True]
            unfilled = ends_group & (blocks.ends - blocks.starts < self.size)
            self.held = postings.take(np.flatnonzero(np.repeat(unfilled, blocks.ends - blocks.starts)))
            blocks = Blocks(blocks.starts[~unfilled], blocks.ends[~unfilled])
        self.written += len(blocks.starts)
        return blocks_copy_data(self.catalog_id, postings, blocks)


_FORWARD_COPY = ("COPY (SELECT 0::int2, chunk_id, length, terms, tfs FROM catalog_postings "
                 "WHERE catalog_id = {catalog} AND chunk_id > {after} AND cardinality(terms) > 0 "
                 "ORDER BY chunk_id LIMIT {limit}) "
                 "TO STDOUT (FORMAT BINARY)")
_BLOCKS_COPY = ("COPY catalog_termblock (catalog_id, term_id, first_chunk_id, last_chunk_id, postings, max_tf, "
                "min_dl, chunk_ids, tfs, dls) FROM STDIN (FORMAT BINARY)")


def _forward_rows(cursor: psycopg.Cursor[tuple[object, ...]], catalog_id: int, after: int, limit: int) -> list[bytes]:
    """Up to `limit` of the catalog's forward rows after chunk id `after` that hold a term
    (a chunk of stop words holds none), in chunk order, each in COPY's binary format."""
    rows = []
    with cursor.copy(_FORWARD_COPY.format(catalog=int(catalog_id), after=int(after), limit=int(limit))) as copy:
        for data in copy:
            rows.append(bytes(data))
    if not rows or not rows[0].startswith(_COPY_SIGNATURE):
        raise ValueError("COPY did not give a binary stream")
    rows[0] = rows[0][len(_COPY_SIGNATURE):]  # the header comes with the first row
    if rows[-1] != _COPY_TRAILER:
        raise ValueError("COPY's binary stream did not end with its trailer")
    return [row for row in rows[:-1] if row]


def term_blocks_pack(cursor: psycopg.Cursor[tuple[object, ...]], catalog_id: int, *,
                     size: int = TERM_BLOCK_POSTINGS, batch_rows: int = BATCH_ROWS) -> int:
    """Insert the blocks of `size` postings of all the catalog's forward rows (it holding
    none); how many."""
    packer, after = BlockPacker(catalog_id, size), -1
    while True:
        rows = _forward_rows(cursor, catalog_id, after, batch_rows)
        last = len(rows) < batch_rows
        batch = rows_decode(rows) if rows else Postings.empty()
        if len(batch):
            after = int(batch.chunks[-1])
        data = packer.add(batch, last=last)
        with cursor.copy(_BLOCKS_COPY) as copy:
            copy.write(_COPY_SIGNATURE + data)  # psycopg adds the trailer
        if last:
            return packer.written
