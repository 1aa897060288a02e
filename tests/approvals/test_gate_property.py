"""A property of the gate, over random worlds of policies and requests: a source reaches
a caller exactly when a plain reading of the rules says so (the oracle below), through
injection_decisions and withheld_sources alike. The gate's one SQL statement is what
is checked; the oracle is a few lines of Python anyone can read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.selectors.gate import injection_decisions, withheld_sources
from catalog.models import ReferenceSource
from catalog.tags import tags_ensure

pytestmark = pytest.mark.django_db

SOURCES = ("vault", "notes")
AGENTS = ("bot", "other-bot")


@dataclass(frozen=True)
class PolicySpec:
    scope: str  # catalog | vault | notes | tag (the tag is on notes only)
    agents: str  # all | bot | other-bot
    required: int
    lifetime_hours: int | None


@dataclass(frozen=True)
class RequestSpec:
    agent: str
    source: str
    state: str
    approvals: int
    decided_hours_ago: int
    expires_in_hours: int | None  # None: never
    current: bool  # for the source's fingerprint now, or an older one


policies = st.builds(PolicySpec, st.sampled_from(["catalog", "vault", "notes", "tag"]),
                     st.sampled_from(["all", *AGENTS]), st.integers(1, 3), st.sampled_from([None, 1, 5]))
requests = st.builds(RequestSpec, st.sampled_from(AGENTS), st.sampled_from(SOURCES),
                     st.sampled_from(["pending", "approved", "rejected", "revoked", "expired", "lapsed"]),
                     st.integers(0, 3), st.integers(0, 6), st.sampled_from([None, -1, 2]), st.booleans())


def oracle(*, source: str, caller: str | None, flag: bool, world: list[PolicySpec], asked: list[RequestSpec]) -> bool:
    """May `source` reach `caller` (None: a person)? Read off the rules as docs say them."""
    covering = [p for p in world
                if p.scope in ("catalog", source) or (p.scope == "tag" and source == "notes")
                if caller is None or p.agents in ("all", caller)]
    if not flag and not covering:
        return True
    if caller is None:
        return False
    required = max([1, *(p.required for p in covering)])
    lifetimes = [p.lifetime_hours for p in covering if p.lifetime_hours is not None]
    for r in asked:
        if (r.agent, r.source, r.state, r.current) != (caller, source, "approved", True) or r.approvals < required:
            continue
        if r.expires_in_hours is not None and r.expires_in_hours <= 0:
            continue
        if lifetimes and r.decided_hours_ago >= min(lifetimes):
            continue
        return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=st.lists(policies, max_size=3), asked=st.lists(requests, max_size=5), vault_flag=st.booleans())
def test_the_gate_agrees_with_the_rules(kb, agent, other_agent, world, asked, vault_flag):
    agents = {"bot": agent, "other-bot": other_agent}
    sources = {"vault": kb.vault, "notes": kb.notes}
    now = timezone.now()
    with transaction.atomic():
        build(kb, agents, sources, world, asked, vault_flag, now)
        for caller in (None, *AGENTS):
            who = agents.get(caller) if caller else None
            decisions = injection_decisions(agent=who, sources=list(sources.values()))
            withheld = withheld_sources(agent=who, catalog_ids=[kb.catalog.pk])
            for name, source in sources.items():
                expected = oracle(source=name, caller=caller, flag=vault_flag and name == "vault", world=world,
                                  asked=asked)
                assert decisions[source.pk].allowed == expected, (name, caller)
                assert (source.pk not in withheld) == expected, (name, caller)
                if not expected:
                    assert withheld[source.pk].state == decisions[source.pk].state
        transaction.set_rollback(True)


def build(kb, agents, sources, world, asked, vault_flag: bool, now: datetime) -> None:
    ReferenceSource.objects.filter(pk=kb.vault.pk).update(requires_approval=vault_flag)
    (tag,) = tags_ensure(names=["secret"])
    kb.notes.tags.add(tag)
    for spec in world:
        policy = ApprovalPolicy.objects.create(
            scope="catalog" if spec.scope == "catalog" else "tag" if spec.scope == "tag" else "source",
            catalog=kb.catalog if spec.scope == "catalog" else None, tag=tag if spec.scope == "tag" else None,
            source=sources.get(spec.scope), all_agents=spec.agents == "all", required_approvals=spec.required,
            lifetime=timedelta(hours=spec.lifetime_hours) if spec.lifetime_hours else None)
        if spec.agents != "all":
            policy.agents.add(agents[spec.agents])
    for spec in asked:
        source = sources[spec.source]
        ApprovalRequest.objects.bulk_create([ApprovalRequest(
            source=source, agent=agents[spec.agent], raised_via="manual", state=spec.state,
            fingerprint=source.fingerprint if spec.current else "an-older-fingerprint",
            approvals=spec.approvals, decided_at=now - timedelta(hours=spec.decided_hours_ago, minutes=1),
            expires_at=None if spec.expires_in_hours is None else now + timedelta(hours=spec.expires_in_hours))],
            ignore_conflicts=True)  # a second pending for the same content is what the index forbids
