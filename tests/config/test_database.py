"""Where the database is (config/database.py): settings read DATABASE_URL or the embedded
server's address without starting it, and manage.py starts the server only for commands
that may touch the database."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import database


@pytest.mark.parametrize("argv", [
    ["manage.py"], ["manage.py", "--help"], ["manage.py", "-h"], ["manage.py", "--version"],
    ["manage.py", "help", "migrate"], ["manage.py", "check"], ["manage.py", "check", "--deploy"],
    ["manage.py", "collectstatic", "--no-input"], ["manage.py", "spectacular", "--file", "/dev/null"],
])
def test_commands_that_read_only_settings_and_code_start_no_database(argv):
    assert not database.command_needs_database(argv)


@pytest.mark.parametrize("argv", [
    ["manage.py", "migrate"], ["manage.py", "runserver"], ["manage.py", "qcluster"], ["manage.py", "shell"],
    ["manage.py", "load_demo"], ["manage.py", "mcp"], ["manage.py", "check", "--database", "default"],
    ["manage.py", "makemigrations", "--check"],
])
def test_commands_that_may_touch_the_database_start_it(argv):
    assert database.command_needs_database(argv)


def test_database_url_wins_and_nothing_is_started(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://lectern:s%40cret@db.example.com:6432/lectern?sslmode=require")
    monkeypatch.setattr("config.embedded_pg.ensure_running", lambda *args: pytest.fail("started the embedded server"))

    settings = database.database_from_url(database.default_database_url())

    assert database.ensure_database() is None
    assert (settings["HOST"], settings["PORT"], settings["PASSWORD"], settings["OPTIONS"]) == (
        "db.example.com", "6432", "s@cret", {"sslmode": "require"})


def test_a_database_url_that_is_not_postgres_fails_loudly():
    with pytest.raises(ImproperlyConfigured, match="must be a postgres:// URL, not 'mysql'"):
        database.database_from_url("mysql://db/lectern")


def test_a_server_that_cannot_start_ends_the_command_in_one_line(monkeypatch):
    from config.embedded_pg import EmbeddedPostgresError  # here: a module importing it is integration

    def cannot_start(*args):
        raise EmbeddedPostgresError("embedded postgres: this CPU lacks avx2; set DATABASE_URL")

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr("config.embedded_pg.ensure_running", cannot_start)

    with pytest.raises(SystemExit, match="^embedded postgres: this CPU lacks avx2; set DATABASE_URL$"):
        database.ensure_database()


def test_the_embedded_servers_uri_names_its_socket_directory_as_host_and_port():
    settings = database.database_from_url("postgresql://lectern_app:@/lectern?host=/srv/lectern/var/pgdata&port=5432")

    assert {key: settings[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")} == {
        "NAME": "lectern", "USER": "lectern_app", "PASSWORD": "", "HOST": "/srv/lectern/var/pgdata",
        "PORT": "5432", "OPTIONS": {}}


def test_connection_options_parse_as_before(monkeypatch):
    # Given DB_CONN_MAX_AGE and a URL carrying libpq options, one of them twice
    monkeypatch.setenv("DB_CONN_MAX_AGE", "0")
    url = ("postgresql://lectern@db.example.com/lectern?sslmode=require&connect_timeout=5"
           "&options=-c%20statement_timeout%3D5s&pool=true&sslmode=verify-full")

    settings = database.database_from_url(url)

    # Then the connection settings are the engine's, the last value of a repeated option wins,
    # and pool=true reaches Django's pool as True (it needs CONN_MAX_AGE 0)
    assert settings["ENGINE"] == "django.db.backends.postgresql"
    assert (settings["CONN_MAX_AGE"], settings["CONN_HEALTH_CHECKS"], settings["PORT"]) == (0, True, "")
    assert settings["OPTIONS"] == {"sslmode": "verify-full", "connect_timeout": 5,
                                   "options": "-c statement_timeout=5s", "pool": True}


def test_a_url_without_a_database_name_names_postgres_and_conn_max_age_defaults_to_60(monkeypatch):
    monkeypatch.delenv("DB_CONN_MAX_AGE", raising=False)

    settings = database.database_from_url("postgres://db.example.com")

    assert (settings["NAME"], settings["HOST"], settings["CONN_MAX_AGE"]) == ("postgres", "db.example.com", 60)


def test_a_database_url_with_a_bad_port_fails_loudly_without_echoing_it():
    with pytest.raises(ImproperlyConfigured, match=r"^DATABASE_URL is not a valid URL \(its port\?\)$"):
        database.database_from_url("postgres://lectern:s3cret@db.example.com:99999/lectern")
