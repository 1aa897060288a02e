"""What a service raises when it refuses what a caller asked for: plain application
errors, with no HTTP in them. The kind says what went wrong, `code` names the reason
(the API's error code), `details` what helps the caller; the API's exception handler
(catalog.rest.errors), the MCP tools and the pages map the kind to a status
(catalog.web.status_of)."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A caller's request refused."""

    default_code = "error"

    def __init__(self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details = details or {}


class InvalidError(ApplicationError):
    """The request itself is wrong: a value, a combination, a reference that names nothing."""

    default_code = "invalid_input"


class UnauthenticatedError(ApplicationError):
    """Who is asking could not be established (a missing or bad signature)."""

    default_code = "unauthenticated"


class ForbiddenError(ApplicationError):
    """The caller may not do this (its role, a policy, four eyes, a withheld source)."""

    default_code = "forbidden"


class NotFoundError(ApplicationError):
    """What the request names does not exist, or not for this caller."""

    default_code = "not_found"


class ConflictError(ApplicationError):
    """The request is valid but the state refuses it now (busy, changed, decided already)."""

    default_code = "conflict"
