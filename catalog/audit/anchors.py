"""Checkpoints of the audit chain's head (pure: no Django).

A checkpoint names the newest entry (seq, hash) and the count of entries at a moment,
signed with HMAC-SHA256 under a key the database does not hold. The chain's own links
show an entry changed or removed in the middle; only something kept outside the
database shows entries cut from its tail (or cut, then grown again with other hashes):
an entry a checkpoint names must still be in the chain with the hash it recorded.

Each checkpoint also names the one written before it (its file name and a hash of its
content), inside what is signed: a checkpoint removed from the middle shows. The newest
ones removed show only against the log's own clock: entries left long without a
checkpoint (`staleness`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any, TypeGuard

KIND = "lectern.audit.checkpoint"
VERSION = 2  # 2: each names the checkpoint before it (`previous`)
KEY_LABEL = b"lectern.audit.checkpoint.v1"
HEX64 = frozenset("0123456789abcdef")


class CheckpointInvalid(ValueError):
    """A checkpoint file that does not hold: the message is one line saying why."""


@dataclass(frozen=True)
class Link:
    """The checkpoint written before: its file name and the sha256 of its bytes."""

    name: str
    sha256: str


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    count: int
    at: str  # ISO 8601, UTC
    previous: Link | None = None  # None: the first written in its folder

    def signed(self, key: bytes) -> dict[str, Any]:
        """The file's content: the fields, the key's id and the signature over both."""
        body = {"kind": KIND, "version": VERSION, **asdict(self), "key_id": key_id(key)}
        return {**body, "signature": _sign(body, key)}


def checkpoint_key(secret: str | bytes) -> bytes:
    """The signing key: derived from a configured secret, never the secret itself, so a
    checkpoint key and (say) SECRET_KEY's other uses stay apart. Bytes as Django allows
    in SECRET_KEY_FALLBACKS."""
    return hmac.new(secret.encode("utf-8") if isinstance(secret, str) else secret, KEY_LABEL, hashlib.sha256).digest()


def key_id(key: bytes) -> str:
    """A short name for the key (not the key): which key signed a checkpoint."""
    return hashlib.sha256(b"key-id\n" + key).hexdigest()[:12]


def _sign(body: Mapping[str, Any], key: bytes) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def checkpoint_parse(text: str, keys: Sequence[bytes]) -> Checkpoint:
    """The checkpoint a file holds, its signature checked against each of `keys` (the
    current key, then those it replaced); CheckpointInvalid if none matches."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CheckpointInvalid(f"not a checkpoint ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("version") != VERSION:
        raise CheckpointInvalid(f"not a checkpoint (kind {KIND}, version {VERSION} expected)")
    signature = data.pop("signature", None)
    if not isinstance(signature, str) or not any(hmac.compare_digest(signature, _sign(data, key)) for key in keys):
        raise CheckpointInvalid("signature does not match (forged, altered, or signed with another key)")
    seq, digest, count, at = data.get("seq"), data.get("hash"), data.get("count"), data.get("at")
    if not (isinstance(seq, int) and isinstance(count, int) and isinstance(at, str) and _is_hex64(digest)):
        raise CheckpointInvalid("not a checkpoint (seq, hash, count or at missing or malformed)")
    return Checkpoint(seq, digest, count, at, _link(data.get("previous")))


def _is_hex64(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) == 64 and set(value) <= HEX64


def _link(value: object) -> Link | None:
    if value is None:
        return None
    if not (isinstance(value, dict) and isinstance(value.get("name"), str) and _is_hex64(value.get("sha256"))):
        raise CheckpointInvalid("not a checkpoint (previous malformed)")
    return Link(value["name"], value["sha256"])


def first_gap(checkpoints: Sequence[tuple[Link, Checkpoint]]) -> str | None:
    """The first checkpoint that does not name the one before it, as one line; None
    when each does. `checkpoints`: (the file as a Link, what it holds), oldest first.
    The oldest may name one that is gone: older checkpoints may be archived, since the
    newest anchors every entry up to it."""
    for (before, _), (after, point) in pairwise(checkpoints):
        if point.previous is None:
            return (f"audit checkpoint {after.name} names no checkpoint before it, but {before.name} precedes it "
                    "(checkpoints removed or replaced)")
        if point.previous.name != before.name:
            return (f"audit checkpoint {after.name} names {point.previous.name} as the one before it, but "
                    f"{before.name} precedes it (checkpoints removed or replaced)")
        if point.previous.sha256 != before.sha256:
            return f"audit checkpoint {before.name} was replaced: {after.name} recorded other content for it"
    return None


def staleness(newest: tuple[str, Checkpoint] | None, uncovered: tuple[int, datetime] | None, *, now: datetime,
              minutes: int, folder: str) -> str | None:
    """One line when the oldest entry no checkpoint names (`uncovered`: its seq and
    time) was appended more than two intervals (`minutes` each) ago: checkpoints stopped
    while the log grew. `newest`: the newest checkpoint as (name, checkpoint), None when
    `folder` holds none. One interval is the schedule's; the second allows for a worker
    busy or restarting."""
    if uncovered is None or now - uncovered[1] <= timedelta(minutes=2 * minutes):
        return None
    seq, at = uncovered
    age = int((now - at) / timedelta(minutes=1))
    newest_said = (f"the newest, {newest[0]}, names seq {newest[1].seq} (newer checkpoints removed"
                   if newest else f"there is none in {folder} (checkpoints removed")
    return (f"audit checkpoints stale: seq {seq} (appended {at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}, {age} minutes "
            f"ago) and after have no checkpoint, over twice LECTERN_AUDIT_CHECKPOINT_MINUTES ({minutes}); "
            f"{newest_said}, or no worker writing them)")


def first_contradiction(checkpoints: Sequence[tuple[str, Checkpoint]], hashes: Mapping[int, str],
                        last_seq: int) -> str | None:
    """The first checkpoint ((name, checkpoint) in any order) the chain contradicts, as
    one line; None when all hold. `hashes`: the chain's hash at each checkpoint's seq
    (where it has that entry); `last_seq`: its newest entry's."""
    for name, point in sorted(checkpoints, key=lambda item: (item[1].seq, item[0])):
        if point.seq > last_seq:
            return (f"audit chain cut: checkpoint {name} names seq {point.seq}, but the chain ends at seq {last_seq} "
                    "(entries removed from its tail)")
        found = hashes.get(point.seq)
        if found != point.hash:
            return (f"audit chain rewritten: seq {point.seq} has hash {found}, checkpoint {name} recorded "
                    f"{point.hash} (entries at or before seq {point.seq} were changed)")
    return None
