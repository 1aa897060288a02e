"""gunicorn's gthread worker, with each request gathered before a thread serves it.

The stock worker hands a new connection to a thread, which waits a few seconds for its
first bytes and then blocks reading the rest of the head and the body: clients that
send a head and never their body (slowly or on purpose) hold every thread, and the
server stops answering. Here the worker's main loop, which already waits on every idle
connection without a thread, also gathers each request's head and body (up to
LECTERN_MAX_BODY_BYTES: every body the API accepts), and a thread gets it only once it
is whole. What is not whole within LECTERN_WEB_READ_TIMEOUT seconds is answered 408 and
closed; a head over gunicorn's limits is answered 414 or 431 here, while its target is
known: in the API's JSON error shape under /api/, in gunicorn's HTML page elsewhere; so
is an API body the API would refuse unread (chunked: 411, over the limit: 413).

A larger body outside the API (a curator's upload of many files) is read by its thread,
all of it by the same deadline as any request, however slowly it trickles in (a
timeout per read would let a byte every few seconds hold the thread forever); past it
the client gets a 408 and the connection closes. At most all threads but one read such
bodies at once: the others wait, unread, in the main loop, so that slow uploads never
take the thread every other request needs.

Tied to gunicorn's gthread internals (TConn, the parser's unreader, the poller and
finish_request), so gunicorn is pinned; tests/config/test_serve_clients.py runs it for
real. Plain HTTP/1.1 only, as behind the proxy: with TLS or h2c configured in gunicorn
the stock behaviour is kept.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest
from gunicorn import util
from gunicorn.http.message import DEFAULT_MAX_HEADERFIELD_SIZE, MAX_HEADERS, MAX_REQUEST_LINE
from gunicorn.http.unreader import SocketUnreader
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
    waits: bool = False  # whole but for a body its thread reads, waiting for a thread that may


class BodyTimedOut(BadRequest):
    """Raised into the application reading a body past its request's deadline: a client's
    fault (Django answers BadRequest 400, logged as a warning, not a 500 with a
    traceback), and an exception rather than an early end of the body, which the
    application would take for the whole of it."""

    lectern_logged = True  # config.log_filters.LOGGED: the worker logs it in one line, Django not again


class DeadlineReader(SocketUnreader):  # type: ignore[misc]  # gunicorn has no annotations: Any
    """A connection's reader (the parser's unreader): every read a thread makes for a
    request ends by that request's deadline, each waiting at most the time left to it.
    Past the deadline, while the application reads, `on_expiry` answers the client and
    the read raises BodyTimedOut; after the application (gunicorn draining a body it left
    unread) the read raises TimeoutError, on which gunicorn closes the connection."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self.deadline = math.inf
        self.on_expiry: Callable[[], None] | None = None
        self.expired = False

    def chunk(self, size_hint: int | None = None) -> bytes:
        if (left := self.deadline - time.monotonic()) > 0:
            bound = self.sock.gettimeout()  # gunicorn's drain sets one of its own
            ours = bound is None or left <= bound
            self.sock.settimeout(left if ours else bound)
            try:
                data: bytes = super().chunk(size_hint)
                return data
            except TimeoutError:
                if not ours:
                    raise  # the caller's own, shorter bound
            finally:
                self.sock.settimeout(bound)
        if self.on_expiry is None:
            raise TimeoutError("the request's deadline has passed")
        if not self.expired:
            self.expired = True
            self.on_expiry()
        raise BodyTimedOut(f"The request did not arrive whole within {READ_TIMEOUT_S} seconds.")


class GatheringWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no annotations: Any
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gathering: dict[TConn, Gathering] = {}
        self.whole: set[TConn] = set()  # gathered, on their way to a thread
        self.streaming: set[TConn] = set()  # handed over with a body their thread reads itself
        # one thread is always left to requests gathered whole (health checks, the API)
        self.stream_slots = max(self.cfg.threads - 1, 1)
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
        """Run the application (a thread), which reads what is left of the body by the
        request's deadline or gets BodyTimedOut."""
        reader = conn.parser.unreader
        if not isinstance(reader, DeadlineReader):  # not gathered (TLS, h2c): stock
            return super().handle_request(req, conn)
        reader.on_expiry = partial(self._expire, conn, api=req.path.startswith("/api/"))
        reader.expired = False
        try:
            return super().handle_request(req, conn)
        finally:
            reader.on_expiry = None  # gunicorn's drain after the answer: past the deadline, close

    def finish_request(self, conn: TConn, fs: Any) -> None:
        """A thread is done with the connection (the main thread): a thread that read a
        body is free for the next upload waiting for one."""
        freed = conn in self.streaming
        self.streaming.discard(conn)
        super().finish_request(conn, fs)
        if freed:
            self._admit_waiting()

    def murder_pending(self) -> None:
        """Each turn of the main loop: requests not whole by their deadline are answered
        408, connections that sent nothing are closed; when the worker stops, at once."""
        super().murder_pending()
        now = time.monotonic()
        stopping = not self.alive or self.ppid != os.getppid()
        for conn, request in list(self.gathering.items()):
            if request.received and request.deadline <= now:  # an upload still waiting for a thread too
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
        elif verdict.ready and verdict.streams and len(self.streaming) >= self.stream_slots:
            self._wait_for_a_thread(conn)
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

    def _wait_for_a_thread(self, conn: TConn) -> None:
        """Leave the rest of its body unread (in the kernel's buffers, then the client's)
        until a thread that may read it is free, or its deadline passes."""
        self.gathering[conn].waits = True
        self.poller.unregister(conn.sock)

    def _admit_waiting(self) -> None:
        waiting = [conn for conn, request in self.gathering.items() if request.waits]
        if waiting and len(self.streaming) < self.stream_slots:
            self._hand_over(min(waiting, key=lambda conn: self.gathering[conn].deadline), streams=True)

    def _hand_over(self, conn: TConn, *, streams: bool) -> None:
        request = self._leave(conn)
        conn.init()  # the parser, unless it has one (plain HTTP/1.1: this reads nothing)
        reader = _deadline_reader(conn)
        reader.unread(bytes(request.received))
        reader.deadline = request.deadline
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

    def _expire(self, conn: TConn, *, api: bool) -> None:
        """The application still reads a body past the request's deadline: answer 408, and
        send nothing more, so whatever the application answers instead is dropped."""
        try:
            self._answer(conn, REQUEST_TIMEOUT, api=api)
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:  # the client is gone
            pass

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


def _deadline_reader(conn: TConn) -> DeadlineReader:
    """The connection's reader, made a DeadlineReader when its parser is new."""
    reader = conn.parser.unreader
    if not isinstance(reader, DeadlineReader):
        reader = DeadlineReader(conn.sock)
        reader.unread(conn.parser.unreader.take_buffered())
        conn.parser.unreader = reader
    return reader


def _json_error(status: int, reason: str, code: str, message: str, details: dict[str, int]) -> bytes:
    from catalog.rest.errors import error_body  # DRF: importable once the worker has set Django up

    body = json.dumps(error_body(code, message, details), separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body
