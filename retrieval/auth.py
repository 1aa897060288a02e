"""Bearer-token authentication for agents, and catalog scoping for every caller."""

from __future__ import annotations

from datetime import timedelta

from django.http import Http404
from django.utils import timezone
from rest_framework import authentication, exceptions

from catalog.models import Catalog
from retrieval.models import Agent, hash_token


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        try:
            token = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        return agent_for_token_hash(hash_token(token)), None

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'


LAST_USED_RESOLUTION = timedelta(minutes=1)


def agent_for_token_hash(token_hash: str) -> Agent:
    """The active agent holding this token (REST and MCP), its use recorded."""
    try:
        agent = Agent.objects.get(token_hash=token_hash, is_active=True)
    except Agent.DoesNotExist:
        raise exceptions.AuthenticationFailed("Invalid or revoked token.") from None
    _touch(agent)
    return agent


def _touch(agent: Agent) -> None:
    """Record use at most once a minute: not a write on every search."""
    now = timezone.now()
    if agent.last_used_at is None or now - agent.last_used_at >= LAST_USED_RESOLUTION:
        Agent.objects.filter(pk=agent.pk).update(last_used_at=now)


def visible_catalogs(caller):
    """Catalogs an agent is scoped to; staff and curators see every catalog."""
    if isinstance(caller, Agent):
        return Catalog.objects.filter(agents=caller)
    if getattr(caller, "is_staff", False) or caller.groups.filter(name="curator").exists():
        return Catalog.objects.all()
    return Catalog.objects.none()


def get_catalog_for_caller(caller, slug: str) -> Catalog:
    """The catalog named `slug` if this caller may search it, else 404 (never 403:
    a catalog outside the caller's scope is indistinguishable from a missing one)."""
    catalog = visible_catalogs(caller).filter(slug=slug).first()
    if catalog is None:
        raise Http404(f"No catalog {slug!r}.")
    return catalog
