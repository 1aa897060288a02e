"""What every page's header shows a signed-in person: their roles, the section they
are in, and for reviewers the number of requests waiting (templates/base.html). The
header spans every app's pages, so it lives here, in the layer that wires them."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest

from approvals.selectors.requests import pending_count
from catalog.auth import REVIEWER_GROUP, roles_of

# The header's section of a page: its URL name's first word (config/urls.py includes each app's).
SECTIONS = {"catalogs": "catalogs", "approvals": "approvals", "audit": "audit", "agents": "agents", "status": "status",
            "playground": "playground", "traces": "traces", "evaluations": "evaluations"}


def site_header(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    # A person only: on the HTML an API view renders (the schema's Swagger UI and Redoc
    # pages), DRF makes the request's user whoever its authentication found, an agent
    # by its bearer token included, and an agent has no roles and no header.
    if not isinstance(user, User) or not user.is_authenticated:
        return {}
    roles = roles_of(user)
    match = request.resolver_match
    section = SECTIONS.get((match.url_name or "").split("-")[0], "") if match is not None else ""
    header: dict[str, object] = {"user_roles": roles, "nav_section": section}
    if REVIEWER_GROUP in roles:
        header["pending_requests"] = pending_count()
    return header
