"""System checks of how Lectern is deployed (`manage.py check`, and every command that
runs the checks: runserver, migrate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def app_role_is_not_the_owner(**kwargs: Any) -> list[CheckMessage]:
    """One role for the app and the migrations owns the tables, so the app could disable
    the audit log's triggers (docs/subsystems/governance.md, "Database roles")."""
    if settings.LECTERN_DATABASE_APP_ROLE != settings.LECTERN_DATABASE_OWNER["USER"]:
        return []
    return [Warning(
        f"the app connects as {settings.LECTERN_DATABASE_APP_ROLE or 'the default role'!s}, the role that owns the "
        "tables: it can disable the audit log's triggers",
        hint="set DATABASE_OWNER_URL to the owner's role and DATABASE_URL to a role that owns nothing "
             "(docs/deploying.md, Database roles)", id="lectern.W001")]


@register(deploy=True)
def audit_checkpoints_are_not_under_var(**kwargs: Any) -> list[CheckMessage]:
    """The checkpoints prove the audit log's tail was not cut by someone who controls the
    database: beside its data directory, the embedded server's superuser (COPY ... TO
    PROGRAM runs as the system user that owns var/) could delete them too. A deployment
    check (`check --deploy`): every manage.py command in a checkout runs without DEBUG
    (make setup's migrate, make lint), and a developer's var/ is where they belong."""
    folder = Path(settings.LECTERN_AUDIT_CHECKPOINT_DIR).resolve()
    if settings.DEBUG or not folder.is_relative_to((Path(settings.BASE_DIR) / "var").resolve()):
        return []
    return [Warning(
        f"the audit checkpoints are kept in {folder}, under var/ beside the embedded database's data directory: "
        "whoever controls the database on this host (a superuser runs programs as its system user) can delete "
        "them, and with them the proof of a cut tail",
        hint="set LECTERN_AUDIT_CHECKPOINT_DIR to a folder outside var/ that the database's system user cannot "
             "write, and back it up (docs/deploying.md, Backups)", id="lectern.W002")]
