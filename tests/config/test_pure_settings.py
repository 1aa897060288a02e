"""Importing the settings starts no Postgres, nor do `manage.py --help` and `manage.py
check`: each runs in a child process, with no DATABASE_URL, pointed at a throwaway data
directory (LECTERN_PGDATA) where no server runs, and no postgres appears there.
(tests/config/test_embedded_pg.py: a command that uses the database starts it.)"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
SHOW_DATABASE = ("import django; django.setup(); from django.conf import settings; "
                 "db = settings.DATABASES['default']; print(db['HOST'], db['PORT'], db['NAME'])")


def postmasters_on(pgdata: Path) -> list[psutil.Process]:
    """Postgres processes whose command line names `pgdata` (other checkouts' servers
    may come and go meanwhile: only this directory's count)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and str(pgdata) in " ".join(process.info["cmdline"] or ()):
            found.append(process)
    return found


@pytest.mark.parametrize("args", [
    ["-c", SHOW_DATABASE],
    ["manage.py", "--help"],
    ["manage.py", "check"],
], ids=["import settings", "manage.py --help", "manage.py check"])
def test_settings_and_commands_that_need_no_database_start_no_postgres(tmp_path, args):
    # Given no server on a throwaway data directory, and no DATABASE_URL
    pgdata = tmp_path / "pgdata"
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", LECTERN_PGDATA=str(pgdata),
               SECRET_KEY=secrets.token_urlsafe(50))

    # When the settings are imported, or a command that reads only them runs
    done = subprocess.run([sys.executable, *args], cwd=BASE_DIR, env=env, capture_output=True, text=True,
                          timeout=120)

    # Then it succeeds, and no postgres runs there, nor did one write a pid file
    assert done.returncode == 0, done.stderr
    assert postmasters_on(pgdata) == []
    assert not (pgdata / "postmaster.pid").exists()
    if args[0] == "-c":  # the settings name the socket a start would open
        assert done.stdout.split() == [str(pgdata), "5432", "lectern"]
