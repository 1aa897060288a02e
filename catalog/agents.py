"""Agents and their bearer tokens: the one place an agent is written.

A token is shown once, to whoever asked for it (a command's output, the dashboard's
page, the demo loader's report, a test), and only its sha256 is stored: tokens are
256-bit random strings, so a plain hash is a safe at-rest form. `manage.py
create_agent`, the dashboard's agent pages (retrieval/agents/), the admin, the demo
loader, the benchmarks and the tests all write agents through these functions, which
audit each write in its own transaction (catalog.audit: token.issued, agent.updated,
token.revoked; never the token nor its hash: the hint tells tokens apart).

- agent_create: a new agent and its token.
- agent_token_rotate: a new token (the old one stops working); a revoked agent is
  active again with it.
- agent_update: scope (catalogs), pinned references and profile.
- agent_token_revoke: the token stops working at once and for good (its hash is
  replaced by one of a token nobody holds); the agent is inactive until a new token
  is issued.

An agent's pinned (preselected) references must lie in its catalogs: every write
checks it (`preselected_outside`), so a scope narrowed later cannot keep a pin behind.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.models import Agent, Catalog, ReferenceSource

TOKEN_PREFIX = "lct_"
HINT_CHARS = 8  # the token's first characters, stored to tell tokens apart


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _token_issue(agent: Agent) -> str:
    """Give `agent` a new token (its previous one stops working once saved)."""
    token = new_token()
    agent.token_hash, agent.token_hint = hash_token(token), token[:HINT_CHARS]
    return token


# What an agent's profile holds besides its scope and pins: the fields agent_update takes.
PROFILE_FIELDS = ("is_curator", "strategy", "token_budget", "default_top_k", "semantic_threshold", "semantic_margin",
                  "max_hints", "rag_relevance_threshold", "rag_max_results")


def _curator_or_command(by: User | None) -> None:
    """A person writing an agent must be a curator (the pages check first; this is the
    service's own check). None: a command, the demo loader or a test."""
    from catalog.auth import CURATOR_GROUP, has_role  # catalog.auth imports this module

    if by is not None and not has_role(by, CURATOR_GROUP):
        raise PermissionDenied("only curators manage agents")


def preselected_outside(catalogs: Iterable[Catalog], preselected: Iterable[ReferenceSource]) -> list[str]:
    """The pinned references (catalog/slug) that lie outside `catalogs`, sorted."""
    scope = {catalog.pk for catalog in catalogs}
    return sorted(f"{source.catalog.slug}/{source.slug}" for source in preselected if source.catalog_id not in scope)


def _check_pins(catalogs: list[Catalog], preselected: list[ReferenceSource]) -> None:
    outside = preselected_outside(catalogs, preselected)
    if outside:
        raise ValidationError({"preselected": f"pinned references must be in the agent's catalogs: "
                                              f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} not"})


def agent_snapshot(agent: Agent) -> dict[str, Any]:
    """What an audit entry records of an agent's settings: the profile fields, whether
    it is active, its catalogs' slugs and its pins as catalog/slug, sorted."""
    return {
        **{field: getattr(agent, field) for field in PROFILE_FIELDS},
        "is_active": agent.is_active,
        "catalogs": sorted(agent.catalogs.values_list("slug", flat=True)),
        "preselected": sorted(f"{catalog}/{slug}" for catalog, slug in
                              agent.preselected.values_list("catalog__slug", "slug")),
    }


def agent_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{field: {"from": old, "to": new}} for each field that differs."""
    return {field: {"from": before[field], "to": value} for field, value in after.items() if before.get(field) != value}


def agent_changes_audit(*, agent: Agent, before: dict[str, Any], by: User | None) -> dict[str, dict[str, Any]]:
    """Audit what changed since `before` (agent_snapshot), if anything; the changes."""
    changes = agent_changes(before, agent_snapshot(agent))
    if changes:
        _audit_changes(agent, changes, by)
    return changes


def _audit_changes(agent: Agent, changes: dict[str, dict[str, Any]], by: User | None) -> None:
    """Scope, pins and profile: each field's old and new value."""
    audit_append(AuditEvent(Action.AGENT_UPDATED, Actor.of(by, system="command"), agent_id=agent.pk,
                            payload={"agent": agent.name, "changes": changes}))


def _audit_token_issued(agent: Agent, *, created: bool, reactivated: bool, by: User | None) -> None:
    payload: dict[str, Any] = {"agent": agent.name, "created": created, "token_hint": agent.token_hint,
                               "catalogs": sorted(agent.catalogs.values_list("slug", flat=True))}
    if reactivated:
        payload["reactivated"] = True
    audit_append(AuditEvent(Action.TOKEN_ISSUED, Actor.of(by, system="command"), agent_id=agent.pk, payload=payload))


@transaction.atomic
def agent_create(*, name: str, catalogs: Iterable[Catalog] = (), preselected: Iterable[ReferenceSource] = (),
                 by: User | None = None, **profile: Any) -> tuple[Agent, str]:
    """A new agent scoped to `catalogs`, with `profile` (is_curator, strategy,
    token_budget, default_top_k, ...), and its token; `by`: the person asking (None: a
    command or a service). Raises ValidationError on a field out of range, a name taken
    or a pinned reference outside the catalogs."""
    _curator_or_command(by)
    catalogs, preselected = list(catalogs), list(preselected)
    agent = Agent(name=name, **profile)
    token = _token_issue(agent)
    agent.full_clean()
    _check_pins(catalogs, preselected)
    agent.save()
    agent.catalogs.set(catalogs)
    agent.preselected.set(preselected)
    _audit_token_issued(agent, created=True, reactivated=False, by=by)
    return agent, token


@transaction.atomic
def agent_token_rotate(*, name: str, catalogs: Iterable[Catalog] | None = None,
                       preselected: Iterable[ReferenceSource] | None = None, by: User | None = None,
                       **profile: Any) -> tuple[Agent, str]:
    """A new token for agent `name`, created when missing; the old token stops working
    and a revoked agent is active again. `catalogs`, `preselected` and `profile` fields
    replace the agent's when given."""
    _curator_or_command(by)
    agent = Agent.objects.select_for_update().filter(name=name).first()
    if agent is None:
        return agent_create(name=name, catalogs=catalogs or (), preselected=preselected or (), by=by, **profile)
    reactivated = not agent.is_active and profile.get("is_active", True)
    profile = {"is_active": True, **profile}
    before = agent_snapshot(agent)
    for field, value in profile.items():
        setattr(agent, field, value)
    token = _token_issue(agent)
    agent.full_clean()
    new_catalogs = list(catalogs) if catalogs is not None else list(agent.catalogs.all())
    new_pins = list(preselected) if preselected is not None else list(agent.preselected.select_related("catalog"))
    if catalogs is not None or preselected is not None:
        _check_pins(new_catalogs, new_pins)
    agent.save()
    if catalogs is not None:
        agent.catalogs.set(new_catalogs)
    if preselected is not None:
        agent.preselected.set(new_pins)
    _audit_token_issued(agent, created=False, reactivated=bool(reactivated), by=by)
    changes = agent_changes(before, agent_snapshot(agent))
    changes.pop("is_active", None)  # the token's audit entry says so (reactivated)
    if changes:
        _audit_changes(agent, changes, by)
    return agent, token


@transaction.atomic
def agent_update(*, agent_id: int, by: User | None, catalogs: Iterable[Catalog] | None = None,
                 preselected: Iterable[ReferenceSource] | None = None,
                 **profile: Any) -> tuple[Agent, dict[str, dict[str, Any]]]:
    """Change agent `agent_id`'s scope, pins and profile (PROFILE_FIELDS); what is not
    given stays. Returns the agent and what changed ({} when nothing did: nothing is
    audited). Raises Agent.DoesNotExist, ValidationError (a field out of range, a pin
    outside the catalogs), PermissionDenied (a person who is no curator)."""
    _curator_or_command(by)
    unknown = sorted(set(profile) - set(PROFILE_FIELDS))
    if unknown:
        raise TypeError(f"agent_update() cannot set {', '.join(unknown)}")
    agent = Agent.objects.select_for_update().get(pk=agent_id)
    before = agent_snapshot(agent)
    for field, value in profile.items():
        setattr(agent, field, value)
    agent.full_clean()
    new_catalogs = list(catalogs) if catalogs is not None else list(agent.catalogs.all())
    new_pins = list(preselected) if preselected is not None else list(agent.preselected.select_related("catalog"))
    _check_pins(new_catalogs, new_pins)
    agent.save()
    if catalogs is not None:
        agent.catalogs.set(new_catalogs)
    if preselected is not None:
        agent.preselected.set(new_pins)
    return agent, agent_changes_audit(agent=agent, before=before, by=by)


@transaction.atomic
def agent_token_revoke(*, agent_id: int, by: User | None) -> Agent:
    """Revoke agent `agent_id`'s token: its next call is refused (401). The stored hash
    becomes that of a token nobody holds, so marking the agent active again (the admin)
    does not bring the old token back; only a new token does (agent_token_rotate). An
    agent made inactive in the admin still held its token: revoking it makes that final
    too, and says the agent was inactive already."""
    _curator_or_command(by)
    agent = Agent.objects.select_for_update().get(pk=agent_id)
    was_active, revoked_hint = agent.is_active, agent.token_hint
    agent.token_hash = hash_token(new_token())  # discarded: no one holds it
    agent.is_active = False
    agent.save(update_fields=["token_hash", "is_active"])
    payload: dict[str, Any] = {"agent": agent.name, "token_hint": revoked_hint}
    if not was_active:
        payload["was_active"] = False
    audit_append(AuditEvent(Action.TOKEN_REVOKED, Actor.of(by, system="command"), agent_id=agent.pk,
                            payload=payload))
    return agent


def agent_read_fence_advance(*, agent: Agent) -> None:
    """After a request (or an MCP call) in which `agent` wrote: its reads from a replica
    wait until it has replayed past the primary's WAL position now, which lies past the
    commit of everything the agent wrote (catalog.reads). Monotonic: a slower request
    finishing later never moves the fence back."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE retrieval_agent SET read_fence = pg_current_wal_insert_lsn() - '0/0'::pg_lsn "
                       "WHERE id = %s AND read_fence < pg_current_wal_insert_lsn() - '0/0'::pg_lsn", [agent.pk])
