"""The one JSON error shape of the API, {"error": {"code", "message", "details"}}, and
DRF's exception handler that gives every caller error that shape: the application
errors services raise (catalog.errors, each kind with its status: catalog.web.status_of)
and DRF's own.

The MCP server shapes its errors with exception_handler too; config.api_errors answers
what no view handled."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from catalog.errors import ApplicationError
from catalog.web import status_of

_CODES = {
    exceptions.ParseError: "malformed_request",
    exceptions.ValidationError: "invalid_input",
    exceptions.AuthenticationFailed: "unauthenticated",
    exceptions.NotAuthenticated: "unauthenticated",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.Throttled: "rate_limited",
}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        set_rollback()  # as DRF does for its own: the request's atomic block writes nothing
        return Response(error_body(exc.code, exc.message, exc.details), status=status_of(exc))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # not a caller's error: note_uncaught() and ApiErrorMiddleware answer it
    if isinstance(exc, exceptions.ValidationError):
        body = error_body("invalid_input", "The request is not valid; see details.", {"fields": exc.detail})
    else:
        code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
        body = error_body(code, str(getattr(exc, "detail", exc)))
    return Response(body, status=response.status_code, headers={
        k: v for k, v in response.items() if k in ("WWW-Authenticate", "Allow", "Retry-After")
    })
