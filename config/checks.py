"""System checks of how Lectern is deployed (`manage.py check`, and every command that
runs the checks: runserver, migrate)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def app_role_is_not_the_owner(**kwargs: Any) -> list[CheckMessage]:
    """One role for the app and the migrations owns the tables, so the app could disable
    the audit log's triggers (docs/architecture.md, "Database roles")."""
    if settings.LECTERN_DATABASE_APP_ROLE != settings.LECTERN_DATABASE_OWNER["USER"]:
        return []
    return [Warning(
        f"the app connects as {settings.LECTERN_DATABASE_APP_ROLE or 'the default role'!s}, the role that owns the "
        "tables: it can disable the audit log's triggers",
        hint="set DATABASE_OWNER_URL to the owner's role and DATABASE_URL to a role that owns nothing "
             "(README, Deploying)", id="lectern.W001")]
