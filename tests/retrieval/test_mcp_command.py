"""`manage.py mcp`'s command line: the token never comes from it, and a mistyped
option holding a token is refused without printing it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.agents import new_token
from tests.config.servers import child_env

BASE_DIR = Path(__file__).resolve().parents[2]


def run_mcp(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **child_env()}
    env.pop("LECTERN_AGENT_TOKEN", None)
    return subprocess.run([sys.executable, "manage.py", "mcp", *args], cwd=BASE_DIR, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", [
    ("--token", "{token}"),  # a prefix of --token-file: argparse took it for that option
    ("--token={token}",),
    ("--tok", "{token}"),
    ("{token}",),
    ("--token-file", "/nonexistent", "--api-key={token}"),
])
def test_a_token_on_the_command_line_is_refused_without_echoing_it(db, args):
    token = new_token()

    done = run_mcp(*(arg.format(token=token) for arg in args))

    assert done.returncode != 0
    assert done.stdout == ""
    assert token not in done.stderr and token[4:20] not in done.stderr
    assert "LECTERN_AGENT_TOKEN" in done.stderr  # says where the token goes instead


def test_a_missing_token_file_is_named_in_the_error(db, tmp_path):
    done = run_mcp("--token-file", str(tmp_path / "absent"))

    assert done.returncode != 0
    assert f"cannot read the token file {tmp_path / 'absent'}" in done.stderr
