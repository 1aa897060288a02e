"""Request lines reach the logs without their query strings (end users' ids, searches)."""

from __future__ import annotations

import logging

import pytest

from config.log_filters import DropQueryStrings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("line", "args", "logged"), [
    ('"%s" %s %s', ("GET /api/v1/memory/export?user_id=steve%40example.com HTTP/1.1", 200, 512),
     '"GET /api/v1/memory/export HTTP/1.1" 200 512'),
    ('"%s" %s %s', ("GET /agents/3/memory/?user=ana&page=2 HTTP/1.1", 200, 90),
     '"GET /agents/3/memory/ HTTP/1.1" 200 90'),
    ('"%s" %s %s', ("GET /catalogs/ HTTP/1.1", 200, 10), '"GET /catalogs/ HTTP/1.1" 200 10'),
])
def test_runservers_request_lines_are_logged_without_their_query(line, args, logged):
    record = logging.LogRecord("django.server", logging.INFO, __file__, 1, line, args, None)

    assert DropQueryStrings().filter(record) is True
    assert record.getMessage() == logged
