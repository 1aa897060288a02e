"""Every environment variable the product reads is in the README's settings table: a
deployment finds each one there, with its default and meaning."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "catalog", "approvals", "retrieval")
# A name the code reads from the environment: os.environ.get("X"), env_int("X", ...),
# a constant naming one (TOKEN_ENV = "X"), and so on: a quoted upper-case name of the
# families Lectern's settings use.
READ = re.compile(r"""["']((?:LECTERN|DATABASE|DB|EMAIL)_[A-Z0-9_]+|REDIS_URL|SECRET_KEY|ALLOWED_HOSTS|DEBUG|"""
                  r"""CSRF_TRUSTED_ORIGINS|FORWARDED_ALLOW_IPS|LOG_LEVEL|DEFAULT_FROM_EMAIL)["']""")


def names_read() -> set[str]:
    found: set[str] = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found |= set(READ.findall(path.read_text(encoding="utf-8")))
    return found


def names_documented() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])}


def test_every_setting_the_product_reads_is_in_the_readme_table():
    read = names_read()

    assert {"DATABASE_URL", "LECTERN_Q_TIMEOUT", "LECTERN_AGENT_TOKEN"} <= read  # the scan finds them
    assert sorted(read - names_documented()) == []
