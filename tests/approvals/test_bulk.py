"""Deciding several requests at once (approvals.services.bulk): each through
request_decide, in its own transaction, audited as a single decision; one refused
leaves the others decided and says why."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, Decision
from approvals.services.bulk import BULK_MAX, BulkOutcome, requests_decide_bulk
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from catalog.errors import ApplicationError
from catalog.models import AuditEntry, ReferenceSource
from catalog.web import status_of
from tests.approvals.builders import document, raised
from tests.factories import import_documents, person

pytestmark = pytest.mark.django_db


@pytest.fixture
def three(kb, agent, other_agent) -> list[int]:
    keys = import_documents(catalog=kb.catalog, slug="keys", documents=[document("keys.md", "Keys.\n")])
    ReferenceSource.objects.filter(pk=keys.pk).update(requires_approval=True)
    return [raised(agent, kb.vault), raised(other_agent, kb.vault), raised(agent, keys)]


def test_each_request_is_decided_and_audited_on_its_own(three, rita):
    outcomes = requests_decide_bulk(request_ids=three, reviewer=rita, verdict="approve", comment="batch ok")

    assert outcomes == [BulkOutcome(pk, True, state="approved") for pk in three]
    assert set(ApprovalRequest.objects.values_list("state", flat=True)) == {"approved"}
    assert list(Decision.objects.values_list("comment", flat=True)) == ["batch ok"] * 3
    approvals = AuditEntry.objects.filter(action="request.approved").order_by("seq")
    assert [e.request_id for e in approvals] == three and {e.actor_name for e in approvals} == {"rita"}


def test_one_refused_leaves_the_others_decided(three, rita, rob):
    request_decide(request_id=three[1], reviewer=rob, verdict="approve")

    outcomes = requests_decide_bulk(request_ids=three, reviewer=rita, verdict="reject", comment="no")

    assert [(o.request_id, o.decided, o.state, o.code) for o in outcomes] == [
        (three[0], True, "rejected", ""), (three[1], False, "", "request_decided"), (three[2], True, "rejected", "")]
    assert "already approved" in outcomes[1].message
    assert ApprovalRequest.objects.get(pk=three[1]).state == "approved"


def test_four_eyes_refuses_only_what_it_covers(kb, three, rob):
    both = person("bea", "curator", "reviewer")
    policy_create(by=both, source=kb.vault, four_eyes=True)

    outcomes = requests_decide_bulk(request_ids=three, reviewer=both, verdict="approve")

    assert [(o.decided, o.code) for o in outcomes] == [(False, "four_eyes"), (False, "four_eyes"), (True, "")]


def test_ids_given_twice_are_decided_once(three, rita):
    outcomes = requests_decide_bulk(request_ids=[three[0], three[0]], reviewer=rita, verdict="approve")
    assert [o.request_id for o in outcomes] == [three[0]]


@pytest.mark.parametrize(("verdict", "comment", "ids", "code"), [
    ("maybe", "", None, "invalid_input"),
    ("approve", "x" * 4001, None, "invalid_input"),
    ("approve", "", [], "invalid_input"),
    ("approve", "", list(range(1, BULK_MAX + 2)), "invalid_input"),
])
def test_bad_input_decides_nothing(three, rita, verdict, comment, ids, code):
    with pytest.raises(ApplicationError) as refused:
        requests_decide_bulk(request_ids=three if ids is None else ids, reviewer=rita, verdict=verdict,
                             comment=comment)
    assert refused.value.code == code
    assert not Decision.objects.exists()


def test_only_reviewers_decide_in_bulk(three, cora):
    with pytest.raises(ApplicationError) as refused:
        requests_decide_bulk(request_ids=three, reviewer=cora, verdict="approve")
    assert (status_of(refused.value), refused.value.code) == (403, "not_reviewer")
    assert not Decision.objects.exists()
