"""Standard Webhooks signatures, pure (no Django): the secret's format, the headers of a
signed message, and checking a received one.

A signature is `v1,` + base64(HMAC-SHA256(secret bytes, "{id}.{timestamp}.{body}")),
the secret being `whsec_` + base64 of random bytes. The standardwebhooks package
computes it; checking is done here rather than by its `verify`, which reads the wall
clock (a test cannot drive it), answers every failure with one exception (the API tells
a stale timestamp from a bad signature), and raises other errors on a malformed header.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
TOLERANCE = timedelta(minutes=5)  # how far a message's timestamp may be from now, either way
ID_MAX_CHARS = 255
HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def new_message_id() -> str:
    return "msg_" + secrets.token_urlsafe(18)


def signature(*, secret: str, message_id: str, at: datetime, body: str) -> str:
    """`v1,<base64>` for `body` sent as message `message_id` at `at` (whole seconds)."""
    return Webhook(secret).sign(message_id, at.astimezone(UTC), body)


def signed_headers(*, secret: str, message_id: str, at: datetime, body: str) -> dict[str, str]:
    return {"webhook-id": message_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": signature(secret=secret, message_id=message_id, at=at, body=body)}


@dataclass(frozen=True)
class Refusal(Exception):
    """Why a received message is refused: `code` as the API's error code."""

    code: str
    message: str


@dataclass(frozen=True)
class Signed:
    message_id: str
    at: datetime


def signed_parts(headers: Mapping[str, str], *, now: datetime) -> Signed:
    """The message's id and timestamp, once its headers are present and its timestamp
    within TOLERANCE of `now`. Raises Refusal missing_signature / stale_timestamp."""
    found = {name: headers.get(name, "") for name in HEADERS}
    missing = [name for name, value in found.items() if not value]
    if missing:
        raise Refusal("missing_signature", f"the Standard Webhooks headers are required; missing: {', '.join(missing)}")
    if len(found["webhook-id"]) > ID_MAX_CHARS:
        raise Refusal("bad_signature", f"webhook-id is longer than {ID_MAX_CHARS} characters")
    stamp = found["webhook-timestamp"]
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
        raise Refusal("stale_timestamp", "webhook-timestamp is not whole seconds since the epoch")
    at = datetime.fromtimestamp(int(stamp), tz=UTC)
    if abs(now - at) > TOLERANCE:
        raise Refusal("stale_timestamp", f"webhook-timestamp is more than {int(TOLERANCE.total_seconds())} seconds "
                                         "away from this server's clock")
    return Signed(found["webhook-id"], at)


def matching_secret(*, secrets_: Sequence[str], headers: Mapping[str, str], signed: Signed,
                    body: bytes) -> int:
    """The index in `secrets_` of the secret one of the header's `v1` signatures was
    made with. Raises Refusal bad_signature when none was."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("bad_signature", "the body is not UTF-8") from None
    offered = [part.partition(",")[2] for part in headers.get("webhook-signature", "").split(" ")
               if part.startswith("v1,")]
    for index, secret in enumerate(secrets_):
        expected = signature(secret=secret, message_id=signed.message_id, at=signed.at, body=text).partition(",")[2]
        if any(hmac.compare_digest(expected.encode(), candidate.encode()) for candidate in offered):
            return index
    raise Refusal("bad_signature", "no webhook-signature matches the body signed with this catalog's secret")
