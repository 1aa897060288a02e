"""Deciding a request: a reviewer approves or rejects it, with a comment, through any
channel (the web queue, a signed webhook, a decision file, the admin).

check_decide locks and validates, do_decide writes and audits (Zulip's check_/do_
split). The source row is locked before the request row, in the order a reindex's
switch takes them, so a decision and a content change never deadlock: one waits for
the other, and a decision that comes second finds the request lapsed (409). Two
reviewers deciding one request at once: the second waits on the request's row lock,
then finds it decided and gets a 409 `request_decided`, unless more approvals were
still needed, when both approvals count.

Self-approval: none of the people whose changes a request asks to approve (`caused_by`)
decides it, approve or reject, on any channel, unless every policy covering the source
allows it (`allow_self_approval`). Four eyes goes further, for approvals: besides them,
every person answerable for the source's content now (catalog.sources.editors: served or
pending), whoever last changed the source's settings, and whoever last changed a
covering policy, whatever raised the request.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from approvals.channels.events import events_record
from approvals.models import COMMENT_MAX_CHARS, ApprovalPolicy, ApprovalRequest, Decision
from approvals.selectors.gate import Rule, self_approval_allowed, source_rules
from approvals.services.contents import approved_content_keep
from approvals.services.errors import conflict, forbidden, invalid, not_found
from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.auth import is_reviewer
from catalog.models import ContentEditor, ReferenceSource


def request_decide(*, request_id: int, reviewer: User, verdict: str, comment: str = "",
                   channel: str = Decision.Channel.WEB, fingerprint: str | None = None) -> ApprovalRequest:
    """Record `reviewer`'s `verdict` (Decision.Verdict) on a pending request:

    1. check_decide: a reviewer; the source, then the request locked; for the content
       the decision names (`fingerprint`, when the channel carries one: a signed webhook,
       a decision file); still pending, not decided by this reviewer yet, for the content
       the source holds now; not the reviewer's own change (self-approval); four eyes;
    2. do_decide: the decision; a rejection rejects; an approval counts, and once the
       rule's required distinct approvals are in, the request is approved (its expiry
       set from the lifetime, the text it covers kept for later diffs); audited.

    Raises ForbiddenError not_reviewer / self_approval / four_eyes, NotFoundError, InvalidError,
    ConflictError fingerprint_mismatch / request_decided / already_decided / content_changed."""
    with transaction.atomic():
        request, rule = check_decide(request_id=request_id, reviewer=reviewer, verdict=verdict, comment=comment,
                                     channel=channel, fingerprint=fingerprint)
        return do_decide(request=request, rule=rule, reviewer=reviewer, verdict=verdict, comment=comment,
                         channel=channel)


def check_decide(*, request_id: int, reviewer: User, verdict: str, comment: str, channel: str,
                 fingerprint: str | None = None) -> tuple[ApprovalRequest, Rule]:
    if not is_reviewer(reviewer):
        raise forbidden("only a member of the reviewer group decides approval requests", code="not_reviewer")
    if verdict not in Decision.Verdict.values:
        raise invalid(f"verdict is approve or reject, not {verdict!r}")
    if channel not in Decision.Channel.values:
        raise invalid(f"unknown channel {channel!r}")
    if len(comment) > COMMENT_MAX_CHARS:
        raise invalid(f"a comment has at most {COMMENT_MAX_CHARS} characters")
    source_id = ApprovalRequest.objects.filter(pk=request_id).values_list("source_id", flat=True).first()
    if source_id is None:
        raise not_found(f"approval request {request_id}")
    source = ReferenceSource.objects.select_for_update(no_key=True).get(pk=source_id)
    request = ApprovalRequest.objects.select_for_update().select_related("agent").get(pk=request_id)
    request.source = source
    if fingerprint is not None and fingerprint != request.fingerprint:
        raise conflict(f"the decision is for content {fingerprint[:12]}, request {request.pk} for content "
                       f"{request.fingerprint[:12]}; it was not recorded", code="fingerprint_mismatch",
                       fingerprint=request.fingerprint)
    if request.state != ApprovalRequest.State.PENDING:
        raise conflict(f"request {request.pk} is already {request.state}; this decision was not recorded",
                       code="request_decided", state=request.state)
    if Decision.objects.filter(request=request, reviewer=reviewer).exists():
        raise conflict(f"{reviewer.get_username()} has already decided request {request.pk}", code="already_decided")
    if source.fingerprint != request.fingerprint:
        raise conflict(f"the content of {source} changed since request {request.pk} was raised",
                       code="content_changed")
    rule = source_rules(agent=request.agent, source_ids=[source.pk]).get(source.pk)
    rule_now = rule.rule if rule is not None else Rule()  # no longer governed: one approval settles it
    causes = set(request.caused_by.values_list("pk", flat=True))
    if rule_now.four_eyes and reviewer.pk in causes | _changed_by(source, rule_now):
        raise forbidden(f"four eyes: {reviewer.get_username()} changed {source} or a policy covering it, "
                        "so another reviewer decides", code="four_eyes")
    if reviewer.pk in causes and not self_approval_allowed(rule_now):
        raise forbidden(f"self-approval: request {request.pk} asks to approve a change {reviewer.get_username()} "
                        "made, so another reviewer decides it", code="self_approval")
    return request, rule_now


def _changed_by(source: ReferenceSource, rule: Rule) -> set[int]:
    """Who is answerable for the source's content now (its authors and pending editors),
    who last changed its settings, and who last changed each policy covering it."""
    people = set(ApprovalPolicy.objects.filter(pk__in=rule.policy_ids, changed_by__isnull=False)
                 .values_list("changed_by_id", flat=True))
    people.update(ContentEditor.objects.filter(source=source).values_list("user_id", flat=True))
    if source.changed_by_id is not None:
        people.add(source.changed_by_id)
    return people


def do_decide(*, request: ApprovalRequest, rule: Rule, reviewer: User, verdict: str, comment: str,
              channel: str) -> ApprovalRequest:
    now = timezone.now()
    Decision.objects.create(request=request, reviewer=reviewer, verdict=verdict, comment=comment, channel=channel)
    if verdict == Decision.Verdict.REJECT:
        request.state, request.decided_at, action = ApprovalRequest.State.REJECTED, now, Action.REQUEST_REJECTED
    else:
        request.approvals += 1
        action = Action.APPROVAL_RECORDED
        if request.approvals >= rule.required:
            request.state, request.decided_at, action = ApprovalRequest.State.APPROVED, now, Action.REQUEST_APPROVED
            request.expires_at = now + rule.lifetime if rule.lifetime is not None else None
            approved_content_keep(source_id=request.source_id, fingerprint=request.fingerprint)
    request.save(update_fields=["state", "approvals", "decided_at", "expires_at"])
    entry = audit_append(AuditEvent(action, Actor.of(reviewer), request_id=request.pk, source_id=request.source_id,
                                    agent_id=request.agent_id, fingerprint=request.fingerprint, payload={
                                        "verdict": verdict, "comment": comment, "channel": channel,
                                        "approvals": request.approvals, "required": rule.required,
                                        "expires_at": _iso(request.expires_at)}))
    events_record([entry])
    return request


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
