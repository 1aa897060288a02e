"""Builders shared by the tests: catalog content and agents written through the product's
own services (the write path, catalog.agents), and people in their roles."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, User

from catalog.agents import HINT_CHARS, agent_create, hash_token
from catalog.indexing.runs import source_import
from catalog.models import Agent, Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput


def import_documents(*, catalog: Catalog, slug: str, documents: list[DocumentInput]) -> ReferenceSource:
    """Make `documents` the content of upload source `slug`, indexed by a real run."""
    run = source_import(catalog=catalog, slug=slug, documents=documents, trigger=IndexRun.Trigger.COMMAND)
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    return run.source


def agent_with_token(*, name: str, catalogs: Iterable[Catalog] = (), token: str | None = None,
                     **profile: Any) -> tuple[Agent, str]:
    """An agent made by catalog.agents.agent_create, and its token. `token`: the one it
    must hold instead, for a test that hands a token to a server before the agent exists."""
    agent, issued = agent_create(name=name, catalogs=catalogs, **profile)
    if token is None:
        return agent, issued
    Agent.objects.filter(pk=agent.pk).update(token_hash=hash_token(token), token_hint=token[:HINT_CHARS])
    agent.refresh_from_db()
    return agent, token


ROLES = ("curator", "reviewer")


def person(username: str, *roles: str, password: str = "pw", **fields: Any) -> User:
    """A person holding `roles` (the groups `curator`, `reviewer`). Approvals migration
    0003 creates them; a transactional test's flush empties every table, so they are
    made again here when missing (without the admin permissions, which no service reads)."""
    assert set(roles) <= set(ROLES), f"unknown roles among {roles}"
    user = User.objects.create_user(username, password=password, **fields)
    user.groups.add(*(Group.objects.get_or_create(name=role)[0] for role in roles))
    return user
