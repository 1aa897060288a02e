"""Raising approval requests: by the gate when a read path withholds a source from an
agent, by a reindex when approved or requested content changes, or by hand.

Never two pending for the same (source, agent, fingerprint): a unique partial index
(`one_pending_request_per_content`) says so, and the insert is ON CONFLICT DO NOTHING,
so read paths racing each other raise one request and all get its id.

Each request records who caused it (`caused_by`): every person whose edits the content
it is raised for came from, read in the insert itself from the source's served content
editors (catalog.sources.editors). A reindex raises inside the switch to the new
content, after the switch made the people whose edits it holds its authors; a read path
raises for the content indexed now, whose authors they still are (not whoever edited it
since). A request that follows a pending one for older content, with a diff against
what was approved before both, also names the people the older one named: the diff
shows their changes too. request_decide keeps all of them from deciding it
(self-approval) unless the policies allow it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from approvals.channels.events import events_record
from approvals.models import CONTEXT_MAX_CHARS, ApprovalRequest
from approvals.selectors.gate import InjectionDecision
from approvals.services.errors import forbidden, invalid
from approvals.services.notifications import reviewers_notify_on_commit
from catalog.audit.log import Action, Actor, AuditEvent, audit_append_many
from catalog.auth import is_curator
from catalog.models import Agent, ReferenceSource


@dataclass(frozen=True)
class RaiseItem:
    source_id: int
    fingerprint: str
    previous_id: int | None = None
    diff: str = ""
    diff_base: str = ""
    # It follows (`previous_id`) a pending request for older content, with a diff
    # against what was approved before both: it names whom that one named too.
    inherits_causes: bool = False


def excerpt(text: str, limit: int = CONTEXT_MAX_CHARS) -> str:
    """`text` cut to `limit` characters, marked when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


CONTEXT_TEXT_CHARS = 300


def request_context(what: str, text: str = "") -> str:
    """What a read path tells reviewers about why it asked: `what` (the operation), then
    the head of the agent's `text` when Lectern keeps agents' text at all (a request
    keeps what a trace would: LECTERN_TRACE_STORE_TEXT)."""
    head = " ".join(text.split())
    if not head or not settings.LECTERN_TRACE_STORE_TEXT:
        return what
    return f"{what}: {excerpt(head, CONTEXT_TEXT_CHARS)}"


_INSERT = """
WITH raised AS (
    INSERT INTO approvals_approvalrequest (source_id, agent_id, fingerprint, raised_via, context, state, approvals,
                                           previous_id, diff, diff_base, created_at)
    SELECT x.source_id, %(agent)s, x.fingerprint, %(via)s, %(context)s, 'pending', 0, x.previous_id, x.diff,
           x.diff_base, %(now)s
    FROM unnest(%(sources)s::bigint[], %(fingerprints)s::text[], %(previous)s::bigint[], %(diffs)s::text[],
                %(bases)s::text[]) AS x(source_id, fingerprint, previous_id, diff, diff_base)
    JOIN catalog_referencesource s ON s.id = x.source_id
    ORDER BY x.source_id
    ON CONFLICT (source_id, agent_id, fingerprint) WHERE state = 'pending' DO NOTHING
    RETURNING id, source_id, fingerprint, previous_id
), causes AS (
    INSERT INTO approvals_approvalrequest_caused_by (approvalrequest_id, user_id)
    SELECT r.id, e.user_id FROM raised r JOIN catalog_contenteditor e ON e.source_id = r.source_id AND NOT e.pending
    UNION
    SELECT r.id, c.user_id
    FROM raised r JOIN approvals_approvalrequest_caused_by c ON c.approvalrequest_id = r.previous_id
    WHERE r.previous_id = ANY(%(inheriting)s::bigint[])
    RETURNING approvalrequest_id, user_id
)
SELECT r.id, r.source_id, r.fingerprint,
       array(SELECT c.user_id FROM causes c WHERE c.approvalrequest_id = r.id ORDER BY c.user_id)
FROM raised r ORDER BY r.id
"""


def requests_raise(*, agent: Agent, items: Sequence[RaiseItem], via: str, context: str = "",
                   actor: Actor | None = None) -> dict[int, int]:
    """source_id -> the pending request of `agent` for each item's (source, fingerprint):
    raised now (audited, as done by `actor`, the agent by default; reviewers are
    e-mailed once it commits), or the one already pending. A source deleted meanwhile is left out."""
    if via not in ApprovalRequest.Via.values:
        raise ValueError(f"unknown raised_via {via!r}")
    if not items:
        return {}
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_INSERT, {
                "agent": agent.pk, "via": via, "context": excerpt(context), "now": timezone.now(),
                "sources": [i.source_id for i in items], "fingerprints": [i.fingerprint for i in items],
                "previous": [i.previous_id for i in items], "diffs": [i.diff for i in items],
                "bases": [i.diff_base for i in items],
                "inheriting": [i.previous_id for i in items if i.inherits_causes]})
            inserted = cursor.fetchall()
        found = {source_id: request_id for request_id, source_id, _, _ in inserted}
        waiting = [i for i in items if i.source_id not in found]
        if waiting:  # pending already (raised by a read path before this one, or beside it)
            pending = ApprovalRequest.objects.filter(
                agent=agent, state=ApprovalRequest.State.PENDING, source_id__in=[i.source_id for i in waiting],
                fingerprint__in=[i.fingerprint for i in waiting]).values_list("source_id", "fingerprint", "id")
            wanted = {(i.source_id, i.fingerprint) for i in waiting}
            found.update({source: pk for source, fingerprint, pk in pending if (source, fingerprint) in wanted})
        names = _usernames({user_id for *_, caused_by in inserted for user_id in caused_by})
        events_record(audit_append_many([
            AuditEvent(Action.REQUEST_RAISED, actor or Actor.of(agent), request_id=request_id, source_id=source_id,
                       agent_id=agent.pk, fingerprint=fingerprint,
                       payload={"raised_via": via, "context": excerpt(context, 200),
                                "caused_by": sorted(names[user_id] for user_id in caused_by)})
            for request_id, source_id, fingerprint, caused_by in inserted]))
        reviewers_notify_on_commit([request_id for request_id, *_ in inserted])
    return found


def withheld_requests_raise(*, agent: Agent | None, decisions: Mapping[int, InjectionDecision], via: str,
                            context: str = "") -> dict[int, InjectionDecision]:
    """The gate's `decisions` (source pk -> decision, as the read path got them from
    approvals.selectors.gate) with a request raised for each that is due, once, and named:
    what a read path that wants what it was denied calls (`via`: enrichment, select,
    search). `context`: what the requests keep of the text that raised them. No agent
    (a person signed in) raises nothing. Nothing is read again: the decisions carry
    the fingerprint and the request each new one follows."""
    due = {pk: decision for pk, decision in decisions.items() if decision.request_due}
    if agent is None or not due:
        return dict(decisions)
    raised = requests_raise(agent=agent, via=via, context=context, items=[
        RaiseItem(source_id=pk, fingerprint=decision.fingerprint, previous_id=decision.previous_id)
        for pk, decision in due.items()])
    return {pk: decision.raised(raised[pk]) if pk in raised and pk in due else decision
            for pk, decision in decisions.items()}


def _usernames(user_ids: set[int]) -> dict[int, str]:
    if not user_ids:
        return {}
    return dict(User.objects.filter(pk__in=user_ids).values_list("pk", "username"))


def request_raise(*, source: ReferenceSource, agent: Agent, by: User | Agent, context: str = "") -> ApprovalRequest:
    """A request raised by hand (raised_via manual) for the source as it is now: by a
    curator for any agent, or by an agent for itself. It may follow a rejection or a
    revocation, which the gate never raises anew on its own. Idempotent while one is
    pending for the same content."""
    if not (by == agent or (not isinstance(by, Agent) and is_curator(by))):
        raise forbidden("only a curator, or the agent itself, raises a request for an agent", code="not_curator")
    if not agent.catalogs.filter(pk=source.catalog_id).exists():
        raise invalid(f"agent {agent.name!r} does not read catalog {source.catalog.slug!r}")
    fingerprint = ReferenceSource.objects.values_list("fingerprint", flat=True).get(pk=source.pk)
    raised = requests_raise(agent=agent, via=ApprovalRequest.Via.MANUAL, context=context, actor=Actor.of(by),
                            items=[RaiseItem(source_id=source.pk, fingerprint=fingerprint)])
    return ApprovalRequest.objects.get(pk=raised[source.pk])
