"""What catalog announces (catalog.signals), handed to approvals' services. Catalog
cannot import approvals (it is the floor approvals stands on), so it sends and
approvals listens: ApprovalsConfig.ready connects these. They only translate a
signal's arguments into a service call; the work and its rules are the services'."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from approvals.audit.log import Action, Actor, AuditEvent, audit_append
from approvals.services.lapse import approvals_lapse
from catalog.models import Agent, ReferenceSource

# Edits that change what governs a source: audited even when no person made them.
GOVERNING_FIELDS = {"requires_approval", "catalog", "tags"}


def on_content_switched(sender: type[ReferenceSource], *, source_id: int, old_fingerprint: str,
                        new_fingerprint: str, **kwargs: Any) -> None:
    approvals_lapse(source_id=source_id, new_fingerprint=new_fingerprint)


def on_token_issued(sender: type[Agent], *, agent: Agent, created: bool, by: User | None,
                    reactivated: bool = False, **kwargs: Any) -> None:
    """Never the token nor its hash: the hint tells tokens apart."""
    payload = {"agent": agent.name, "created": created, "token_hint": agent.token_hint,
               "catalogs": sorted(agent.catalogs.values_list("slug", flat=True))}
    if reactivated:
        payload["reactivated"] = True
    audit_append(AuditEvent(Action.TOKEN_ISSUED, Actor.of(by, system="command"), agent_id=agent.pk, payload=payload))


def on_agent_changed(sender: type[Agent], *, agent: Agent, by: User | None, changes: dict[str, Any],
                     **kwargs: Any) -> None:
    """Scope, pins and profile: each field's old and new value."""
    audit_append(AuditEvent(Action.AGENT_UPDATED, Actor.of(by, system="command"), agent_id=agent.pk,
                            payload={"agent": agent.name, "changes": changes}))


def on_token_revoked(sender: type[Agent], *, agent: Agent, token_hint: str, was_active: bool, by: User | None,
                     **kwargs: Any) -> None:
    payload: dict[str, Any] = {"agent": agent.name, "token_hint": token_hint}
    if not was_active:
        payload["was_active"] = False
    audit_append(AuditEvent(Action.TOKEN_REVOKED, Actor.of(by, system="command"), agent_id=agent.pk,
                            payload=payload))


def on_source_changed(sender: type[ReferenceSource], *, source: ReferenceSource, by: User | None,
                      fields: list[str], **kwargs: Any) -> None:
    """A person's edit (four eyes remembers who), or a change of what governs it."""
    if by is None and not GOVERNING_FIELDS.intersection(fields):
        return
    audit_append(AuditEvent(Action.SOURCE_CHANGED, Actor.of(by), source_id=source.pk, payload={
        "source": f"{source.catalog.slug}/{source.slug}", "fields": fields,
        "requires_approval": source.requires_approval}))


def connect() -> None:
    from catalog.signals import agent_changed, content_switched, source_changed, token_issued, token_revoked

    content_switched.connect(on_content_switched, dispatch_uid="approvals-lapse")
    token_issued.connect(on_token_issued, dispatch_uid="approvals-audit-token")
    agent_changed.connect(on_agent_changed, dispatch_uid="approvals-audit-agent")
    token_revoked.connect(on_token_revoked, dispatch_uid="approvals-audit-token-revoked")
    source_changed.connect(on_source_changed, dispatch_uid="approvals-audit-source")
