"""Who may do what: a permission matrix over named people in each role. Roles are the
groups `curator` and `reviewer` (a person may hold both; a superuser holds both); staff
status is no role. A refusal changes nothing, the audit log included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from approvals.models import ApprovalPolicy, ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from approvals.services.requests import request_raise
from approvals.services.revocation import approval_revoke
from catalog.auth import is_curator, is_reviewer
from catalog.errors import ApplicationError
from catalog.models import AuditEntry, ReferenceSource
from catalog.web import status_of
from tests.approvals.builders import approved, raised
from tests.factories import person

pytestmark = pytest.mark.django_db

PEOPLE: dict[str, dict[str, Any]] = {
    "nobody": {},
    "staff": {"is_staff": True},
    "curator": {"roles": ("curator",)},
    "reviewer": {"roles": ("reviewer",)},
    "both": {"roles": ("curator", "reviewer")},
    "superuser": {"is_staff": True, "is_superuser": True},
}


def someone(kind: str):
    spec = dict(PEOPLE[kind])
    return person(f"{kind}-person", *spec.pop("roles", ()), **spec)


def state(kb) -> tuple:
    return (ApprovalPolicy.objects.count(), Decision.objects.count(), AuditEntry.objects.count(),
            list(ApprovalRequest.objects.order_by("pk").values_list("state", flat=True)),
            ReferenceSource.objects.get(pk=kb.notes.pk).changed_by_id)


def create_policy(kb, agent, who):
    policy_create(by=who, source=kb.notes)


def approve(kb, agent, who):
    request_decide(request_id=raised(agent, kb.vault), reviewer=who, verdict="approve")


def revoke(kb, agent, who):
    approval = approved(agent, kb.vault, someone_else())
    approval_revoke(request_id=approval.pk, by=who)


def raise_by_hand(kb, agent, who):
    request_raise(source=kb.vault, agent=agent, by=who)


def someone_else():
    return person("another-reviewer", "reviewer")


OPERATIONS: dict[str, tuple[Callable, set[str]]] = {
    "create a policy": (create_policy, {"curator", "both", "superuser"}),
    "decide a request": (approve, {"reviewer", "both", "superuser"}),
    "revoke an approval": (revoke, {"reviewer", "both", "superuser"}),
    "raise a request by hand": (raise_by_hand, {"curator", "both", "superuser"}),
}


@pytest.mark.parametrize("kind", PEOPLE)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_services_admit_exactly_their_roles(kb, agent, operation, kind):
    act, admitted = OPERATIONS[operation]
    who = someone(kind)
    if operation in ("decide a request", "revoke an approval"):
        raised(agent, kb.vault)  # what the operation acts on exists before the refusal is measured
    before = state(kb)

    if kind in admitted:
        act(kb, agent, who)
        assert state(kb) != before
    else:
        with pytest.raises(ApplicationError) as refused:
            act(kb, agent, who)
        assert status_of(refused.value) == 403
        if operation != "revoke an approval":  # its setup approves first, as someone else
            assert state(kb) == before


@pytest.mark.parametrize("kind", PEOPLE)
def test_the_role_helpers(kind):
    who = someone(kind)

    assert is_curator(who) == (kind in ("curator", "both", "superuser"))
    assert is_reviewer(who) == (kind in ("reviewer", "both", "superuser"))


def test_an_agent_is_never_a_reviewer(agent):
    assert not is_reviewer(agent)


@pytest.mark.parametrize(("kind", "status"), [
    ("nobody", 404), ("staff", 404), ("reviewer", 403), ("curator", 202), ("both", 202), ("superuser", 202)])
def test_editing_a_source_through_the_api_takes_a_curator(kb, kind, status, django_capture_on_commit_callbacks):
    client = APIClient()
    client.force_login(who := someone(kind))
    before = state(kb)

    response = client.put("/api/v1/catalogs/kb/sources/notes/files", {"path": "n2.md", "text": "More."},
                          format="json")

    assert response.status_code == status, response.content
    if status == 202:  # and who did it is recorded, for four eyes
        assert ReferenceSource.objects.get(pk=kb.notes.pk).changed_by == who
    else:
        assert state(kb) == before


@pytest.mark.parametrize(("kind", "status"), [
    ("nobody", 404), ("staff", 404), ("reviewer", 200), ("curator", 200), ("superuser", 200)])
def test_searching_with_a_session_takes_a_role(kb, kind, status):
    client = APIClient()
    client.force_login(someone(kind))

    response = client.post("/api/v1/search", {"catalog": "kb", "query": "notes", "mode": "bm25"}, format="json")

    assert response.status_code == status


def test_the_roles_exist_with_their_admin_permissions():
    curator, reviewer = Group.objects.get(name="curator"), Group.objects.get(name="reviewer")
    curator_perms = set(curator.permissions.values_list("codename", flat=True))
    reviewer_perms = set(reviewer.permissions.values_list("codename", flat=True))
    assert {"add_approvalpolicy", "change_approvalpolicy", "change_referencesource"} <= curator_perms
    assert "add_decision" not in curator_perms
    assert {"view_approvalrequest", "add_decision", "view_auditentry"} <= reviewer_perms
    assert not {p for p in reviewer_perms if p.startswith(("change_", "delete_"))}
    assert not {p for p in curator_perms | reviewer_perms if p.endswith("_auditentry") and not p.startswith("view")}
