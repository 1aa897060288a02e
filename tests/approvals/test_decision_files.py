"""The decision-file channel: a file dropped in the directory is applied once, all or
nothing, and moved aside; a bad one is moved to failed/ with the reason and decides
nothing; files still being written are left alone; two appliers at once apply once."""

from __future__ import annotations

import json
import os
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from approvals.channels.files import SETTLE, Outcome, decision_files_apply
from approvals.models import ApprovalRequest, Decision
from catalog.audit.log import audit_verify
from catalog.models import AuditEntry
from tests.approvals.builders import raised


@pytest.fixture
def inbox(tmp_path, settings) -> Path:
    settings.LECTERN_DECISION_DIR = tmp_path / "decisions"
    settings.LECTERN_DECISION_DIR.mkdir()
    return settings.LECTERN_DECISION_DIR


def drop(inbox: Path, name: str, content: object) -> Path:
    path = inbox / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def moved(outcome: Outcome) -> Path:
    assert outcome.moved_to is not None, outcome
    return outcome.moved_to


def later():
    """A moment when every file written so far has settled."""
    return timezone.now() + SETTLE + timedelta(seconds=1)


def _states(*request_ids):
    return [ApprovalRequest.objects.get(pk=pk).state for pk in request_ids]


def item(request_id, verdict="approve", reviewer="rita", **extra):
    """A decision naming its request and the content that request is for."""
    fingerprint = ApprovalRequest.objects.values_list("fingerprint", flat=True).get(pk=request_id)
    return {"request_id": request_id, "fingerprint": fingerprint, "verdict": verdict, "reviewer": reviewer, **extra}


def test_a_decision_file_is_applied_once_and_moved_to_processed(kb, agent, other_agent, rita, inbox):
    first, second = raised(agent, kb.vault), raised(other_agent, kb.vault)
    drop(inbox, "batch.json", [item(first, comment="ok"),
                               item(second, "reject")])

    (outcome,) = decision_files_apply(now=later())
    assert decision_files_apply(now=later()) == []  # nothing left to read

    assert (outcome.status, outcome.applied) == ("processed", 2)
    assert _states(first, second) == ["approved", "rejected"]
    assert set(Decision.objects.values_list("channel", flat=True)) == {"file"}
    assert list(inbox.glob("*.json")) == [] and moved(outcome).parent == inbox / "processed"
    assert moved(outcome).name.endswith("-batch.json")
    received = AuditEntry.objects.filter(action="decision.received").order_by("seq")
    assert [(e.actor_kind, e.actor_name, e.request_id) for e in received] == [("channel", "file", first),
                                                                             ("channel", "file", second)]
    assert received[0].payload["file"] == "batch.json" and len(received[0].payload["sha256"]) == 64
    assert audit_verify().broken is None


@pytest.mark.parametrize(("content", "reason"), [
    ("{not json", "not JSON"),
    ([], "a file holds one decision or a list"),
    ({"request_id": 1, "verdict": "approve"}, "missing ['reviewer']"),
    ({"request_id": 1, "verdict": "approve", "reviewer": "rita", "by": "x"}, "unknown fields ['by']"),
    ({"request_id": "1", "verdict": "approve", "reviewer": "rita"}, "request_id is a positive integer"),
    ({"request_id": 1, "verdict": "yes", "reviewer": "rita"}, "verdict is approve or reject"),
    ({"request_id": 1, "verdict": "approve", "reviewer": "nobody"}, "no active user 'nobody'"),
    ({"request_id": 1, "verdict": "approve", "reviewer": "rita", "comment": "x" * 1_100_000}, "over 1048576 bytes"),
    ({"request_id": 1, "verdict": "approve", "reviewer": "rita", "fingerprint": None}, "missing ['fingerprint']"),
    ({"request_id": 1, "verdict": "approve", "reviewer": "rita", "fingerprint": 7}, "fingerprint is the content"),
    ({"request_id": 1, "verdict": "approve", "reviewer": "rita", "fingerprint": "f" * 64}, "[fingerprint_mismatch]"),
])
def test_a_bad_file_is_moved_to_failed_with_its_reason_and_decides_nothing(kb, agent, rita, inbox, content,
                                                                           reason):
    request_id = raised(agent, kb.vault)
    if isinstance(content, dict):  # the file names the request's content, unless the case says otherwise
        content = {"fingerprint": kb.vault.fingerprint, **content}
        content = {name: value for name, value in content.items() if value is not None}
    if isinstance(content, dict) and content.get("request_id") == 1:
        content = {**content, "request_id": request_id}
    drop(inbox, "bad.json", content)

    (outcome,) = decision_files_apply(now=later())

    assert outcome.status == "failed" and reason in outcome.reason
    assert moved(outcome).parent == inbox / "failed"
    error = Path(f"{moved(outcome)}.error.txt").read_text()
    assert "not applied, nothing decided" in error and reason in error
    assert _states(request_id) == ["pending"] and not Decision.objects.exists()


def test_a_file_with_one_refused_decision_applies_none_of_them(kb, agent, other_agent, rita, inbox):
    good, decided = raised(agent, kb.vault), raised(other_agent, kb.vault)
    drop(inbox, "first.json", item(decided, "reject"))
    decision_files_apply(now=later())
    drop(inbox, "mixed.json", [item(good),
                               item(decided)])

    (outcome,) = decision_files_apply(now=later())

    assert outcome.status == "failed" and f"item 2 (request {decided})" in outcome.reason
    assert "[request_decided]" in outcome.reason
    assert _states(good, decided) == ["pending", "rejected"]
    assert Decision.objects.count() == 1
    assert not AuditEntry.objects.filter(request_id=good, action__startswith="request.approv").exists()


def test_files_still_being_written_or_not_json_are_left_alone(kb, agent, rita, inbox):
    request_id = raised(agent, kb.vault)
    decision = item(request_id)
    drop(inbox, "half.json.tmp", decision)
    drop(inbox, ".hidden.json", decision)
    fresh = drop(inbox, "fresh.json", decision)

    assert decision_files_apply(now=timezone.now()) == []  # fresh.json has not settled yet
    assert fresh.exists() and _states(request_id) == ["pending"]

    (outcome,) = decision_files_apply(now=later())
    assert outcome.name == "fresh.json" and outcome.status == "processed"
    assert (inbox / "half.json.tmp").exists() and (inbox / ".hidden.json").exists()


def test_a_file_left_claimed_by_a_dead_worker_is_taken_up_again_but_never_applied_twice(kb, agent, rita, inbox):
    request_id = raised(agent, kb.vault)
    drop(inbox, "crash.json", item(request_id))
    (applied,) = decision_files_apply(now=later())
    # as if the worker died after its commit, before moving the file on: back in processing/
    claimed = inbox / "processing" / f"{int(timezone.now().timestamp())}.dead.crash.json"
    moved(applied).rename(claimed)

    assert decision_files_apply(now=later()) == []  # its claim has not run out yet
    (again,) = decision_files_apply(now=later() + timedelta(minutes=11))

    assert again.status == "failed" and "already" in again.reason
    assert Decision.objects.count() == 1 and _states(request_id) == ["approved"]


@pytest.mark.django_db(transaction=True)
def test_two_appliers_at_once_apply_a_file_once(kb, agent, other_agent, rita, inbox):
    ids = [raised(agent, kb.vault), raised(other_agent, kb.vault)]
    drop(inbox, "race.json", [item(pk) for pk in ids])
    start, outcomes, errors = threading.Barrier(2), [], []
    now = later()

    def apply():
        try:
            start.wait()
            outcomes.extend(decision_files_apply(now=now))
        except Exception as exc:  # a failure in the thread fails the test below
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=apply) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    assert [(o.status, o.applied) for o in outcomes] == [("processed", 2)]
    assert Decision.objects.count() == 2 and _states(*ids) == ["approved", "approved"]
    assert len(list((inbox / "processed").iterdir())) == 1


def test_the_command_applies_now_and_fails_naming_a_refused_file(kb, agent, rita, inbox, capsys):
    request_id = raised(agent, kb.vault)
    path = drop(inbox, "cmd.json", item(request_id))
    drop(inbox, "junk.json", "[")
    past = (timezone.now() - SETTLE * 2).timestamp()
    for settled in (path, inbox / "junk.json"):
        os.utime(settled, (past, past))

    with pytest.raises(CommandError, match="not applied: junk.json"):
        call_command("apply_decisions")

    out = capsys.readouterr().out
    assert "cmd.json: processed: 1 decisions" in out and "junk.json: failed: not JSON" in out
    assert _states(request_id) == ["approved"]
