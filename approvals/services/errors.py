"""The caller errors approvals' services raise: DomainError (catalog.rest.errors) with a
code each channel shows as it is (the API's JSON error shape, the web queue's message)."""

from __future__ import annotations

from typing import Any

from catalog.rest.errors import DomainError


def not_found(what: str) -> DomainError:
    return DomainError(f"no {what}", code="not_found", status_code=404)


def forbidden(message: str, *, code: str = "forbidden", **details: Any) -> DomainError:
    return DomainError(message, code=code, status_code=403, details=details)


def conflict(message: str, *, code: str, **details: Any) -> DomainError:
    return DomainError(message, code=code, status_code=409, details=details)


def invalid(message: str, **details: Any) -> DomainError:
    return DomainError(message, code="invalid_input", status_code=400, details=details)
