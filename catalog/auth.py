"""Who may read what: bearer-token authentication for agents, catalog scoping for every
caller, and the roles (curator, reviewer). Every layer asks these: the catalog's curator API, the
search and enrichment APIs, the MCP server and the dashboard."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, TypeAlias, TypeVar, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponseBase
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from catalog.agents import hash_token
from catalog.models import Agent, Catalog

# request.user: an agent (by its bearer token) or a person (by session), anonymous on
# pages that do not require sign-in.
RequestUser: TypeAlias = Agent | User | AnonymousUser


def request_user(request: Request) -> RequestUser:
    """request.user as it can be: the stubs type it as a Django user only, while
    AgentTokenAuthentication authenticates an Agent."""
    return request.user


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Agent, None] | None:
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

    def authenticate_header(self, request: Request) -> str:
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


CURATOR_GROUP = "curator"
REVIEWER_GROUP = "reviewer"


def has_role(user: User | AnonymousUser, group: str) -> bool:
    """Roles are Django groups (approvals migration 0003 creates them). A superuser holds
    every role, as Django gives it every permission; staff status alone is no role (it
    only lets a person into the admin, where group permissions then apply)."""
    if not user.is_authenticated:
        return False
    return user.is_superuser or user.groups.filter(name=group).exists()


def has_any_role(user: User | AnonymousUser, groups: tuple[str, ...]) -> bool:
    """has_role for any of `groups`, in one query."""
    if not user.is_authenticated:
        return False
    return user.is_superuser or user.groups.filter(name__in=groups).exists()


def roles_of(user: User | AnonymousUser) -> list[str]:
    """The roles `user` holds, as the page header names them."""
    if not user.is_authenticated:
        return []
    if user.is_superuser:
        return [CURATOR_GROUP, REVIEWER_GROUP]
    return sorted(user.groups.filter(name__in=(CURATOR_GROUP, REVIEWER_GROUP)).values_list("name", flat=True))


View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def role_required(*groups: str) -> Callable[[View], View]:
    """A page for people holding any of `groups`: anyone not signed in goes to the
    sign-in page (and comes back), a person without the role gets 403. Sessions only:
    an agent's bearer token signs no one in here."""
    def decorate(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not has_any_role(request.user, groups):
                raise PermissionDenied(f"this page is for the {' or '.join(groups)} role")
            return view(request, *args, **kwargs)

        return cast(View, login_required(guarded))

    return decorate


def is_curator(caller: RequestUser) -> bool:
    """An agent marked curator (it may reindex and edit its catalogs' sources), or a
    person in the curator group (who may also see every catalog)."""
    if isinstance(caller, Agent):
        return caller.is_curator
    return has_role(caller, CURATOR_GROUP)


def is_reviewer(caller: RequestUser) -> bool:
    """A person in the reviewer group: decides approval requests. Never an agent."""
    if isinstance(caller, Agent):
        return False
    return has_role(caller, REVIEWER_GROUP)


def visible_catalogs(caller: RequestUser) -> QuerySet[Catalog]:
    """Catalogs an agent is scoped to; curators and reviewers see every catalog."""
    if isinstance(caller, Agent):
        return Catalog.objects.live().filter(agents=caller)
    if is_curator(caller) or is_reviewer(caller):
        return Catalog.objects.live()  # a shadow is a tuning run's, never a listing's
    return Catalog.objects.none()


def get_catalog_for_caller(caller: RequestUser, slug: str) -> Catalog:
    """The catalog named `slug` if this caller may search it, else 404 (never 403:
    a catalog outside the caller's scope is indistinguishable from a missing one)."""
    catalog = visible_catalogs(caller).filter(slug=slug).first()
    if catalog is None:
        raise Http404(f"No catalog {slug!r}.")
    return catalog

