"""What no view handled (a bug, the database down, an unmatched URL, a layer outside
DRF), noted here and answered by config.middleware.ApiErrorMiddleware, the outermost
layer, in the one JSON error shape (catalog.rest.errors, where DRF's exception handler shapes
what views raise)."""

from __future__ import annotations

import logging
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from catalog.rest.errors import error_body
from config.log_filters import NOTED

logger = logging.getLogger(__name__)


def json_error(code: str, message: str, status_code: int, details: dict[str, Any] | None = None) -> JsonResponse:
    """The error as a plain Django response, for layers outside DRF (compact, as DRF renders it)."""
    return JsonResponse(error_body(code, message, details), status=status_code,
                        json_dumps_params={"separators": (",", ":")})


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


# --- what no view handled ----------------------------------------------------------------

# Postgres errors that say the server cannot be reached now, rather than that a query
# is wrong: connection exceptions, and an administrator's or a crash's shutdown, or a
# server still starting.
_UNREACHABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03")
RETRY_AFTER_S = 10


def database_unreachable(exc: BaseException | None) -> bool:
    """True when `exc` (or what it wraps: Django wraps the driver's errors) says the
    database cannot be reached: the connection failed or was lost (the driver's own
    errors carry no SQLSTATE), or the server is shutting down or starting."""
    while exc is not None:
        if isinstance(exc, psycopg.Error):
            if exc.sqlstate is None:
                return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
            return exc.sqlstate.startswith(_UNREACHABLE_SQLSTATES)
        exc = exc.__cause__
    return False


@dataclass(frozen=True)
class Uncaught:
    """An exception no view handled, as the outermost middleware answers it."""

    database_down: bool
    error_id: str = ""


def _printable(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")  # a path cannot forge log lines


def note_uncaught(sender: object, request: HttpRequest, **kwargs: object) -> None:
    """got_request_exception receiver. Django sends it from inside the `except` that
    turns an exception raised by any layer (a view or a middleware) into a response,
    so this is the one place that sees them all, with their traceback.

    The database being unreachable is logged in one line (no traceback: it is not a
    bug); any other exception under /api/ is a bug, logged with an error id and its
    traceback, never the body or the headers (tokens never reach a log). The request
    keeps what the outermost middleware needs to answer.
    """
    exc = sys.exc_info()[1]
    where = f"{request.method} {_printable(request.path)}"
    if database_unreachable(exc):
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        logger.warning("database unavailable, answered 503: %s: %s", where, reason)
        setattr(request, NOTED, Uncaught(database_down=True))
    elif is_api(request):
        error_id = str(uuid.uuid4())
        logger.error("internal error %s: %s", error_id, where, exc_info=exc)
        setattr(request, NOTED, Uncaught(database_down=False, error_id=error_id))


# --- error responses the outermost middleware makes ---------------------------------------

_STATUS_CODES = {
    400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    406: "not_acceptable", 411: "length_required", 413: "payload_too_large", 415: "unsupported_media_type",
    429: "rate_limited", 500: "internal_error", 503: "unavailable",
}


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: the JSON error under /api/, a plain page elsewhere."""
    message = "The database is not reachable; try again shortly."
    response: HttpResponse
    if is_api(request):
        response = json_error("database_unavailable", message, 503)
    else:
        response = HttpResponse(f"<!doctype html><title>Service unavailable</title><h1>Service unavailable</h1>"
                                f"<p>{message}</p>", status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def api_error_response(request: HttpRequest, response: HttpResponseBase, noted: Uncaught | None) -> JsonResponse:
    """The JSON error for an API response some layer made in another format: Django's
    404 for an unmatched URL (an HTML page listing every URL pattern with DEBUG on),
    its 500 (the debug page with DEBUG on), a renderer's own error format."""
    status_code = response.status_code
    details: dict[str, Any] = {}
    if status_code == 404:
        message = f"No API endpoint at {request.path}."
    elif status_code == 500:
        if noted is None:  # a 500 made without an exception: no traceback to log
            noted = Uncaught(database_down=False, error_id=str(uuid.uuid4()))
            logger.error("internal error %s: %s %s answered 500 with no exception", noted.error_id,
                         request.method, _printable(request.path))
        message = "An internal error occurred; it has been logged with this error id."
        details = {"error_id": noted.error_id}
    else:
        message = f"{response.reason_phrase}."
    return json_error(_STATUS_CODES.get(status_code, "error"), message, status_code, details)
