"""Sign-in throttling around django-axes: whose address a sign-in comes from (behind
LECTERN_TRUSTED_PROXIES proxies), a lock on an address over every user name (password
spraying), and what a refused sign-in gets: the sign-in page again, saying why and for how
long, with 429 Too Many Requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from config.forwarded import forwarded_client


def client_address(request: HttpRequest) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: the address every lock and attempt row is kept under."""
    return forwarded_client(peer=request.META.get("REMOTE_ADDR"),
                            forwarded_for=request.META.get("HTTP_X_FORWARDED_FOR", ""),
                            trusted_proxies=settings.LECTERN_TRUSTED_PROXIES)


def address_failures(*, ip_address: str, since: datetime) -> int:
    """Failed sign-ins from one address under any user name: axes keeps a row per (name,
    address, browser) with its count and last failure, as it counts them for a pair."""
    rows = AccessAttempt.objects.filter(ip_address=ip_address, attempt_time__gte=since)
    total: int | None = rows.aggregate(total=Sum("failures_since_start"))["total"]
    return total or 0


def address_locked(request: HttpRequest) -> bool:
    """Whether the request's address has reached LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT within
    the cool-off. A request with no address (no peer) is never locked by it: all of those
    would share one count."""
    address: str | None = getattr(request, "axes_ip_address", None)
    if address is None:
        return False
    failures = address_failures(ip_address=address, since=get_cool_off_threshold(request))
    return failures >= settings.LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT


# Set on a request refused for its address alone, so the page names that lock (where the
# pair is locked too, its message comes first: it is what a person who forgot their own
# password needs to read).
ADDRESS_LOCKED = "lectern_address_locked"


class SigninHandler(AxesDatabaseHandler):
    """AXES_HANDLER: axes' database handler, which locks a (user name, address) pair at
    AXES_FAILURE_LIMIT, and besides it a lock on an address over all names at its own,
    larger limit (axes holds one limit for every lockout parameter). A refused attempt
    still counts, so an address that keeps trying stays locked."""

    def is_locked(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> bool:
        """Asked before the password is checked: a locked request is refused unchecked."""
        return bool(super().is_locked(request, credentials)) or address_locked(request)

    def user_login_failed(self, sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                          **kwargs: Any) -> None:
        """Axes records the failure (a refused attempt too) and marks the request locked when
        the pair has reached its limit; the address's limit is checked here as well, so the
        failure that reaches it and every refused one get the lockout page, as the pair's do."""
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or getattr(request, "axes_locked_out", False) or not address_locked(request):
            return
        request.axes_locked_out = True  # type: ignore[attr-defined]  # axes' own request attributes
        request.axes_credentials = credentials  # type: ignore[attr-defined]
        setattr(request, ADDRESS_LOCKED, True)


def _next(request: HttpRequest) -> str:
    """Where the person was going, kept only if it is on this site (as LoginView does)."""
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure())
    return wanted if safe else ""


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the sign-in form, empty, under a message naming the lock (the
    address's, or the name's from this address) and the cool-off."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return render(request, "registration/login.html", {
        "form": AuthenticationForm(request), "next": _next(request), "locked_out": True,
        "address_locked": getattr(request, ADDRESS_LOCKED, False), "cooloff_minutes": minutes,
    }, status=429)
