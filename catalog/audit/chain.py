"""The hash chain over audit entries (pure: no Django).

An entry's hash is sha256 over the hash of the entry before it (GENESIS for the first)
and the canonical JSON of its fields (sorted keys, no spaces, UTF-8): changing any
field of any entry changes its hash, and since the next entry holds that hash as its
`prev_hash`, an edit shows even when its own hash was recomputed to match. Sequence
numbers run 1, 2, 3, ... without gaps, so a removed entry shows too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GENESIS = "0" * 64

# The fields a hash covers, beside prev_hash: every column of an entry but its hashes.
FIELDS = ("seq", "at", "actor_kind", "actor_id", "actor_name", "action", "request_id", "policy_id", "source_id",
          "agent_id", "fingerprint", "payload")


def timestamp(at: datetime) -> str:
    """`at` as hashed: UTC, to the microsecond (what Postgres keeps)."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def canonical(record: Mapping[str, Any]) -> bytes:
    fields = {name: record[name] for name in FIELDS}
    fields["at"] = timestamp(fields["at"]) if isinstance(fields["at"], datetime) else fields["at"]
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def entry_hash(record: Mapping[str, Any], prev_hash: str) -> str:
    digest = hashlib.sha256(prev_hash.encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical(record))
    return digest.hexdigest()


@dataclass(frozen=True)
class Break:
    """The first link that does not hold: which entry, what was expected and found."""

    seq: int
    field: str  # seq (an entry missing), prev_hash (the entry before changed) or hash (this entry changed)
    expected: str
    found: str

    def __str__(self) -> str:
        what = {"seq": "entries missing before it", "prev_hash": "the entry before it was changed or removed",
                "hash": "this entry was changed"}[self.field]
        return (f"audit chain broken at seq {self.seq}: {self.field} expected {self.expected}, "
                f"found {self.found} ({what})")


def first_break(records: Iterable[Mapping[str, Any]]) -> tuple[int, Break | None]:
    """Walk `records` (each with FIELDS, prev_hash and hash) in seq order: (entries
    read, the first broken link or None)."""
    expected_seq, prev, count = 1, GENESIS, 0
    for record in records:
        count += 1
        seq = record["seq"]
        if seq != expected_seq:
            return count, Break(seq, "seq", str(expected_seq), str(seq))
        if record["prev_hash"] != prev:
            return count, Break(seq, "prev_hash", prev, record["prev_hash"])
        recomputed = entry_hash(record, record["prev_hash"])
        if record["hash"] != recomputed:
            return count, Break(seq, "hash", recomputed, record["hash"])
        expected_seq, prev = seq + 1, record["hash"]
    return count, None
