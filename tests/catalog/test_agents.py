"""Writing agents (catalog.agents): scope, pins and profile changed and audited with what
changed; pins kept inside the agent's catalogs by every write; a revoked token refused
over the API at once and for good, whoever marks the agent active again; a new token
bringing a revoked agent back; only curators (or commands) write."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from rest_framework.test import APIClient

from catalog.agents import agent_create, agent_token_revoke, agent_token_rotate, agent_update
from catalog.audit.log import Action
from catalog.models import Agent, AuditEntry, Catalog, ReferenceSource
from tests.factories import agent_with_token, person

pytestmark = pytest.mark.django_db


def inline(catalog: Catalog, slug: str) -> ReferenceSource:
    return ReferenceSource.objects.create(catalog=catalog, slug=slug, name=slug.title(),
                                          kind=ReferenceSource.Kind.INLINE, content=f"About {slug}.")


@pytest.fixture
def two(make_catalog):
    ops, hr = make_catalog("ops"), make_catalog("hr")
    return ops, hr, inline(ops, "runbook"), inline(hr, "leave")


def entries(action: str, agent: Agent) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action, agent_id=agent.pk).order_by("seq"))


def call(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/v1/catalogs").status_code


def test_an_update_changes_scope_pins_and_profile_and_audits_each_change(two):
    ops, hr, runbook, leave = two
    cora = person("cora", "curator")
    agent, _ = agent_with_token(name="helper", catalogs=[ops], preselected=[runbook])

    updated, changes = agent_update(agent_id=agent.pk, by=cora, catalogs=[ops, hr], preselected=[runbook, leave],
                                    strategy="rag", token_budget=4000, semantic_threshold=0.4)

    assert set(updated.catalogs.values_list("slug", flat=True)) == {"ops", "hr"}
    assert set(updated.preselected.all()) == {runbook, leave}
    assert (updated.strategy, updated.token_budget, updated.semantic_threshold) == ("rag", 4000, 0.4)
    assert changes == {"strategy": {"from": "preload", "to": "rag"}, "token_budget": {"from": 12000, "to": 4000},
                       "semantic_threshold": {"from": 0.3, "to": 0.4},
                       "catalogs": {"from": ["ops"], "to": ["hr", "ops"]},
                       "preselected": {"from": ["ops/runbook"], "to": ["hr/leave", "ops/runbook"]}}
    (entry,) = entries(Action.AGENT_UPDATED, agent)
    assert (entry.actor_kind, entry.actor_name) == ("user", "cora")
    assert entry.payload == {"agent": "helper", "changes": changes}


def test_an_update_that_changes_nothing_is_not_audited(two):
    ops, _, runbook, _ = two
    agent, _ = agent_with_token(name="helper", catalogs=[ops], preselected=[runbook])

    _, changes = agent_update(agent_id=agent.pk, by=None, catalogs=[ops], preselected=[runbook], strategy="preload")

    assert changes == {} and entries(Action.AGENT_UPDATED, agent) == []


def test_a_pin_outside_the_agents_catalogs_is_refused_by_every_write(two):
    ops, hr, runbook, leave = two

    with pytest.raises(ValidationError) as created:
        agent_create(name="helper", catalogs=[ops], preselected=[leave])
    assert "hr/leave is not" in str(created.value.message_dict["preselected"])
    assert not Agent.objects.filter(name="helper").exists()

    agent, _ = agent_with_token(name="helper", catalogs=[ops, hr], preselected=[runbook, leave])
    with pytest.raises(ValidationError):  # narrowing the scope under a pin
        agent_update(agent_id=agent.pk, by=None, catalogs=[ops])
    with pytest.raises(ValidationError):
        agent_token_rotate(name="helper", catalogs=[hr])
    assert set(Agent.objects.get(pk=agent.pk).catalogs.all()) == {ops, hr}
    assert entries(Action.AGENT_UPDATED, agent) == []


def test_a_revoked_token_gets_401_at_once_and_is_audited_without_the_token(two):
    ops = two[0]
    cora = person("cora", "curator")
    agent, token = agent_with_token(name="helper", catalogs=[ops])
    assert call(token) == 200

    agent_token_revoke(agent_id=agent.pk, by=cora)

    assert call(token) == 401
    (entry,) = entries(Action.TOKEN_REVOKED, agent)
    assert entry.payload == {"agent": "helper", "token_hint": token[:8]} and entry.actor_name == "cora"
    assert token not in str(entry.payload)


def test_marking_a_revoked_agent_active_does_not_bring_its_token_back(two):
    ops = two[0]
    agent, token = agent_with_token(name="helper", catalogs=[ops])
    agent_token_revoke(agent_id=agent.pk, by=None)

    Agent.objects.filter(pk=agent.pk).update(is_active=True)  # as the admin's checkbox would

    assert call(token) == 401


def test_revoking_an_agent_the_admin_made_inactive_makes_it_final(two):
    ops = two[0]
    agent, token = agent_with_token(name="helper", catalogs=[ops])
    Agent.objects.filter(pk=agent.pk).update(is_active=False)

    agent_token_revoke(agent_id=agent.pk, by=None)
    Agent.objects.filter(pk=agent.pk).update(is_active=True)

    assert call(token) == 401
    assert entries(Action.TOKEN_REVOKED, agent)[0].payload["was_active"] is False


def test_a_new_token_brings_a_revoked_agent_back(two):
    ops = two[0]
    agent, old = agent_with_token(name="helper", catalogs=[ops])
    agent_token_revoke(agent_id=agent.pk, by=None)

    _, new = agent_token_rotate(name="helper")

    assert (call(old), call(new)) == (401, 200)
    issued = entries(Action.TOKEN_ISSUED, agent)
    assert issued[-1].payload["reactivated"] is True and "reactivated" not in issued[0].payload
    assert entries(Action.AGENT_UPDATED, agent) == []  # the token's entry says it all


def test_only_curators_write_agents(two):
    ops = two[0]
    agent, token = agent_with_token(name="helper", catalogs=[ops])
    rita, stan = person("rita", "reviewer"), person("stan", is_staff=True)

    for someone in (rita, stan):
        with pytest.raises(PermissionDenied):
            agent_create(name="other", catalogs=[ops], by=someone)
        with pytest.raises(PermissionDenied):
            agent_update(agent_id=agent.pk, by=someone, token_budget=500)
        with pytest.raises(PermissionDenied):
            agent_token_revoke(agent_id=agent.pk, by=someone)
        with pytest.raises(PermissionDenied):
            agent_token_rotate(name="helper", by=someone)

    assert call(token) == 200 and Agent.objects.get(pk=agent.pk).token_budget == 12000


def test_agent_update_takes_only_profile_fields(two):
    agent, _ = agent_with_token(name="helper", catalogs=[two[0]])

    with pytest.raises(TypeError, match="name, token_hash"):
        agent_update(agent_id=agent.pk, by=None, name="renamed", token_hash="x")


def test_an_edit_in_the_admin_is_audited_and_keeps_pins_in_scope(two, client: Client):
    ops, hr, runbook, leave = two
    agent, _ = agent_with_token(name="helper", catalogs=[ops])
    client.force_login(person("root", is_staff=True, is_superuser=True))
    url = f"/admin/catalog/agent/{agent.pk}/change/"
    form = {"name": "helper", "is_active": "on", "catalogs": [ops.pk], "strategy": "preload",
            "token_budget": 12000, "default_top_k": 5, "semantic_threshold": 0.3, "semantic_margin": 0.1,
            "max_hints": 5, "rag_relevance_threshold": 0.3, "rag_max_results": 3}

    refused = client.post(url, {**form, "preselected": [leave.pk]})
    saved = client.post(url, {**form, "is_active": "", "preselected": [runbook.pk]})

    assert refused.status_code == 200 and "must be in the agent&#x27;s catalogs" in refused.content.decode()
    assert saved.status_code == 302
    (entry,) = entries(Action.AGENT_UPDATED, agent)
    assert entry.actor_name == "root"
    assert entry.payload["changes"] == {"is_active": {"from": True, "to": False},
                                        "preselected": {"from": [], "to": ["ops/runbook"]}}


def test_each_write_is_audited_in_its_own_transaction(two):
    """The entry is written inline by the service: a write rolled back leaves no entry,
    and the chain stays intact for the next one."""
    from django.db import transaction

    from catalog.audit.log import audit_verify

    ops = two[0]
    agent, _ = agent_with_token(name="helper", catalogs=[ops])
    before = AuditEntry.objects.count()

    with pytest.raises(RuntimeError), transaction.atomic():
        agent_token_revoke(agent_id=agent.pk, by=None)
        assert entries(Action.TOKEN_REVOKED, agent)  # written with the revocation, before the commit
        raise RuntimeError("the caller's transaction fails")

    assert AuditEntry.objects.count() == before and Agent.objects.get(pk=agent.pk).is_active
    agent_token_revoke(agent_id=agent.pk, by=None)
    assert len(entries(Action.TOKEN_REVOKED, agent)) == 1
    assert audit_verify(checkpoints=False).broken is None


def test_catalog_announces_only_the_content_switch():
    """Audit needs no signal: what catalog still announces is the one event an app above
    acts on (approvals' lapse)."""
    from django.db.models import signals as django_signals
    from django.dispatch import Signal

    import catalog.signals

    djangos = [value for value in vars(django_signals).values() if isinstance(value, Signal)]
    own = [name for name, value in vars(catalog.signals).items()
           if isinstance(value, Signal) and not any(value is known for known in djangos)]
    assert own == ["content_switched"]
