"""Under /api/ every error is the JSON error shape, whichever layer made it and whatever
DEBUG says: an unmatched URL, a Host the server does not answer to, a wrong method or
media type, a bug in a view or in a middleware (a 500 with an error id, logged once with
its traceback and never with the body or the token), and the database unreachable (503
with Retry-After; a plain 503 page outside /api/). GET /api/v1/health needs no token.

The database's real disappearance, in real processes, is in test_api_processes.py.
"""

from __future__ import annotations

import logging
import uuid

import psycopg
import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.db import OperationalError, connection
from rest_framework.test import APIClient

from catalog.models import Catalog
from config.api_errors import RETRY_AFTER_S, database_unreachable

SECRET = "body-marker-4b1d"  # in the request body: never in a log


@pytest.fixture(params=[False, True], ids=["debug-off", "debug-on"])
def debug(request, settings) -> bool:
    settings.DEBUG = request.param
    return request.param


@pytest.fixture
def client() -> APIClient:
    client = APIClient()
    client.raise_request_exception = False  # answer as a server would, not re-raise in the test
    return client


@pytest.fixture
def token(make_catalog, agent_token) -> str:
    return agent_token("errors-agent", [make_catalog("ops")])


def unreachable_database_error() -> OperationalError:
    """The error Django raises when Postgres cannot be reached: the driver's, wrapped."""
    with pytest.raises(OperationalError) as caught, connection.wrap_database_errors:
        psycopg.connect("host=/nonexistent port=1 dbname=lectern")
    return caught.value


def assert_json_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code and body["error"]["message"]
    return body["error"]


# --- not found, bad host, method, media type ------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/traces/not-a-uuid", "/api/v1/index-runs/-1", "/api/v1/no-such-thing",
                                  "/api/v1/search/", "/api/"])
def test_an_unmatched_api_url_is_a_json_404(client, token, debug, path):
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {token}")

    error = assert_json_error(response, 404, "not_found")
    assert path in error["message"]
    assert b"URLconf" not in response.content  # no list of URL patterns, even with DEBUG on
    assert response["X-Content-Type-Options"] == "nosniff"  # the inner layers' headers are kept


def test_an_unmatched_page_url_stays_html(client, db, debug):
    response = client.get("/no-such-page")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_host_not_allowed_is_a_json_400_under_api(client, token, debug):
    response = client.get("/api/v1/catalogs", HTTP_HOST="evil.example", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert_json_error(response, 400, "disallowed_host")


def test_wrong_method_media_type_and_accept_stay_json(client, token, debug):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    assert assert_json_error(client.get("/api/v1/search", **auth), 405, "method_not_allowed")
    assert client.get("/api/v1/search", **auth)["Allow"]
    assert_json_error(client.post("/api/v1/search", "query=x", content_type="text/plain", **auth), 415,
                      "unsupported_media_type")
    assert_json_error(client.get("/api/v1/catalogs", HTTP_ACCEPT="text/html", **auth), 406, "not_acceptable")
    assert_json_error(client.get("/api/v1/catalogs"), 401, "unauthenticated")
    assert_json_error(client.post("/api/v1/schema/"), 405, "method_not_allowed")  # a YAML renderer's error


# --- bugs --------------------------------------------------------------------------------------


def buggy_search(**kwargs):
    return kwargs["options"].missing_attribute  # AttributeError: a genuine bug


def test_a_bug_in_a_view_is_a_json_500_whose_id_is_logged_with_the_traceback(client, token, debug, monkeypatch,
                                                                              caplog):
    monkeypatch.setattr("retrieval.search.serializers.chunk_search", buggy_search)

    with caplog.at_level(logging.INFO):
        response = client.post("/api/v1/search", {"catalog": "ops", "query": SECRET}, format="json",
                               HTTP_AUTHORIZATION=f"Bearer {token}")

    error = assert_json_error(response, 500, "internal_error")
    error_id = error["details"]["error_id"]
    assert str(uuid.UUID(error_id)) == error_id
    assert len(response.content) < 300  # the error, not a debug page
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1, "one traceback per bug: Django's own record of it is dropped"
    assert error_id in logged[0].getMessage() and "POST /api/v1/search" in logged[0].getMessage()
    assert "missing_attribute" in caplog.text and "buggy_search" in caplog.text  # the traceback
    assert token not in caplog.text and SECRET not in caplog.text


def test_a_bug_in_a_middleware_is_a_json_500_under_api(client, token, debug, monkeypatch, caplog):
    def process_response(self, request, response):
        raise ZeroDivisionError("a middleware bug")

    monkeypatch.setattr(SessionMiddleware, "process_response", process_response)

    with caplog.at_level(logging.INFO):
        response = client.get("/api/v1/catalogs", HTTP_AUTHORIZATION=f"Bearer {token}")

    error_id = assert_json_error(response, 500, "internal_error")["details"]["error_id"]
    assert any(error_id in r.getMessage() and r.exc_info[0] is ZeroDivisionError for r in caplog.records)
    assert token not in caplog.text


# --- the database unreachable ----------------------------------------------------------------


def test_an_unreachable_database_is_told_from_other_database_errors(db):
    assert database_unreachable(unreachable_database_error())
    with pytest.raises(Exception) as syntax:  # noqa: B017 - any error a bad query gives
        with connection.cursor() as cursor:
            cursor.execute("SELEC 1")
    assert not database_unreachable(syntax.value)
    assert not database_unreachable(ValueError("no database here"))


@pytest.fixture
def database_gone(monkeypatch):
    """Every session lookup, a database read inside a middleware for sessions, raises
    what an unreachable Postgres raises."""
    error = unreachable_database_error()

    def process_request(self, request):
        raise error

    monkeypatch.setattr(SessionMiddleware, "process_request", process_request)


def test_an_unreachable_database_is_a_json_503_with_retry_after_under_api(client, token, debug, database_gone,
                                                                          caplog):
    with caplog.at_level(logging.INFO):
        response = client.post("/api/v1/search", {"catalog": "ops", "query": "x"}, format="json",
                               HTTP_AUTHORIZATION=f"Bearer {token}")

    assert_json_error(response, 503, "database_unavailable")
    assert response["Retry-After"] == str(RETRY_AFTER_S)
    assert not [r for r in caplog.records if r.exc_info], "an outage is not a bug: no traceback"
    assert [r.levelname for r in caplog.records if "database unavailable" in r.getMessage()] == ["WARNING"]


def test_an_unreachable_database_is_a_plain_503_page_elsewhere(client, db, debug, database_gone):
    response = client.get("/accounts/login/")

    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html") and b"Service unavailable" in response.content
    assert len(response.content) < 500
    assert response["Retry-After"] == str(RETRY_AFTER_S)


# --- health ------------------------------------------------------------------------------------


def test_health_needs_no_token_and_says_the_database_is_up(client, db, debug):
    response = client.get("/api/v1/health")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok" and body["database"]["up"] is True
    assert body["embeddings"]["mode"] in ("hybrid", "lexical-only")
    assert Catalog.objects.count() == 0
