"""Fixtures for the approvals tests: a catalog `kb` with a governed source (`vault`) and
an open one (`notes`), both indexed by the real write path; an agent reading it; named
people per role."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from catalog.models import Agent, Catalog, ReferenceSource
from tests.approvals.builders import VAULT_TEXT, document
from tests.factories import agent_with_token, import_documents, person


@dataclass
class Kb:
    catalog: Catalog
    vault: ReferenceSource
    notes: ReferenceSource


@pytest.fixture
def kb(make_catalog) -> Kb:
    catalog = make_catalog("kb")
    vault = import_documents(catalog=catalog, slug="vault", documents=[document("rotation.md", VAULT_TEXT)])
    notes = import_documents(catalog=catalog, slug="notes", documents=[document("notes.md", "Plain notes.\n")])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    vault.refresh_from_db()
    return Kb(catalog, vault, notes)


@pytest.fixture
def agent(kb) -> Agent:
    return agent_with_token(name="bot", catalogs=[kb.catalog])[0]


@pytest.fixture
def other_agent(kb) -> Agent:
    return agent_with_token(name="other-bot", catalogs=[kb.catalog])[0]


@pytest.fixture
def rob(db):
    return person("rob", "reviewer")




@pytest.fixture
def outbound_to_loopback(settings):
    """The test receivers listen on 127.0.0.1, which outbound requests may not reach
    (catalog.outbound): let loopback through, as an operator with a receiver on the same
    machine would (LECTERN_OUTBOUND_ALLOWED_NETWORKS)."""
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
