"""Approvals live as long as their policy says: the gate refuses them by timestamp the
moment they end, and the periodic task marks them expired (as of when they ended),
audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from approvals.models import ApprovalRequest
from approvals.selectors.gate import injection_decisions
from approvals.services.expiry import approvals_expire
from approvals.services.policies import policy_create
from approvals.tasks import EXPIRY_SCHEDULE, expire_approvals
from catalog.models import AuditEntry
from tests.approvals.builders import approved

pytestmark = pytest.mark.django_db


def test_an_approval_lives_for_the_policys_lifetime(kb, agent, cora, rita):
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = approved(agent, kb.vault, rita)
    assert approval.decided_at is not None and approval.expires_at == approval.decided_at + timedelta(hours=1)
    assert injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk].allowed

    later = timezone.now()
    ApprovalRequest.objects.filter(pk=approval.pk).update(expires_at=later - timedelta(seconds=1))

    decision = injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk]  # before the task ran
    assert (decision.allowed, decision.state) == (False, "expired")
    assert approvals_expire(now=later) == 1
    approval.refresh_from_db()
    assert (approval.state, approval.ended_at) == ("expired", later - timedelta(seconds=1))  # when it ended
    entry = AuditEntry.objects.get(action="request.expired")
    assert (entry.actor_kind, entry.actor_name, entry.request_id) == ("system", "expiry", approval.pk)
    assert approvals_expire(now=later) == 0


def test_forever_approvals_never_expire(kb, agent, rita):
    approval = approved(agent, kb.vault, rita)

    assert approval.expires_at is None
    assert expire_approvals() == 0
    assert Schedule.objects.get(name=EXPIRY_SCHEDULE).func == "approvals.tasks.expire_approvals"
