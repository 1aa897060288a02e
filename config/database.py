"""Where the database is, as which roles, and starting the embedded Postgres where it is used.

Settings only read: DATABASE_URL, else where the embedded server listens (its
postmaster.pid, or where a start will put it). Two roles (docs/subsystems/governance.md,
"Database roles"): the app's (DATABASE_URL's, or the embedded APP_ROLE) and the schema
owner's (DATABASE_OWNER_URL's, or the embedded OWNER_ROLE), which `manage.py migrate`
connects as (config/management/commands/migrate.py). Importing them starts nothing, so
`manage.py --help`, `manage.py check`, mypy and the unit tests need no server. What
touches the database starts the embedded Postgres first, unless DATABASE_URL names
another server: manage.py (every command but those in NO_DATABASE_COMMANDS),
config.serve, config.wsgi and config.asgi, and the test session (tests/conftest.py,
before the test database is made).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config import embedded_pg
from config.env import env_bool, env_int

# manage.py commands that read only settings and code; every other command (Lectern's
# own included) may touch the database, so the embedded server is started for it.
NO_DATABASE_COMMANDS = frozenset({
    "help", "version", "check", "diffsettings", "collectstatic", "findstatic", "spectacular",
    "startapp", "startproject", "makemessages", "compilemessages",
})


def database_from_url(url: str) -> dict[str, Any]:
    """DATABASES' entry for a postgres:// URL, parsed by dj-database-url (decision 0048).
    What is left to us: only Postgres (Lectern needs pgvector); libpq's host= and port=
    query parameters (the embedded server's socket directory) as HOST and PORT, not
    OPTIONS (host= over the URL's host, the URL's port over port=, as before); PORT a
    string; NAME "postgres" where the URL names none; OPTIONS always there; the last of a
    repeated parameter. The rest (sslmode, connect_timeout, pool) stay in OPTIONS, digits
    and true/false read as the library reads them, so `?pool=true` reaches Django as True."""
    scheme = urlsplit(url).scheme
    if scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, not {scheme!r}")
    try:
        parsed = dj_database_url.parse(url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0),
                                       conn_health_checks=True)
    except dj_database_url.ParseError:
        raise ImproperlyConfigured("DATABASE_URL is not a valid URL (its port?)") from None
    settings: dict[str, Any] = dict(parsed)
    options = {key: value[-1] if isinstance(value, list) else value
               for key, value in settings.pop("OPTIONS", {}).items()}
    host, port = options.pop("host", None), options.pop("port", None)
    settings.update(NAME=settings["NAME"] or "postgres", HOST=str(host or settings["HOST"]),
                    PORT=str(settings["PORT"] or port or ""), OPTIONS=options)
    return settings


def default_database_url() -> str:
    """DATABASE_URL, else the embedded server's address for the app's role, read without
    starting it."""
    return os.environ.get("DATABASE_URL") or embedded_pg.known_uri()


def owner_database_url() -> str:
    """DATABASE_OWNER_URL; else with DATABASE_URL that same URL (one role for both: the
    app could disable the audit log's triggers, and `manage.py check` warns, see
    config.checks); else the embedded server's address for its owner role."""
    owner = os.environ.get("DATABASE_OWNER_URL", "")
    url = os.environ.get("DATABASE_URL", "")
    if owner and not url:
        raise ImproperlyConfigured("DATABASE_OWNER_URL is set without DATABASE_URL: set both (the app's role "
                                   "and the owner's), or neither for the embedded Postgres")
    return owner or url or embedded_pg.known_uri(role=embedded_pg.OWNER_ROLE)


def database_owner(app: dict[str, Any]) -> dict[str, str]:
    """The owner's USER and PASSWORD for the database `app` (DATABASES' entry) names: all
    that differs between the two connections, so switching one to the other
    (config.database_roles) touches those two keys only."""
    owner = database_from_url(owner_database_url())
    for key in ("NAME", "HOST", "PORT"):
        if owner[key] != app[key]:
            raise ImproperlyConfigured(f"DATABASE_OWNER_URL names {key} {owner[key]!r}, DATABASE_URL {app[key]!r}: "
                                       "both must name the same database (only the role and password differ)")
    if owner["USER"] != app["USER"] and not app["USER"]:
        raise ImproperlyConfigured("DATABASE_URL must name its role (postgres://ROLE:...@...) when "
                                   "DATABASE_OWNER_URL is set: migrate grants that role what the app needs")
    return {"USER": owner["USER"], "PASSWORD": owner["PASSWORD"]}


def command_needs_database(argv: Sequence[str]) -> bool:
    """Whether `manage.py *argv[1:]` may touch the database (no command, or an option
    such as --help or --version, prints and exits)."""
    command = argv[1] if len(argv) > 1 else "help"
    if command == "check":
        return any(arg.startswith("--database") for arg in argv[2:])
    return not command.startswith("-") and command not in NO_DATABASE_COMMANDS


# Why a production server will not start without DATABASE_URL (it would start the
# embedded Postgres under var/ and serve an empty Lectern that looks healthy).
NO_PRODUCTION_DATABASE = ("DATABASE_URL is not set: a production server (DEBUG off) serves only the database "
                          "it is given, never the embedded development Postgres (docs/deploying.md); "
                          "for development, `make run`")


def server_database() -> str | None:
    """What a server's entry point (config.serve, config.wsgi, config.asgi, gunicorn's
    settings) calls before it serves: in development (DEBUG on: `make run`, runserver)
    ensure_database(); in production (DEBUG off: `make serve`, gunicorn) DATABASE_URL or
    an exit with NO_PRODUCTION_DATABASE, starting nothing."""
    if env_bool("DEBUG", False):
        return ensure_database()
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit(NO_PRODUCTION_DATABASE)
    return None


def ensure_database() -> str | None:
    """Start the embedded Postgres unless DATABASE_URL is set; returns its URI (None with
    DATABASE_URL). A server that cannot start ends the process with one line saying
    what to do, not a traceback."""
    if os.environ.get("DATABASE_URL"):
        return None
    try:
        return embedded_pg.ensure_running()
    except embedded_pg.EmbeddedPostgresError as exc:
        raise SystemExit(str(exc)) from None
