"""Approval policies, written by curators and audited: which sources need approval for
which agents, how many distinct approvals, for how long, whether four eyes apply, and
whether search may tell an agent that its query matches what is withheld from it.

A change takes effect on the next read: the gate reads the policies on every call.
Existing approvals are judged by the policy as it is then: a shorter lifetime or more
required approvals apply to them at once (a request short of approvals is followed by
a new one); a longer lifetime does not extend an approval beyond what it was granted
for. Who last changed a policy may not approve what it covers when it asks for four
eyes. The person whose change raised a request may decide it only when every policy
covering the source says `allow_self_approval` (approvals.services.decisions)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from approvals.models import ApprovalPolicy
from approvals.services.errors import forbidden, not_found
from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.auth import is_curator
from catalog.models import Agent, Catalog, ReferenceSource, Tag

FIELDS = ("required_approvals", "lifetime", "four_eyes", "allow_self_approval", "disclose_matches", "description",
          "all_agents")


def policy_as_dict(policy: ApprovalPolicy, agent_ids: Iterable[int] = ()) -> dict[str, Any]:
    """The policy as the audit log records it."""
    return {"scope": policy.scope, "catalog_id": policy.catalog_id, "source_id": policy.source_id,
            "tag_id": policy.tag_id, "target": policy.target_label, "all_agents": policy.all_agents,
            "agent_ids": sorted(agent_ids), "required_approvals": policy.required_approvals,
            "lifetime_seconds": policy.lifetime.total_seconds() if policy.lifetime is not None else None,
            "four_eyes": policy.four_eyes, "allow_self_approval": policy.allow_self_approval,
            "disclose_matches": policy.disclose_matches, "description": policy.description}


def _check_curator(by: User | Agent) -> None:
    if isinstance(by, Agent) or not is_curator(by):  # a person's role: curator agents reindex, no more
        raise forbidden("only a member of the curator group changes approval policies", code="not_curator")


def policy_create(*, by: User, catalog: Catalog | None = None, source: ReferenceSource | None = None,
                  tag: Tag | None = None, agents: Iterable[Agent] | None = None, required_approvals: int = 1,
                  lifetime: timedelta | None = None, four_eyes: bool = False, allow_self_approval: bool = False,
                  disclose_matches: bool = False, description: str = "") -> ApprovalPolicy:
    """A policy over exactly one of `catalog`, `source`, `tag`; for `agents` when given,
    else for every agent. Raises ForbiddenError not_curator, ValidationError on bad
    fields."""
    _check_curator(by)
    scope = next((name for name, target in (("catalog", catalog), ("source", source), ("tag", tag)) if target), "")
    named = list(agents) if agents is not None else []
    policy = ApprovalPolicy(scope=scope, catalog=catalog, source=source, tag=tag, all_agents=agents is None,
                            required_approvals=required_approvals, lifetime=lifetime, four_eyes=four_eyes,
                            allow_self_approval=allow_self_approval, disclose_matches=disclose_matches,
                            description=description, changed_by=by)
    policy.full_clean()
    with transaction.atomic():
        policy.save()
        policy.agents.set(named)
        audit_append(AuditEvent(Action.POLICY_CREATED, Actor.of(by), policy_id=policy.pk, source_id=policy.source_id,
                                payload=policy_as_dict(policy, (a.pk for a in named))))
    return policy


def policy_update(*, policy_id: int, by: User, agents: Iterable[Agent] | None = None,
                  **fields: Any) -> ApprovalPolicy:
    """Change `fields` (required_approvals, lifetime, four_eyes, allow_self_approval,
    disclose_matches, description, all_agents) and, when given, the agents named; the scope and its target stay (a
    new target is a new policy). The audit entry holds the policy before and after."""
    _check_curator(by)
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"policy_update() cannot change {', '.join(sorted(unknown))}")
    with transaction.atomic():
        policy = ApprovalPolicy.objects.select_for_update().filter(pk=policy_id).first()
        if policy is None:
            raise not_found(f"approval policy {policy_id}")
        before = policy_as_dict(policy, policy.agents.values_list("pk", flat=True))
        for name, value in fields.items():
            setattr(policy, name, value)
        policy.changed_by = by
        policy.full_clean()
        policy.save()
        if agents is not None:
            policy.agents.set(list(agents))
        after = policy_as_dict(policy, policy.agents.values_list("pk", flat=True))
        audit_append(AuditEvent(Action.POLICY_UPDATED, Actor.of(by), policy_id=policy.pk, source_id=policy.source_id,
                                payload={"before": before, "after": after}))
    return policy


def policy_delete(*, policy_id: int, by: User) -> None:
    _check_curator(by)
    with transaction.atomic():
        policy = ApprovalPolicy.objects.select_for_update().filter(pk=policy_id).first()
        if policy is None:
            raise not_found(f"approval policy {policy_id}")
        before = policy_as_dict(policy, policy.agents.values_list("pk", flat=True))
        policy.delete()
        audit_append(AuditEvent(Action.POLICY_DELETED, Actor.of(by), policy_id=policy_id,
                                source_id=before["source_id"], payload={"before": before}))
