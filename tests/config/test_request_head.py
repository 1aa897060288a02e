"""config.request_head: what the web worker makes of a request's bytes so far (pure)."""

from __future__ import annotations

from config.request_head import Limits, Verdict, judge

LIMITS = Limits(line=40, field=30, fields=3, body=100)
HEAD = b"POST /api/v1/search HTTP/1.1\r\nHost: x\r\n"


def test_a_request_is_ready_once_its_head_and_body_are_whole():
    assert judge(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n", LIMITS) == Verdict(ready=True, api=True)
    assert judge(b"GET / HTTP/1.1\r\n\r\n", LIMITS) == Verdict(ready=True)
    assert judge(b"\r\nGET / HTTP/1.1\r\n\r\n", LIMITS).ready  # one empty line before it is allowed
    assert judge(HEAD + b"Content-Length: 5\r\n\r\n{}", LIMITS) == Verdict(api=True)
    assert judge(HEAD + b"Content-Length: 5\r\n\r\n{}{}}GET", LIMITS) == Verdict(ready=True, api=True)


def test_it_waits_for_the_rest_of_a_head():
    for partial in (b"", b"GE", b"GET /api/v1/health HTTP/1.1\r\nHo", HEAD, HEAD + b"\r"):
        assert not judge(partial, LIMITS).ready and not judge(partial, LIMITS).refuse


def test_outside_the_api_a_body_too_large_to_hold_or_chunked_is_handed_over_to_be_read_by_its_thread():
    upload = b"POST /sources/3/upload/ HTTP/1.1\r\nHost: x\r\n"
    streams = Verdict(ready=True, streams=True)
    assert judge(upload + b"Content-Length: 101\r\n\r\n", LIMITS) == streams
    assert judge(upload + b"Transfer-Encoding: chunked\r\n\r\n", LIMITS) == streams
    # and what gunicorn refuses (a length twice, one not a number) goes to it at once
    assert judge(HEAD + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n", LIMITS).ready
    assert judge(HEAD + b"Content-Length: -1\r\n\r\n", LIMITS).ready


def test_under_the_api_a_body_chunked_or_too_large_is_refused_before_it_arrives():
    assert judge(HEAD + b"Transfer-Encoding: chunked\r\n\r\n", LIMITS) == Verdict(refuse=411, api=True)
    assert judge(HEAD + b"Content-Length: 101\r\n\r\n", LIMITS) == Verdict(refuse=413, api=True)
    assert judge(HEAD + b"Expect: 100-continue\r\nContent-Length: 101\r\n\r\n", LIMITS).refuse == 413
    assert judge(HEAD + b"Content-Length: 101\r\n\r\n" + b"a" * 101, LIMITS).refuse == 413  # even when whole
    assert judge(HEAD + b"Content-Length: 100\r\n\r\n" + b"a" * 100, LIMITS) == Verdict(ready=True, api=True)


def test_a_client_expecting_100_continue_is_noted():
    assert judge(HEAD + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n", LIMITS).expects_continue
    http10 = b"POST /api/v1/search HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n"
    assert not judge(http10, LIMITS).expects_continue  # ignored in HTTP/1.0 (RFC 9110 10.1.1)


def test_heads_over_gunicorns_limits_are_refused_knowing_their_target():
    long_line = b"GET /api/v1/health?q=" + b"a" * 30
    assert judge(long_line, LIMITS) == Verdict(refuse=414, api=True)  # before its end arrives
    assert judge(long_line + b" HTTP/1.1\r\n\r\n", LIMITS) == Verdict(refuse=414, api=True)
    assert judge(b"GET /x HTTP/1.1\r\nX: " + b"b" * 26 + b"\r\n\r\n", LIMITS) == Verdict(refuse=431)
    assert judge(b"GET /x HTTP/1.1\r\nX: " + b"b" * 26, LIMITS) == Verdict(refuse=431)  # still arriving
    assert judge(b"GET /x HTTP/1.1\r\nX: " + b"b" * 25 + b"\r\n\r\n", LIMITS).ready  # 30 bytes with its CRLF
    assert judge(b"GET /x HTTP/1.1\r\n" + b"A: 1\r\n" * 4 + b"\r\n", LIMITS) == Verdict(refuse=431)
    assert judge(b"GET /x HTTP/1.1\r\n" + b"A: 1\r\n" * 3 + b"\r\n", LIMITS).ready
