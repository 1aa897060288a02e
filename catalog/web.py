"""What every page view and admin action shares: who the person behind a request is,
and the headers htmx sends (read by django-htmx; its response helpers set the ones it
reads back)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


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
