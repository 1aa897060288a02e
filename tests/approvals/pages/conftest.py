"""Fixtures for the reviewer's pages: named people for every row of the permission
matrix (tests/approvals/conftest.py has rita and rob, reviewers, and cora, a curator),
a pending request, a signed-in client per person (the browser is tests/conftest.py's)."""

from __future__ import annotations

import pytest

from tests.approvals.builders import raised
from tests.factories import person


@pytest.fixture
def nobody(db):
    """Signed in, in no group."""
    return person("nobody")


@pytest.fixture
def staff(db):
    """Staff status (the admin) but no role: no back door."""
    return person("stan", is_staff=True)


@pytest.fixture
def bea(db):
    """Both roles."""
    return person("bea", "curator", "reviewer")


@pytest.fixture
def sue(db):
    """A superuser: holds every role."""
    return person("sue", is_superuser=True, is_staff=True)


@pytest.fixture
def pending(kb, agent) -> int:
    """The id of a pending request of `agent` for the governed source `vault`."""
    return raised(agent, kb.vault, via="enrichment")


