"""The application errors approvals' services raise (catalog.errors), with a code each
channel shows as it is (the API's JSON error shape, the web queue's message)."""

from __future__ import annotations

from typing import Any

from catalog.errors import ConflictError, ForbiddenError, InvalidError, NotFoundError


def not_found(what: str) -> NotFoundError:
    return NotFoundError(f"no {what}")


def forbidden(message: str, *, code: str = "forbidden", **details: Any) -> ForbiddenError:
    return ForbiddenError(message, code=code, details=details)


def conflict(message: str, *, code: str, **details: Any) -> ConflictError:
    return ConflictError(message, code=code, details=details)


def invalid(message: str, **details: Any) -> InvalidError:
    return InvalidError(message, details=details)
