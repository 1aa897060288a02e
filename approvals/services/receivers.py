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


def on_token_issued(sender: type[Agent], *, agent: Agent, created: bool, by: User | None, **kwargs: Any) -> None:
    """Never the token nor its hash: the hint tells tokens apart."""
    audit_append(AuditEvent(Action.TOKEN_ISSUED, Actor.of(by, system="command"), agent_id=agent.pk,
                            payload={"agent": agent.name, "created": created, "token_hint": agent.token_hint,
                                     "catalogs": sorted(agent.catalogs.values_list("slug", flat=True))}))


def on_source_changed(sender: type[ReferenceSource], *, source: ReferenceSource, by: User | None,
                      fields: list[str], **kwargs: Any) -> None:
    """A person's edit (four eyes remembers who), or a change of what governs it."""
    if by is None and not GOVERNING_FIELDS.intersection(fields):
        return
    audit_append(AuditEvent(Action.SOURCE_CHANGED, Actor.of(by), source_id=source.pk, payload={
        "source": f"{source.catalog.slug}/{source.slug}", "fields": fields,
        "requires_approval": source.requires_approval}))


def connect() -> None:
    from catalog.signals import content_switched, source_changed, token_issued

    content_switched.connect(on_content_switched, dispatch_uid="approvals-lapse")
    token_issued.connect(on_token_issued, dispatch_uid="approvals-audit-token")
    source_changed.connect(on_source_changed, dispatch_uid="approvals-audit-source")
