"""The production server (`make serve`: python -m config.serve) under hostile clients, in
real processes on the test database, one gunicorn worker with two threads.

Requests whose body never comes hold no thread: with more of them open than the server
has threads, /api/v1/health still answers, while every one of them is verified to be
still open and unanswered; a late body is then served. A body that stops arriving is
answered with a JSON 408 once LECTERN_WEB_READ_TIMEOUT has passed, and nothing is
written. An over-long request line or header under /api/ answers the JSON error (414,
431), not gunicorn's HTML page, and so does a chunked or oversized API body (411, 413)
before any of it is awaited.

Uploads too large for the worker to hold (read by their thread) never take the last
thread: with more of them trickling in than the server has threads, health still
answers. One that keeps trickling is cut off with a 408 at the deadline, which a quiet
read would never reach. And a body the application never read is not taken for the next
request on a kept-alive connection. Every wait is on an answer or a condition; the
timeouts are failure safety nets only.
"""

from __future__ import annotations

import http.client
import json
import re
import select
import socket
import time
from collections.abc import Iterator

import pytest

from benchmarks.connections import Server, wait_until
from retrieval.models import MemoryEntry
from tests.config.test_serve import production_env

SAFETY_S = 60  # a failing server is given this long; a working one answers at once
WORKERS, THREADS = 1, 2
MAX_BODY = 1_048_576  # LECTERN_MAX_BODY_BYTES by default: the largest body the worker holds
PACE_S = 0.3  # between the bytes of a trickled body: well within any read timeout


@pytest.fixture
def serve(transactional_db, tmp_path) -> Iterator[object]:
    """serve(**env) -> a started production server with that environment added."""
    started: list[Server] = []

    def start(**extra: str) -> Server:
        env = production_env(tmp_path, LECTERN_WEB_WORKERS=str(WORKERS), LECTERN_WEB_THREADS=str(THREADS), **extra)
        env.pop("LECTERN_HTTPS")  # plain http, as the proxy speaks to it
        server = Server("serve", env=env, log=tmp_path / f"serve-{len(started)}.log")
        started.append(server)
        return server.start(timeout=180)

    yield start
    for server in started:
        if server.process is not None and server.process.poll() is None:
            server.stop()


def send(server: Server, head: bytes) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", server.port), timeout=SAFETY_S)
    client.sendall(head)
    return client


def answer(client: socket.socket) -> tuple[int, http.client.HTTPMessage, bytes]:
    response = http.client.HTTPResponse(client)
    response.begin()
    return response.status, response.headers, response.read()


def request(server: Server, head: bytes) -> tuple[int, http.client.HTTPMessage, bytes]:
    with send(server, head) as client:
        return answer(client)


def statuses(client: socket.socket, count: int) -> list[int]:
    """The statuses of the next `count` answers on a connection (read raw: one
    http.client response per answer could buffer the start of the next)."""
    received = b""
    while len(found := re.findall(rb"HTTP/1\.1 (\d{3}) ", received)) < count:
        chunk = client.recv(65536)
        assert chunk, f"closed after {received!r}"
        received += chunk
    return [int(status) for status in found]


def waiting_unanswered(client: socket.socket) -> bool:
    """Open, and the server has sent nothing on it (neither an answer nor a close)."""
    timeout = client.gettimeout()
    client.setblocking(False)  # a socket with a timeout would wait out its timeout instead
    try:
        client.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        client.settimeout(timeout)
    return False


def post_head(path: str, token: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


def trickled_upload(server: Server) -> socket.socket:
    """A form posted with a body too large for the worker to hold, so that a thread reads
    it (as a dashboard upload): to the sign-in page, which anyone may reach, with a
    CSRF cookie so that Django reads the form; its first bytes sent."""
    head = (f"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: csrftoken={'a' * 32}\r\n"
            f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {2 * MAX_BODY}\r\n\r\n").encode()
    return send(server, head + b'--b\r\nContent-Disposition: form-data; name="f"; filename="f.txt"\r\n\r\n')


def error_of(status: int, headers: http.client.HTTPMessage, body: bytes) -> tuple[int, str, str]:
    assert headers["Content-Type"] == "application/json", body[:300]
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "details"} and error["message"]
    return status, error["code"], headers["Connection"]


def test_bodies_that_never_arrive_hold_no_thread(serve, make_catalog, agent_token):
    server = serve(LECTERN_WEB_READ_TIMEOUT="600")  # far longer than the test: nothing expires
    token = agent_token("slow-agent", [make_catalog("slow")])
    body = json.dumps({"catalog": "slow", "query": "anything at all", "top_k": 1}).encode()

    # Given more requests than the server has threads, each with its head sent and its body never
    held = [send(server, post_head("/api/v1/search", token, len(body))) for _ in range(WORKERS * THREADS + 4)]

    # When a monitor asks for health, it is answered
    status, _, health = request(server, b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status == 200, health

    # while every slow request is still open and waiting
    assert [waiting_unanswered(client) for client in held] == [True] * len(held)
    # and a body that comes late is served
    held[0].sendall(body)
    status, _, found = answer(held[0])
    assert status == 200 and json.loads(found)["results"] == []
    for client in held:
        client.close()


def test_a_body_that_stops_arriving_is_answered_408_and_changes_nothing(serve, make_catalog, agent_token):
    server = serve(LECTERN_WEB_READ_TIMEOUT="1")
    token = agent_token("stalling-agent", [make_catalog("stall")])
    body = json.dumps({"user_id": "steve", "content": "prefers short answers"}).encode()

    with send(server, post_head("/api/v1/memory", token, len(body)) + body[:10]) as client:
        status, headers, refusal = answer(client)  # the server's deadline, not the test's, ends the wait

        assert error_of(status, headers, refusal) == (408, "request_timeout", "close")
        assert client.recv(1) == b""  # closed: what was sent of the body is not read as a next request
    assert MemoryEntry.objects.count() == 0
    status, _, _ = request(server, post_head("/api/v1/memory", token, len(body)) + body)
    assert status == 201  # the same request sent whole is stored


def test_over_long_request_lines_and_headers_under_api_answer_json(serve):
    server = serve()
    health = "/api/v1/health?q="

    for size in (5_000, 9_000):  # over Lectern's limit, and over gunicorn's own cap (8,190)
        line = f"GET {health}{'a' * size} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        assert error_of(*request(server, line))[:2] == (414, "uri_too_long")
    big_header = f"GET {health} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: {'b' * 9_000}\r\n\r\n".encode()
    assert error_of(*request(server, big_header))[:2] == (431, "request_header_fields_too_large")
    many_headers = "".join(f"X-H{i}: v\r\n" for i in range(120))
    assert error_of(*request(server, f"GET {health} HTTP/1.1\r\nHost: 127.0.0.1\r\n{many_headers}\r\n".encode()))[
        :2] == (431, "request_header_fields_too_large")

    # outside the API the answer stays a page
    status, headers, _ = request(server, f"GET /accounts/login/?q={'a' * 5_000} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 414 and headers["Content-Type"].startswith("text/html")
    # and a request within the limits is served
    assert request(server, f"GET {health}{'a' * 3_000} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())[0] == 200


def test_more_large_bodies_trickling_in_than_threads_leave_a_thread_for_everyone_else(serve):
    server = serve(LECTERN_WEB_READ_TIMEOUT="600")  # far longer than the test: nothing expires

    # Given more slow uploads than the server has threads, each still sending its body
    held = [trickled_upload(server) for _ in range(WORKERS * THREADS + 2)]
    for client in held:
        client.sendall(b"x")

    # When a monitor asks for health, it is answered
    status, _, health = request(server, b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status == 200, health

    # while every upload is still open and unanswered
    assert [waiting_unanswered(client) for client in held] == [True] * len(held)
    for client in held:
        client.close()


def test_a_large_body_trickling_in_is_cut_off_at_the_deadline_not_at_a_silence(serve):
    server = serve(LECTERN_WEB_READ_TIMEOUT="2")

    # Given an upload whose body keeps coming, a byte at a time, never silent for long
    with trickled_upload(server) as client:
        started = time.monotonic()
        while not select.select([client], [], [], PACE_S)[0]:  # until the server answers or closes
            assert time.monotonic() - started < 20, "the server is still reading a body it should have given up on"
            client.sendall(b"x")

        # Then the server's deadline, not a quiet read, ends it: a 408, and the connection closed
        status, headers, _ = answer(client)
        assert (status, headers["Connection"]) == (408, "close")
        assert client.recv(1) == b""
    assert request(server, b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")[0] == 200
    # logged in one line, without a traceback (the access log's line follows whatever Django logs)
    wait_until(lambda: '"POST /accounts/login/ HTTP/1.1"' in server.output(tail=None), SAFETY_S, "the access log")
    assert "did not arrive whole within 2 seconds" in server.output(tail=None)
    assert "Traceback" not in server.output(tail=None)


def test_chunked_and_oversized_bodies_under_api_are_refused_before_they_are_read(serve, make_catalog, agent_token):
    server = serve()
    token = agent_token("bulk-agent", [make_catalog("bulk")])
    search = f"POST /api/v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"

    # Given heads whose bodies are never sent: the refusal comes at once, and the connection closes
    with send(server, f"{search}Transfer-Encoding: chunked\r\n\r\n".encode()) as client:
        assert error_of(*answer(client)) == (411, "length_required", "close")
        assert client.recv(1) == b""
    with send(server, f"{search}Content-Length: {MAX_BODY + 1}\r\n\r\n".encode()) as client:
        status, headers, body = answer(client)
        assert error_of(status, headers, body) == (413, "payload_too_large", "close")
        assert json.loads(body)["error"]["details"] == {"max_bytes": MAX_BODY}
        assert client.recv(1) == b""
    # a client that waits for `100 Continue` gets the refusal instead
    with send(server, f"{search}Expect: 100-continue\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode()) as client:
        assert client.makefile("rb").read(12) == b"HTTP/1.1 413"


def test_a_body_the_application_never_read_is_not_taken_for_the_next_request(serve):
    server = serve()
    # a body of one long line, which read as the next request's head would be over-long (414)
    unread = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 6000\r\n\r\n" + b"a" * 6000
    health = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    with send(server, unread) as client:
        status, headers, _ = answer(client)
        assert (status, headers["Connection"]) == (200, "keep-alive")
        client.sendall(health)  # the next request on the kept-alive connection
        assert answer(client)[0] == 200
        client.sendall(unread + health)  # and the same two pipelined
        assert statuses(client, 2) == [200, 200]
