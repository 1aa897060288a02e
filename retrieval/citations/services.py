"""Keeping what was served: each passage a trace served, by its cite, and its exact
text once per fingerprint, so a cite resolves after its source changed (they go with
the traces: retrieval.traces.services.traces_purge)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from retrieval.citations.selectors import Citation
from retrieval.models import ServedPassage, ServedText, Trace
from retrieval.traces.services import insert_trace

# A text served again is marked served at most this often (an update per serving would
# rewrite a popular passage's row on every search).
SERVED_AT_RESOLUTION = timedelta(hours=1)

_RECORD = f"""
WITH durability AS (SELECT set_config('synchronous_commit', %(commit)s, true)),
texts AS (
    INSERT INTO {ServedText._meta.db_table} AS t (fingerprint, text, served_at)
    SELECT x.fingerprint, x.text, %(now)s FROM unnest(%(fingerprints)s::text[], %(texts)s::text[])
        AS x(fingerprint, text), durability
    ON CONFLICT (fingerprint) DO UPDATE SET served_at = EXCLUDED.served_at
    WHERE t.served_at < EXCLUDED.served_at - %(resolution)s
)
INSERT INTO {ServedPassage._meta.db_table}
    (trace_id, catalog_id, source, path, byte_start, byte_end, fingerprint, approval_id)
SELECT %(trace)s, p.catalog, p.source, p.path, p.byte_start, p.byte_end, p.fingerprint, p.approval
FROM unnest(%(catalogs)s::bigint[], %(sources)s::text[], %(paths)s::text[], %(starts)s::bigint[],
            %(ends)s::bigint[], %(passages)s::text[], %(approvals)s::bigint[])
    AS p(catalog, source, path, byte_start, byte_end, fingerprint, approval), durability
"""


def passages_record(*, trace: Trace, citations: Sequence[Citation]) -> None:
    """Record that the stored `trace` served these passages, their texts kept once per
    fingerprint: one statement, as durable as the trace's own (insert_trace)."""
    if not citations:
        return
    texts = {c.fingerprint: c.text for c in citations}  # one row each: ON CONFLICT touches a row once
    params: dict[str, Any] = {
        "commit": "off" if connection.get_autocommit() else "on", "now": timezone.now(),
        "resolution": SERVED_AT_RESOLUTION, "fingerprints": list(texts), "texts": list(texts.values()),
        "trace": trace.pk, "catalogs": [c.catalog_pk for c in citations], "sources": [c.source for c in citations],
        "paths": [c.path for c in citations], "starts": [c.byte_start for c in citations],
        "ends": [c.byte_end for c in citations], "passages": [c.fingerprint for c in citations],
        "approvals": [c.approval_id for c in citations]}
    with connection.cursor() as cursor:
        cursor.execute(_RECORD, params)


def served_trace_record(*, trace: Trace, citations: Sequence[Citation]) -> None:
    """Store a new trace and the passages it served."""
    insert_trace(trace)
    passages_record(trace=trace, citations=citations)

