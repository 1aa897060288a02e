"""gunicorn's gthread worker, with each request gathered before a thread serves it.

The stock worker hands a new connection to a thread, which waits a few seconds for its
first bytes and then blocks reading the rest of the head and the body: clients that
send a head and never their body (slowly or on purpose) hold every thread, and the
server stops answering. Here the worker's main loop, which already waits on every idle
connection without a thread, also gathers each request's head and body (up to
LECTERN_MAX_BODY_BYTES: every body the API accepts), and a thread gets it only once it
is whole. What is not whole within LECTERN_WEB_READ_TIMEOUT seconds is answered 408 and
closed; a head over gunicorn's limits is answered 414 or 431 here, while its target is
known: in the API's JSON error shape under /api/, in gunicorn's HTML page elsewhere;
so is an API body the API would refuse unread (chunked: 411, over the limit: 413).
A larger body (a curator's upload of many files) is read by its thread as before, each
read bounded by the same timeout.

Tied to gunicorn's gthread internals (TConn, the parser's unreader, the poller and
finish_request), so gunicorn is pinned; tests/config/test_serve_clients.py runs it for
real. Plain HTTP/1.1 only, as behind the proxy: with TLS or h2c configured in gunicorn
the stock behaviour is kept.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import time
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from django.conf import settings
from gunicorn import util
from gunicorn.http.message import DEFAULT_MAX_HEADERFIELD_SIZE, MAX_HEADERS, MAX_REQUEST_LINE
from gunicorn.workers.gthread import TConn, ThreadWorker

from config.env import env_int
from config.request_head import (
    CONTENT_TOO_LARGE,
    HEADERS_TOO_LARGE,
    LENGTH_REQUIRED,
    URI_TOO_LONG,
    Limits,
    judge,
)

# Read when gunicorn loads this class, before any worker starts: a bad value stops the start.
READ_TIMEOUT_S = env_int("LECTERN_WEB_READ_TIMEOUT", 30, minimum=1)
REQUEST_TIMEOUT = 408
READ_SIZE = 64 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@dataclass
class Gathering:
    """A request arriving on a connection: its bytes so far, and until when it may take."""

    deadline: float
    received: bytearray
    api: bool = False
    continued: bool = False


class GatheringWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no annotations: Any
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gathering: dict[TConn, Gathering] = {}
        self.whole: set[TConn] = set()  # gathered, on their way to a thread
        self.streaming: set[TConn] = set()  # handed over with a body their thread reads itself
        self.gathers = not self.cfg.is_ssl and self.cfg.http2_cleartext == "off"

    @cached_property
    def limits(self) -> Limits:
        """gunicorn's limits as its parser applies them; the body bound is read once the
        worker has loaded the application (and so Django's settings)."""
        cfg = self.cfg
        fields = cfg.limit_request_fields if 0 < cfg.limit_request_fields <= MAX_HEADERS else MAX_HEADERS
        return Limits(line=min(cfg.limit_request_line, MAX_REQUEST_LINE) or MAX_REQUEST_LINE,
                      field=cfg.limit_request_field_size if cfg.limit_request_field_size > 0
                      else DEFAULT_MAX_HEADERFIELD_SIZE,
                      fields=fields, body=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)

    def enqueue_req(self, conn: TConn) -> None:
        """Every way a request reaches the thread pool passes here (a new connection, a
        kept-alive one readable again, bytes read ahead of the previous request): it is
        gathered first."""
        if conn in self.whole or not self.gathers:
            self.whole.discard(conn)
            super().enqueue_req(conn)
        else:
            self._gather(conn)

    def handle_request(self, req: Any, conn: TConn) -> Any:
        if conn in self.streaming:  # a body this thread reads itself: no read may wait forever
            self.streaming.discard(conn)
            conn.sock.settimeout(READ_TIMEOUT_S)
        return super().handle_request(req, conn)

    def murder_pending(self) -> None:
        """Each turn of the main loop: requests not whole by their deadline are answered
        408, connections that sent nothing are closed; when the worker stops, at once."""
        super().murder_pending()
        now = time.monotonic()
        stopping = not self.alive or self.ppid != os.getppid()
        for conn, request in list(self.gathering.items()):
            if request.received and request.deadline <= now:
                self._refuse(conn, REQUEST_TIMEOUT)
            elif not request.received and (stopping or request.deadline <= now):
                self._leave(conn)
                self.nr_conns -= 1
                conn.close()

    # --- gathering (the main thread) ----------------------------------------------------

    def _gather(self, conn: TConn) -> None:
        conn.sock.setblocking(False)
        # bytes read ahead of the previous request on this connection are this one's start
        ahead = conn.parser.unreader.take_buffered() if conn.parser else b""
        self.gathering[conn] = Gathering(deadline=time.monotonic() + READ_TIMEOUT_S, received=bytearray(ahead))
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
        if ahead:
            self._judge(conn, closed=False)

    def _on_readable(self, conn: TConn, _sock: socket.socket) -> None:
        try:
            chunk = conn.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self.gathering[conn].received += chunk
        self._judge(conn, closed=not chunk)

    def _judge(self, conn: TConn, *, closed: bool) -> None:
        request = self.gathering[conn]
        verdict = judge(bytes(request.received), self.limits)
        request.api = verdict.api
        if verdict.refuse:
            self._refuse(conn, verdict.refuse)
        elif verdict.ready:
            self._hand_over(conn, streams=verdict.streams)
        elif closed:  # the client went away before its request was whole
            self._leave(conn)
            self.nr_conns -= 1
            conn.close()
        elif verdict.expects_continue and not request.continued:
            # gunicorn sends its own before the application runs; a client reads any
            # number of 1xx answers (RFC 9110 15.2)
            request.continued = True
            try:
                conn.sock.send(CONTINUE)
            except OSError:
                pass

    def _hand_over(self, conn: TConn, *, streams: bool) -> None:
        request = self._leave(conn)
        conn.init()  # the parser, unless it has one (plain HTTP/1.1: this reads nothing)
        conn.parser.unreader.unread(bytes(request.received))
        conn.data_ready = True
        self.whole.add(conn)
        if streams:
            self.streaming.add(conn)
        self.enqueue_req(conn)

    def _refuse(self, conn: TConn, status: int) -> None:
        """Answered by a thread, as gunicorn answers a bad request: the write may block for
        a moment, and the close lingers so that the answer is not lost to a reset."""
        request = self._leave(conn)
        conn.sock.setblocking(True)
        future = self.tpool.submit(self._answer, conn, status, api=request.api)
        future.add_done_callback(lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def _leave(self, conn: TConn) -> Gathering:
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        return self.gathering.pop(conn)

    # --- refusals (a thread) ------------------------------------------------------------

    def _answer(self, conn: TConn, status: int, *, api: bool) -> bool:
        """Write the refusal; False: finish_request closes the connection. The target is
        not logged: its query may carry an end user's id."""
        reason, code, message, details = self._refusal(status)
        self.log.warning("Refused a request from %s: %s", conn.client[0] if conn.client else "", message)
        conn.sock.settimeout(5)
        if api:
            util.write(conn.sock, _json_error(status, reason, code, message, details))
        else:
            util.write_error(conn.sock, status, reason, message)
        return False

    def _refusal(self, status: int) -> tuple[str, str, str, dict[str, int]]:
        limits = self.limits
        if status == URI_TOO_LONG:
            return ("URI Too Long", "uri_too_long", f"The request line is over {limits.line} bytes.",
                    {"max_bytes": limits.line})
        if status == HEADERS_TOO_LARGE:
            return ("Request Header Fields Too Large", "request_header_fields_too_large",
                    f"A header line is over {limits.field} bytes, or there are over {limits.fields} of them.",
                    {"max_field_bytes": limits.field, "max_fields": limits.fields})
        if status == LENGTH_REQUIRED:
            return ("Length Required", "length_required",
                    "Send the body with a Content-Length; chunked bodies are not read.", {})
        if status == CONTENT_TOO_LARGE:
            return ("Content Too Large", "payload_too_large", f"Request body over {limits.body} bytes.",
                    {"max_bytes": limits.body})
        return ("Request Timeout", "request_timeout",
                f"The request did not arrive whole within {READ_TIMEOUT_S} seconds; nothing was done.",
                {"timeout_seconds": READ_TIMEOUT_S})


def _json_error(status: int, reason: str, code: str, message: str, details: dict[str, int]) -> bytes:
    from catalog.rest.errors import error_body  # DRF: importable once the worker has set Django up

    body = json.dumps(error_body(code, message, details), separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body
