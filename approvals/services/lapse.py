"""When a reindex switches a source to content with another fingerprint, the approvals
and pending requests for the old content lapse, inside the switch's own transaction
(catalog.signals.content_switched, sent before it commits): no reader ever sees the new
text under an old approval. Each agent that had one gets a new pending request for the
new content (raised_via reindex), carrying the unified diff of the text it last had
approved against the new text, so the reviewer reads only what changed. It names whom its content came from
(approvals.services.requests), and, when it follows a request that was still pending,
whom that one named: their changes, never approved, are in the diff too.

An approval whose time was up before the content changed (the gate refused it already;
the expiry task had not marked it yet) is marked expired, as of when it ended, not
lapsed: it ended by time, and shows so for good (its agent still gets the new request,
with the diff against what it had approved)."""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from approvals.channels.events import events_record
from approvals.diffs import ContentDiff
from approvals.models import ApprovalRequest, ApprovedContent
from approvals.selectors.gate import APPROVAL_ENDS_SQL
from approvals.services.contents import diff_against, documents_now
from approvals.services.requests import RaiseItem, requests_raise
from catalog.audit.log import Action, Actor, AuditEvent, audit_append_many
from catalog.models import Agent

_LAPSE = """
WITH old AS (
    SELECT id, state FROM approvals_approvalrequest
    WHERE source_id = %(source)s AND state IN ('approved', 'pending') AND fingerprint <> %(new)s
    ORDER BY id FOR UPDATE
), ended AS (
    SELECT old.id, old.state, CASE WHEN old.state = 'approved' THEN {ends} END AS ends
    FROM old JOIN approvals_approvalrequest r ON r.id = old.id
)
UPDATE approvals_approvalrequest r
SET state = CASE WHEN e.ends <= %(now)s THEN 'expired' ELSE 'lapsed' END,
    ended_at = CASE WHEN e.ends <= %(now)s THEN e.ends ELSE %(now)s END
FROM ended e WHERE r.id = e.id
RETURNING r.id, r.agent_id, r.fingerprint, e.state, r.state, r.ended_at
""".format(ends=APPROVAL_ENDS_SQL.format(r="r"))
EXPIRY = Actor.of(None, system="expiry")

REINDEX = Actor.of(None, system="reindex")


def approvals_lapse(*, source_id: int, new_fingerprint: str) -> list[int]:
    """Lapse what was approved or pending for other content of `source_id`, and raise
    the new requests with their diffs; the ids of the new requests. Runs inside the
    caller's transaction (the reindex switch)."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_LAPSE, {"source": source_id, "new": new_fingerprint, "now": timezone.now()})
            ended = sorted(cursor.fetchall())
        if not ended:
            return []
        # Audited first, for the log to read in order; the only locks taken after this
        # are the new requests' rows, for content no other transaction can see yet.
        events_record(audit_append_many([_ended_event(row, source_id, new_fingerprint) for row in ended]))
        lapsed = [(pk, agent_id, fingerprint, was) for pk, agent_id, fingerprint, was, _, _ in ended]
        follows = _follows(source_id, lapsed)
        was_pending = {pk for pk, _, _, was in lapsed if was == ApprovalRequest.State.PENDING}
        diffs = _diffs(source_id, {base for _, base in follows.values()})
        raised: list[int] = []
        for agent in Agent.objects.filter(pk__in=list(follows)).order_by("pk"):
            previous_id, base = follows[agent.pk]
            diff = diffs.get(base)
            item = RaiseItem(source_id=source_id, fingerprint=new_fingerprint, previous_id=previous_id,
                             diff=diff.text if diff else "", diff_base=base or "",
                             inherits_causes=previous_id in was_pending)
            context = f"the content changed since request {previous_id}" + (
                f": {_summary(diff)}" if diff else " (no approved text to compare it with)")
            raised += requests_raise(agent=agent, items=[item], via=ApprovalRequest.Via.REINDEX, context=context,
                                     actor=REINDEX).values()
    return raised


def _ended_event(row: tuple[int, int, str, str, str, datetime], source_id: int, new_fingerprint: str) -> AuditEvent:
    pk, agent_id, fingerprint, was, now, ended_at = row
    if now == ApprovalRequest.State.EXPIRED:
        return AuditEvent(Action.REQUEST_EXPIRED, EXPIRY, request_id=pk, source_id=source_id, agent_id=agent_id,
                          fingerprint=fingerprint, payload={"expires_at": ended_at.isoformat()})
    return AuditEvent(Action.REQUEST_LAPSED, REINDEX, request_id=pk, source_id=source_id, agent_id=agent_id,
                      fingerprint=fingerprint, payload={"was": was, "new_fingerprint": new_fingerprint})


def _follows(source_id: int, lapsed: list[tuple[int, int, str, str]]) -> dict[int, tuple[int, str | None]]:
    """agent_id -> (the lapsed request the new one follows, the fingerprint whose
    approved text the diff is against): the agent's newest lapsed approval, else its
    newest lapsed pending request with the agent's last approved fingerprint, if any."""
    follows: dict[int, tuple[int, str | None]] = {}
    for pk, agent_id, fingerprint, state in sorted(lapsed, key=lambda row: (row[3] != "approved", -row[0])):
        if agent_id not in follows:
            follows[agent_id] = (pk, fingerprint if state == "approved" else None)
    unknown = [agent_id for agent_id, (_, base) in follows.items() if base is None]
    if unknown:
        approved = (ApprovalRequest.objects.filter(source_id=source_id, agent_id__in=unknown, decided_at__isnull=False)
                    .exclude(state=ApprovalRequest.State.REJECTED).order_by("agent_id", "-decided_at")
                    .distinct("agent_id").values_list("agent_id", "fingerprint"))
        for agent_id, fingerprint in approved:
            follows[agent_id] = (follows[agent_id][0], fingerprint)
    return follows


def _diffs(source_id: int, bases: set[str | None]) -> dict[str | None, ContentDiff]:
    """The diff against each approved fingerprint the new requests follow, one per base
    whatever the number of agents (a base whose text was not kept has none)."""
    documents = documents_now(source_id)
    kept = ApprovedContent.objects.filter(source_id=source_id, fingerprint__in=[b for b in bases if b])
    return {content.fingerprint: diff_against(content, documents) for content in kept}


def _summary(diff: ContentDiff) -> str:
    parts = [f"{len(paths)} {what}" for what, paths in (("added", diff.added), ("removed", diff.removed),
                                                          ("changed", diff.changed)) if paths]
    return ", ".join(parts) + " file(s)" if parts else "no change in the indexed text"
