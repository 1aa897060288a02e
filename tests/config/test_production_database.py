"""Production serves only the database it is given: with DEBUG off and no DATABASE_URL,
`make serve`, `python -m config.serve`, gunicorn with Lectern's settings, config.wsgi and
config.asgi each refuse to start with one line saying why, and start no Postgres (a typo
in a deployment's environment must not serve an empty Lectern that looks healthy). With
DEBUG on, development's entry points still start the embedded one."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from config.database import NO_PRODUCTION_DATABASE
from tests.config.test_pure_settings import postmasters_on

BASE_DIR = Path(__file__).resolve().parents[2]


def without_database(pgdata: Path, **extra: str) -> dict[str, str]:
    """This environment less DATABASE_URL and DEBUG, pointed at a data directory where no server runs."""
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "DATABASE_OWNER_URL",
                                                                        "DEBUG")}
    return {**env, "DJANGO_SETTINGS_MODULE": "config.settings", "LECTERN_PGDATA": str(pgdata),
            "SECRET_KEY": secrets.token_urlsafe(50), "LECTERN_BIND": "127.0.0.1:0", **extra}


@pytest.mark.parametrize("command", [
    ["make", "--no-print-directory", "serve"],
    [sys.executable, "-m", "config.serve"],
    [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py"],
    [sys.executable, "-c", "import config.wsgi"],
    [sys.executable, "-c", "import config.asgi"],
], ids=["make serve", "config.serve", "gunicorn", "config.wsgi", "config.asgi"])
def test_a_production_entry_point_without_database_url_refuses_to_start(tmp_path, command):
    # Given no DATABASE_URL, DEBUG off, and no server on a throwaway data directory
    pgdata = tmp_path / "pgdata"

    # When a production entry point starts
    done = subprocess.run(command, cwd=BASE_DIR, env=without_database(pgdata), capture_output=True, text=True,
                          timeout=120)

    # Then it exits non-zero with the one line (make adds its own after it), and no
    # postgres was started for it
    said = [line for line in done.stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert done.returncode != 0
    assert len(said) == 1 and said[0].endswith(NO_PRODUCTION_DATABASE), done.stderr
    assert postmasters_on(pgdata) == []
    assert not pgdata.exists()


def test_development_still_starts_the_embedded_postgres(tmp_path):
    # Given no DATABASE_URL and DEBUG on (make run), on a stopped data directory
    pgdata = tmp_path / "pgdata"
    env = without_database(pgdata, DEBUG="1", LECTERN_DB_NAME="probe")
    try:
        # When the WSGI application is imported
        done = subprocess.run([sys.executable, "-c", "import config.wsgi"], cwd=BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=300)

        # Then it started the embedded server first
        assert done.returncode == 0, done.stderr
        assert len(postmasters_on(pgdata)) >= 1
    finally:
        subprocess.run([sys.executable, "-m", "config.embedded_pg", "stop"], cwd=BASE_DIR, env=env, timeout=120)
