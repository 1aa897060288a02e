"""The one JSON error shape of the API, {"error": {"code", "message", "details"}}, and
DRF's exception handler that gives every caller error that shape: the domain errors
services raise (DomainError, with their own code and status) and DRF's own.

Below every app: catalog and retrieval raise DomainError and the MCP server shapes its
errors with exception_handler; config.api_errors answers what no view handled."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

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


class DomainError(exceptions.APIException):
    """A caller error raised by a service, with its own code and status."""

    def __init__(self, message: str, *, code: str, status_code: int = 400, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.error_code = code
        self.details = details or {}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # not a caller's error: note_uncaught() and ApiErrorMiddleware answer it
    if isinstance(exc, DomainError):
        body = error_body(exc.error_code, str(exc.detail), exc.details)
    elif isinstance(exc, exceptions.ValidationError):
        body = error_body("invalid_input", "The request is not valid; see details.", {"fields": exc.detail})
    else:
        code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
        body = error_body(code, str(getattr(exc, "detail", exc)))
    return Response(body, status=response.status_code, headers={
        k: v for k, v in response.items() if k in ("WWW-Authenticate", "Allow", "Retry-After")
    })
