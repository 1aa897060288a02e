"""Sign-in throttling around django-axes: whose address a sign-in comes from (behind
LECTERN_TRUSTED_PROXIES proxies), and what a refused sign-in gets (too many failures for
one user name from one address): the sign-in page again, saying why and for how long,
with 429 Too Many Requests."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from config.forwarded import forwarded_client


def client_address(request: HttpRequest) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: the address every lock and attempt row is kept under."""
    return forwarded_client(peer=request.META.get("REMOTE_ADDR"),
                            forwarded_for=request.META.get("HTTP_X_FORWARDED_FOR", ""),
                            trusted_proxies=settings.LECTERN_TRUSTED_PROXIES)


def _next(request: HttpRequest) -> str:
    """Where the person was going, kept only if it is on this site (as LoginView does)."""
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure())
    return wanted if safe else ""


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the sign-in form, empty, under a message naming the cool-off."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return render(request, "registration/login.html", {
        "form": AuthenticationForm(request), "next": _next(request), "locked_out": True,
        "cooloff_minutes": minutes,
    }, status=429)
