"""One JSON error shape for the whole API: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
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

    def __init__(self, message: str, *, code: str, status_code: int = 400, details: dict | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.error_code = code
        self.details = details or {}


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def exception_handler(exc, context):
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: let Django report the 500
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


def json_error(code: str, message: str, status_code: int) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status_code)


def api_not_found(request, exception=None):
    if request.path.startswith("/api/"):
        return json_error("not_found", f"No API endpoint at {request.path}.", status.HTTP_404_NOT_FOUND)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def api_server_error(request):
    if request.path.startswith("/api/"):
        return json_error("internal_error", "An internal error occurred; it has been logged.", 500)
    from django.views.defaults import server_error

    return server_error(request)
