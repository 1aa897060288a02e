"""Django's migrate, connected as the schema's owner, then dropping the partitions of
deleted catalogs (catalog.indexing.removal.partitions_prune) and granting the app's role
what it needs (config.database_roles). The app's own role may not create or alter a table,
so migrations cannot run as it; this is the one command that switches, and only for
its run (pytest-django's test database is migrated through it too)."""

from __future__ import annotations

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate

from catalog.indexing.removal import partitions_prune
from config.database_roles import app_role_grant, connected_as_owner


class Command(DjangoMigrate):
    help = f"{DjangoMigrate.help} Connects as the schema's owner (DATABASE_OWNER_URL) and grants the app's role."

    def handle(self, *args: Any, **options: Any) -> None:
        with connected_as_owner(options["database"]) as connection:
            super().handle(*args, **options)
            partitions_prune(connection=connection)
            app_role_grant(connection=connection)
