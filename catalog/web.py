"""What every page view and admin action shares: who the person behind a request is,
the headers htmx sends (read by django-htmx; its response helpers set the ones it
reads back), and the HTTP status of an application error (the API's too)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from catalog.errors import (
    ApplicationError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    UnauthenticatedError,
)

# Each kind of application error's status, the most specific kind first.
STATUSES: tuple[tuple[type[ApplicationError], int], ...] = (
    (InvalidError, 400), (UnauthenticatedError, 401), (ForbiddenError, 403), (NotFoundError, 404),
    (ConflictError, 409))


def person(request: HttpRequest) -> User:
    """The signed-in person: the role decorators and the admin let no one else through."""
    assert isinstance(request.user, User)
    return request.user


def person_or_none(user: object) -> User | None:
    """`user` when it is a person; None for an agent (an API caller) or no one."""
    return user if isinstance(user, User) else None


def from_htmx(request: HttpRequest) -> HtmxDetails:
    """The request's htmx headers: true when htmx sent it (HX-Request), with the
    element it swaps into (`.target`), and the rest."""
    return HtmxDetails(request)


def status_of(error: ApplicationError) -> int:
    """The HTTP status an answer to `error` carries (400 for a kind not listed)."""
    return next((status for kind, status in STATUSES if isinstance(error, kind)), 400)
