"""The audit log: every governance event appended with who, when, what and the hash of
the entry before; the database refuses to change or remove entries (the app's role for
want of the privilege, even the owner by the trigger); audit_verify finds an entry
altered behind the application's back; appends never fork the chain.

Tampering takes the owner's connection (tests/owner.py) and commits, so the tests that
tamper are transactional; tests/approvals/test_audit_checkpoints.py covers what only the
checkpoints reveal (a cut tail)."""

from __future__ import annotations

import csv
import io
import json
import threading

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, connections, transaction

from approvals.services.decisions import request_decide
from catalog.agents import agent_token_rotate, hash_token
from catalog.audit.chain import GENESIS, entry_hash
from catalog.audit.export import audit_entries, audit_write_csv, audit_write_json
from catalog.audit.log import Action, Actor, AuditEvent, audit_append, audit_verify
from catalog.models import AuditEntry
from tests.approvals.builders import raised
from tests.approvals.concurrency import Holder, Session, waiting_on_a_lock
from tests.factories import agent_with_token
from tests.owner import audit_tamper, owner_execute

pytestmark = pytest.mark.django_db


def event(n: int = 0) -> AuditEvent:
    return AuditEvent("test.event", Actor.of(None, system="tests"), payload={"n": n, "text": "é ✓"})


def verify_output() -> str:
    """audit_verify's line about the chain (what it says of the checkpoints aside: none here)."""
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    return out.getvalue().strip().split("; ")[0]


def test_entries_chain_each_to_the_one_before(kb, agent, rita):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve", comment="ok")

    entries = list(AuditEntry.objects.order_by("seq"))
    assert [e.action for e in entries] == ["token.issued", "request.raised", "request.approved"]
    assert [e.seq for e in entries] == [1, 2, 3]
    assert entries[0].prev_hash == GENESIS
    assert all(later.prev_hash == earlier.hash for earlier, later in zip(entries, entries[1:], strict=False))
    approval = entries[2]
    assert (approval.actor_kind, approval.actor_id, approval.actor_name) == ("user", rita.pk, "rita")
    assert (approval.request_id, approval.source_id, approval.agent_id) == (request_id, kb.vault.pk, agent.pk)
    assert approval.fingerprint == kb.vault.fingerprint and approval.at is not None
    assert verify_output() == "audit chain intact: 3 entries"


REMOVALS = [
    "UPDATE approvals_auditentry SET actor_name = 'mallory'",
    "DELETE FROM approvals_auditentry",
    "TRUNCATE approvals_auditentry",
]


@pytest.mark.parametrize("statement", REMOVALS)
def test_the_app_may_not_change_or_remove_entries(statement):
    audit_append(event())

    with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)

    assert AuditEntry.objects.get().actor_name == "tests"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("statement", REMOVALS)
def test_even_the_owner_is_refused_by_the_trigger_unless_it_disables_it(statement):
    audit_append(event())

    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        owner_execute([(statement, ())])

    assert AuditEntry.objects.get().actor_name == "tests"


def test_the_orm_and_the_admin_path_are_refused_too():
    entry = audit_append(event())

    with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(action="nothing")
    with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic():
        entry.delete()


@pytest.mark.django_db(transaction=True)
def test_audit_verify_names_an_entry_altered_behind_the_applications_back():
    for n in range(5):
        audit_append(event(n))
    assert verify_output() == "audit chain intact: 5 entries"
    stored = AuditEntry.objects.get(seq=3).hash

    audit_tamper("UPDATE approvals_auditentry SET payload = %s WHERE seq = 3", [json.dumps({"n": 99, "text": "é ✓"})])

    with pytest.raises(CommandError) as broken:
        verify_output()
    message = str(broken.value)
    assert message.startswith("audit chain broken at seq 3: hash expected ")
    assert f"found {stored}" in message and "this entry was changed" in message


@pytest.mark.django_db(transaction=True)
def test_an_altered_entry_whose_hash_was_recomputed_breaks_the_next_link():
    for n in range(4):
        audit_append(event(n))
    entry = AuditEntry.objects.get(seq=2)
    record = {**{f: getattr(entry, f) for f in ("seq", "at", "actor_kind", "actor_id", "actor_name", "action",
                                                "request_id", "policy_id", "source_id", "agent_id", "fingerprint")},
              "payload": {"n": 42, "text": "é ✓"}}
    forged = entry_hash(record, entry.prev_hash)

    audit_tamper("UPDATE approvals_auditentry SET payload = %s, hash = %s WHERE seq = 2",
           [json.dumps(record["payload"]), forged])

    broken = audit_verify().broken
    assert broken is not None and (broken.seq, broken.field, broken.found) == (3, "prev_hash", entry.hash)
    assert broken.expected == forged


@pytest.mark.django_db(transaction=True)
def test_a_removed_entry_is_named():
    for n in range(4):
        audit_append(event(n))

    audit_tamper("DELETE FROM approvals_auditentry WHERE seq = 2")

    broken = audit_verify().broken
    assert broken is not None and (broken.seq, broken.field, broken.expected, broken.found) == (3, "seq", "2", "3")


def test_a_token_issue_is_audited_without_the_token():
    agent, token = agent_with_token(name="scribe")
    _, rotated = agent_token_rotate(name="scribe")

    entries = list(AuditEntry.objects.filter(action=Action.TOKEN_ISSUED, agent_id=agent.pk).order_by("seq"))
    assert [e.payload["created"] for e in entries] == [True, False]
    assert entries[0].payload["token_hint"] == token[:8] and entries[1].payload["token_hint"] == rotated[:8]
    assert entries[0].actor_kind == "system"
    stored = json.dumps([{f.name: str(getattr(e, f.name)) for f in AuditEntry._meta.fields} for e in entries])
    for secret in (token, rotated, hash_token(token), hash_token(rotated)):
        assert secret not in stored


def test_a_persons_edit_of_a_source_is_audited(kb, cora):
    from catalog.sources.editing import upload_put

    upload_put(source=kb.notes, path="extra.md", title="Extra", text="More notes.", by=cora)

    entry = AuditEntry.objects.get(action=Action.SOURCE_CHANGED)
    assert (entry.actor_name, entry.source_id, entry.payload["fields"]) == ("cora", kb.notes.pk, ["files"])
    kb.notes.refresh_from_db()
    assert kb.notes.changed_by == cora


@pytest.mark.django_db(transaction=True)
def test_an_append_waits_for_the_one_under_way_and_chains_after_it():
    # given one append written, its transaction still open
    first = Holder(lambda: audit_append(event(1))).hold()
    # when another appends meanwhile, it waits for the first to commit
    second = Session(lambda: audit_append(event(2)))
    second.start()
    waiting_on_a_lock(second)

    first.release()

    # then it reads the first entry and chains after it: no fork
    assert second.outcome().prev_hash == AuditEntry.objects.get(seq=1).hash
    assert list(AuditEntry.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2]
    assert audit_verify().broken is None


@pytest.mark.django_db(transaction=True)
def test_many_appenders_at_once_leave_one_unbroken_chain():
    start = threading.Barrier(4)

    def appender(base: int) -> None:
        start.wait()
        try:
            for n in range(15):
                audit_append(event(base + n))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=appender, args=(100 * i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert AuditEntry.objects.count() == 60
    assert list(AuditEntry.objects.order_by("seq").values_list("seq", flat=True)) == list(range(1, 61))
    assert audit_verify().broken is None


def test_entries_export_as_csv_and_json_with_filters(kb, agent, rita):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    entries = audit_entries(action="request.")

    out = io.StringIO()
    assert audit_write_json(entries, out) == 2
    rows = json.loads(out.getvalue())
    assert [r["action"] for r in rows] == ["request.raised", "request.approved"]
    assert rows[1]["hash"] == AuditEntry.objects.get(action="request.approved").hash

    out = io.StringIO()
    assert audit_write_csv(audit_entries(actor="rita"), out) == 1
    (row,) = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert row["action"] == "request.approved" and json.loads(row["payload"])["verdict"] == "approve"
    assert list(audit_entries(request_id=request_id, action="request.raised")) == [
        AuditEntry.objects.get(action="request.raised")]

    out = io.StringIO()
    call_command("audit_export", "--format", "json", "--action", "request.approved", stdout=out)
    assert [r["seq"] for r in json.loads(out.getvalue())] == [rows[1]["seq"]]
