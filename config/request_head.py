"""What the web worker (config/gunicorn_worker.py) has of a request so far, judged from its
raw bytes: still arriving, whole (its head and, when small enough to hold, its body), or
over a limit. Pure: no Django, no sockets.

The limits are gunicorn's own (limit_request_line, limit_request_field_size,
limit_request_fields), applied at the same sizes gunicorn would, so a request gunicorn
would refuse is refused here first, while its target is still known and the answer can
be the API's JSON error rather than gunicorn's HTML page. So is a body the API would
refuse unread (config.middleware): chunked (411) or over the limit (413), before any of
it is awaited.
"""

from __future__ import annotations

from dataclasses import dataclass

CRLF = b"\r\n"
LENGTH_REQUIRED = 411
CONTENT_TOO_LARGE = 413
URI_TOO_LONG = 414
HEADERS_TOO_LARGE = 431


@dataclass(frozen=True)
class Limits:
    line: int  # the request line, in bytes
    field: int  # one header line, CRLF included
    fields: int  # header lines
    body: int  # the largest body held before the application runs; larger ones it reads itself


@dataclass(frozen=True)
class Verdict:
    ready: bool = False  # hand it to the application: the head is whole, and the body unless too large
    refuse: int = 0  # answer this status (411, 413, 414, 431) instead
    api: bool = False  # the target is under /api/
    expects_continue: bool = False  # the client waits for `100 Continue` before sending its body
    streams: bool = False  # ready with its body still to come: the application's thread reads it


def judge(data: bytes, limits: Limits) -> Verdict:
    """The verdict on a request's bytes so far (and on no more: a request pipelined behind
    it is the next one's)."""
    start = 2 if data.startswith(CRLF) else 0  # one empty line may precede it (RFC 9112 2.2)
    line_end = data.find(CRLF, start)
    line = data[start:] if line_end < 0 else data[start:line_end]
    api = _targets_api(line)
    if len(line) > limits.line:
        return Verdict(refuse=URI_TOO_LONG, api=api)
    if line_end < 0:
        return Verdict(api=api)
    head_end = data.find(CRLF + CRLF, line_end)
    if head_end == line_end:  # no header lines
        complete, partial = [], b""
    elif head_end > 0:
        complete, partial = data[line_end + 2:head_end].split(CRLF), b""
    else:
        *complete, partial = data[line_end + 2:].split(CRLF)
    if len(complete) > limits.fields or any(len(field) + 2 > limits.field for field in [*complete, partial]):
        return Verdict(refuse=HEADERS_TOO_LARGE, api=api)
    if head_end < 0:
        return Verdict(api=api)
    return _body_verdict(complete, len(data) - head_end - 4, limits, api=api, http11=line.endswith(b"/1.1"))


def _body_verdict(fields: list[bytes], received: int, limits: Limits, *, api: bool, http11: bool) -> Verdict:
    """Whole when the Content-Length's bytes are here. The API takes no chunked body and
    none over the limit (config.middleware), so those are refused before any byte of them
    is awaited. Anything else unusual (a malformed or repeated length, chunked outside the
    API) is handed over at once, for gunicorn to read or refuse."""
    lengths, chunked, expects = [], False, False
    for field in fields:
        name, _, value = field.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            lengths.append(value)
        chunked = chunked or name == b"transfer-encoding"
        expects = expects or (name == b"expect" and value == b"100-continue" and http11)
    if chunked and api:
        return Verdict(refuse=LENGTH_REQUIRED, api=api)
    if chunked or len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
        return Verdict(ready=True, api=api, streams=True)
    length = int(lengths[0]) if lengths else 0
    if length > limits.body and api:
        return Verdict(refuse=CONTENT_TOO_LARGE, api=api)
    if received >= length:
        return Verdict(ready=True, api=api)
    if length > limits.body:
        return Verdict(ready=True, api=api, streams=True)
    return Verdict(api=api, expects_continue=expects)


def _targets_api(line: bytes) -> bool:
    parts = line.split(b" ", 2)
    return len(parts) > 1 and parts[1].startswith(b"/api/")
