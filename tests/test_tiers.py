"""The test tiers (tests/conftest.py): each test is `unit` or `integration` from what it
uses, unmarked; `-m unit` runs no test that needs the database, a browser or another
process, and a unit test that starts a process fails, naming the fix.

Checked on a throwaway suite run by pytest in a child process with this suite's hook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
SAMPLES = {
    "conftest.py": "from tests.conftest import pytest_collection_modifyitems, _unit_tests_start_no_process\n",
    "helper.py": "import subprocess\n\ndef spawn():\n    subprocess.run(['true'])\n",
    "test_fixtures.py": """
import pytest
from helper import spawn

def test_pure():
    assert sum([1, 2]) == 3

def test_spawns_through_a_helper():
    spawn()

def test_with_the_database(db):
    pass

def test_with_a_live_server(live_server):
    pass

@pytest.mark.django_db
def test_marked_for_the_database():
    pass

@pytest.mark.integration
def test_marked_integration_by_hand():
    pass
""",
    "test_processes.py": "import subprocess\n\ndef test_in_a_module_that_starts_processes():\n    pass\n",
}


def test_unit_selects_only_what_needs_no_database_browser_or_process(tmp_path):
    # Given a suite using this one's tiers: a pure test, one spawning through a helper,
    # tests taking database or live-server fixtures or marks, one in a process module
    for name, text in SAMPLES.items():
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BASE_DIR), str(tmp_path)]),
           "DJANGO_SETTINGS_MODULE": "config.settings_test"}

    # When its unit tier runs
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-m", "unit", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    # Then only the pure test and the spawning one ran; the spawn was refused by name
    assert "test_fixtures.py::test_pure PASSED" in done.stdout, done.stdout + done.stderr
    assert "test_fixtures.py::test_spawns_through_a_helper FAILED" in done.stdout
    assert "a unit test started ['true']: mark it integration" in done.stdout
    assert "1 failed, 1 passed, 5 deselected" in done.stdout
