"""Checkpoints anchor the audit chain's head outside the database: each is a file in
LECTERN_AUDIT_CHECKPOINT_DIR naming the newest entry (seq, hash) and the count, signed
with a key the database does not hold. audit_verify then sees what the chain alone
cannot: its tail cut off (or cut and grown again), an entry rewritten with every later
hash recomputed, and a checkpoint file forged or altered. Each checkpoint names the one
before it, so one removed from the middle shows; the newest ones removed while the log
grows on show as stale (the clock is moved, never slept on).

The tampering runs as the schema's owner (tests/owner.py), which is what it takes now
that the app's own role cannot (tests/config/test_database_roles.py); it commits, so
these tests are transactional."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings as django_settings
from django.core.checks import WARNING, run_checks
from django.core.management import CommandError, call_command
from django_q.models import Schedule

from approvals.tasks import CHECKPOINT_SCHEDULE, write_audit_checkpoint
from catalog.audit.anchors import checkpoint_key, checkpoint_parse, key_id
from catalog.audit.chain import entry_hash
from catalog.audit.checkpoints import audit_checkpoint_write, checkpoint_files, signing_key
from catalog.audit.log import Actor, AuditEvent, audit_append, audit_verify
from catalog.models import AuditEntry
from tests.approvals.concurrency import Holder, Session, waiting_on_a_lock
from tests.owner import audit_tamper

pytestmark = pytest.mark.django_db(transaction=True)

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def append(count: int) -> None:
    for n in range(count):
        audit_append(AuditEvent("test.event", Actor.of(None, system="tests"), payload={"n": n}))


def verify() -> str:
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    return out.getvalue().strip()


def verify_fails(*, returncode: int = 1) -> str:
    """audit_verify's one line when it fails: exit 1 for what proves tampering, 3 for
    checkpoints gone stale (tampering, or no worker writing them)."""
    with pytest.raises(CommandError) as failed:
        verify()
    message = str(failed.value)
    assert "\n" not in message
    assert failed.value.returncode == returncode, message
    return message


def checkpoint() -> Path:
    out = io.StringIO()
    call_command("audit_checkpoint", stdout=out)
    written = checkpoint_files(_directory())[-1]
    seq = json.loads(written.read_text())["seq"]
    assert out.getvalue().strip() == f"audit checkpoint written: {written} (seq {seq})"
    return written


def _directory() -> Path:
    return Path(django_settings.LECTERN_AUDIT_CHECKPOINT_DIR)


def test_a_cut_tail_fails_audit_verify():
    # given six entries and a checkpoint naming the sixth
    append(6)
    written = checkpoint()
    assert verify() == f"audit chain intact: 6 entries; 1 checkpoint holds (newest: seq 6, {written.name})"

    # when the two newest are deleted behind the application's back
    audit_tamper("DELETE FROM approvals_auditentry WHERE seq > 4")

    # then the chain alone still holds, but the checkpoint names an entry it lacks
    assert audit_verify(checkpoints=False).broken is None
    assert verify_fails() == (f"audit chain cut: checkpoint {written.name} names seq 6, but the chain ends at "
                              "seq 4 (entries removed from its tail)")


def test_a_tail_cut_and_grown_again_fails_audit_verify():
    append(5)
    written = checkpoint()
    recorded = AuditEntry.objects.get(seq=5).hash
    audit_tamper("DELETE FROM approvals_auditentry WHERE seq > 3")

    append(2)  # the app goes on: seq 4 and 5 again, chained after seq 3

    assert audit_verify(checkpoints=False).broken is None
    found = AuditEntry.objects.get(seq=5).hash
    assert verify_fails() == (f"audit chain rewritten: seq 5 has hash {found}, checkpoint {written.name} recorded "
                              f"{recorded} (entries at or before seq 5 were changed)")


def test_an_entry_rewritten_with_every_later_hash_recomputed_fails_audit_verify():
    # given a checkpoint at seq 4
    append(4)
    written = checkpoint()
    recorded = AuditEntry.objects.get(seq=4).hash

    # when entry 2 is rewritten and every hash from it on recomputed, so the chain holds
    prev = AuditEntry.objects.get(seq=1).hash
    rewrites = []
    for entry in AuditEntry.objects.filter(seq__gte=2).order_by("seq"):
        payload = {"n": 99} if entry.seq == 2 else entry.payload
        record = {**{f: getattr(entry, f) for f in ("seq", "at", "actor_kind", "actor_id", "actor_name", "action",
                                                    "request_id", "policy_id", "source_id", "agent_id",
                                                    "fingerprint")}, "payload": payload}
        prev_hash, prev = prev, entry_hash(record, prev)
        rewrites.append((entry.seq, json.dumps(payload), prev_hash, prev))
    for seq, payload, prev_hash, new_hash in rewrites:
        audit_tamper("UPDATE approvals_auditentry SET payload = %s, prev_hash = %s, hash = %s WHERE seq = %s",
                     [payload, prev_hash, new_hash, seq])
    assert audit_verify(checkpoints=False).broken is None

    # then the checkpoint's hash no longer matches
    assert verify_fails() == (f"audit chain rewritten: seq 4 has hash {prev}, checkpoint {written.name} recorded "
                              f"{recorded} (entries at or before seq 4 were changed)")


def test_a_forged_or_altered_checkpoint_fails_audit_verify():
    append(3)
    written = checkpoint()

    # an attacker who cut the tail writes a checkpoint of their own for the shorter chain
    forged = json.loads(written.read_text())
    forged.update(seq=2, hash=AuditEntry.objects.get(seq=2).hash, count=2)
    written.write_text(json.dumps(forged))

    assert verify_fails() == (f"audit checkpoint {written.name}: signature does not match (forged, altered, or "
                              "signed with another key)")


def test_a_checkpoint_signed_with_another_key_fails_and_one_unreadable_is_named(settings):
    append(2)
    written = checkpoint()
    settings.LECTERN_AUDIT_CHECKPOINT_KEY = "another-key-" + "x" * 40

    assert verify_fails() == (f"audit checkpoint {written.name}: signature does not match (forged, altered, or "
                              "signed with another key)")

    written.write_text("{not json")
    assert verify_fails().startswith(f"audit checkpoint {written.name}: not a checkpoint (")


def test_a_checkpoint_is_written_only_when_the_head_moved_and_holds_no_secret(settings):
    settings.LECTERN_AUDIT_CHECKPOINT_KEY = "checkpoint-key-" + "k" * 40
    # nothing to anchor yet
    assert audit_checkpoint_write() is None
    append(2)
    first = audit_checkpoint_write()
    assert first is not None

    assert audit_checkpoint_write() is None  # the head has not moved
    append(1)
    second = audit_checkpoint_write()

    assert second is not None and [p.name for p in checkpoint_files(_directory())] == [first.path.name,
                                                                                       second.path.name]
    body = json.loads(second.path.read_text())
    head = AuditEntry.objects.get(seq=3)
    assert (body["seq"], body["hash"], body["count"]) == (3, head.hash, 3)
    assert set(body) == {"kind", "version", "seq", "hash", "count", "at", "previous", "key_id", "signature"}
    assert json.loads(first.path.read_text())["previous"] is None
    assert body["previous"] == {"name": first.path.name, "sha256": hashlib.sha256(first.path.read_bytes()).hexdigest()}
    text = second.path.read_text()
    for secret in (settings.SECRET_KEY, settings.LECTERN_AUDIT_CHECKPOINT_KEY, signing_key().hex()):
        assert secret not in text
    assert verify() == f"audit chain intact: 3 entries; 2 checkpoints hold (newest: seq 3, {second.path.name})"


def test_verify_says_when_there_is_no_checkpoint_yet():
    append(1)

    assert verify() == f"audit chain intact: 1 entries; no checkpoint in {_directory()} yet"


def test_the_schedule_writes_checkpoints_every_few_minutes(settings):
    schedule = Schedule.objects.get(name=CHECKPOINT_SCHEDULE)
    assert (schedule.func, schedule.minutes) == ("approvals.tasks.write_audit_checkpoint",
                                                 settings.LECTERN_AUDIT_CHECKPOINT_MINUTES)
    append(1)

    assert write_audit_checkpoint().startswith("written: ")
    assert write_audit_checkpoint() == "unchanged"


def test_a_checkpoint_directory_that_cannot_be_written_ends_the_command_in_one_line(settings, tmp_path):
    append(1)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings.LECTERN_AUDIT_CHECKPOINT_DIR = blocker / "checkpoints"

    with pytest.raises(CommandError, match=r"^audit checkpoint: cannot write to .*a-file/checkpoints: "):
        call_command("audit_checkpoint", stdout=io.StringIO())


# --- checkpoints removed ---------------------------------------------------------------


def three_checkpoints() -> list[Path]:
    written = []
    for count in (2, 1, 1):
        append(count)
        written.append(checkpoint())
    return written


def test_a_checkpoint_removed_from_the_middle_fails_audit_verify_naming_it():
    # given three checkpoints, each naming the one before it
    first, second, third = three_checkpoints()
    assert verify() == f"audit chain intact: 4 entries; 3 checkpoints hold (newest: seq 4, {third.name})"

    # when the middle one is deleted
    second.unlink()

    # then the one after it names what is missing
    assert verify_fails() == (f"audit checkpoint {third.name} names {second.name} as the one before it, but "
                              f"{first.name} precedes it (checkpoints removed or replaced)")


def twin(path: Path) -> bytes:
    """Another checkpoint naming the same one before it, validly signed (what two
    writers at once would make, were they not kept apart)."""
    point = checkpoint_parse(path.read_text(), [signing_key()])
    return json.dumps(replace(point, at="2020-01-01T00:00:00.000000+00:00").signed(signing_key())).encode()


@pytest.mark.parametrize("copied", ["first", "third", "twin"])
def test_a_checkpoint_overwritten_with_another_validly_signed_one_fails_naming_it(copied):
    first, second, third = three_checkpoints()

    # its signature holds; what it names as the checkpoint before it, or the next one's record of it, does not
    second.write_bytes({"first": first.read_bytes, "third": third.read_bytes, "twin": lambda: twin(second)}[copied]())

    assert verify_fails() == {
        "first": (f"audit checkpoint {second.name} names no checkpoint before it, but {first.name} precedes it "
                  "(checkpoints removed or replaced)"),
        "third": (f"audit checkpoint {second.name} names {second.name} as the one before it, but {first.name} "
                  "precedes it (checkpoints removed or replaced)"),
        "twin": f"audit checkpoint {second.name} was replaced: {third.name} recorded other content for it",
    }[copied]


def test_the_oldest_checkpoints_may_be_archived():
    # the newest checkpoint anchors every entry up to it: moving the oldest aside loses nothing
    first, second, third = three_checkpoints()
    first.unlink()

    assert verify() == f"audit chain intact: 4 entries; 2 checkpoints hold (newest: seq 4, {third.name})"


def test_the_newest_checkpoints_removed_while_the_log_grew_fail_as_stale(settings):
    settings.LECTERN_AUDIT_CHECKPOINT_MINUTES = 5
    with time_machine.travel(START, tick=False) as clock:
        # given a checkpoint every five minutes
        append(2)
        first = checkpoint()
        for _ in range(2):
            clock.shift(timedelta(minutes=5))
            append(1)
            newest = checkpoint()

        # when the two newest are deleted and the log grows on without checkpoints
        for path in checkpoint_files(_directory())[1:]:
            path.unlink()
        clock.shift(timedelta(minutes=4))
        append(1)

        # then while seq 3 is no older than two intervals, nothing is said
        clock.shift(timedelta(minutes=1))
        assert verify() == f"audit chain intact: 5 entries; 1 checkpoint holds (newest: seq 2, {first.name})"

        # once it is, audit_verify says the checkpoints stopped while the log grew
        clock.shift(timedelta(microseconds=1))
        assert verify_fails(returncode=3) == (
            "audit checkpoints stale: seq 3 (appended 2026-03-02T09:05:00Z, 10 minutes ago) and after have no "
            f"checkpoint, over twice LECTERN_AUDIT_CHECKPOINT_MINUTES (5); the newest, {first.name}, names seq 2 "
            "(newer checkpoints removed, or no worker writing them)")
    assert not newest.exists()


def test_every_checkpoint_removed_while_the_log_grew_fails_as_stale(settings):
    settings.LECTERN_AUDIT_CHECKPOINT_MINUTES = 5
    with time_machine.travel(START, tick=False) as clock:
        append(3)
        checkpoint().unlink()

        clock.shift(timedelta(minutes=11))

        assert verify_fails(returncode=3) == (
            "audit checkpoints stale: seq 1 (appended 2026-03-02T09:00:00Z, 11 minutes ago) and after have no "
            f"checkpoint, over twice LECTERN_AUDIT_CHECKPOINT_MINUTES (5); there is none in {_directory()} "
            "(checkpoints removed, or no worker writing them)")


def test_an_idle_log_never_goes_stale(settings):
    with time_machine.travel(START, tick=False) as clock:
        append(2)
        written = checkpoint()

        clock.shift(timedelta(days=30))  # nothing appended since: no checkpoint is due

        assert verify() == f"audit chain intact: 2 entries; 1 checkpoint holds (newest: seq 2, {written.name})"


def test_a_second_writer_waits_for_the_first_and_names_its_checkpoint():
    # given one writer that wrote its checkpoint, its transaction still open
    append(1)
    first = Holder(audit_checkpoint_write).hold()
    append(1)

    # when another writes meanwhile, it waits for the first
    second = Session(audit_checkpoint_write)
    second.start()
    waiting_on_a_lock(second)
    held = first.release()

    # then it names the first's checkpoint as the one before it: one line of checkpoints
    written = second.outcome()
    assert json.loads(written.path.read_text())["previous"]["name"] == held.path.name
    assert verify() == f"audit chain intact: 2 entries; 2 checkpoints hold (newest: seq 2, {written.path.name})"


# --- the key rotated --------------------------------------------------------------------


@pytest.mark.parametrize(("before", "after", "fallbacks"), [
    ("SECRET_KEY", "SECRET_KEY", "SECRET_KEY_FALLBACKS"),
    ("LECTERN_AUDIT_CHECKPOINT_KEY", "LECTERN_AUDIT_CHECKPOINT_KEY", "LECTERN_AUDIT_CHECKPOINT_KEY_FALLBACKS"),
    ("SECRET_KEY", "LECTERN_AUDIT_CHECKPOINT_KEY", "LECTERN_AUDIT_CHECKPOINT_KEY_FALLBACKS"),
], ids=["SECRET_KEY rotated", "checkpoint key rotated", "a checkpoint key of its own set"])
def test_checkpoints_signed_before_the_key_changed_hold_while_the_old_one_is_a_fallback(settings, before, after,
                                                                                        fallbacks):
    # given a checkpoint signed with the key as it was (SECRET_KEY's, or one of its own)
    settings.LECTERN_AUDIT_CHECKPOINT_KEY = "" if before == "SECRET_KEY" else "checkpoint-key-" + "a" * 40
    old = getattr(settings, before)
    append(2)
    earlier = checkpoint()

    # when the key changes, the old one kept as a fallback
    setattr(settings, after, "changed-key-" + "b" * 40)
    setattr(settings, fallbacks, ["unrelated-key-" + "c" * 40, old])
    append(1)
    later = checkpoint()

    # then both checkpoints hold, and the new one is signed with the new key
    assert verify() == f"audit chain intact: 3 entries; 2 checkpoints hold (newest: seq 3, {later.name})"
    assert json.loads(later.read_text())["key_id"] == key_id(checkpoint_key(getattr(settings, after)))
    assert json.loads(earlier.read_text())["key_id"] == key_id(checkpoint_key(old))

    # and once the old key is dropped, its checkpoint no longer does
    setattr(settings, fallbacks, [])
    assert verify_fails() == (f"audit checkpoint {earlier.name}: signature does not match (forged, altered, or "
                              "signed with another key)")


# --- where the folder lies ---------------------------------------------------------------


def checkpoint_warnings() -> list[tuple[int, str, str]]:
    found = run_checks(include_deployment_checks=True)  # `manage.py check --deploy`
    return [(m.level, m.msg, m.hint or "") for m in found if m.id == "lectern.W002"]


def test_the_system_check_warns_of_checkpoints_under_var_beside_the_embedded_database(settings, tmp_path):
    # given a deployment (DEBUG off) keeping its checkpoints where they are by default
    settings.DEBUG = False
    folder = Path(settings.BASE_DIR) / "var" / "audit-checkpoints"
    settings.LECTERN_AUDIT_CHECKPOINT_DIR = folder

    # then `manage.py check --deploy` warns, pointing at the setting
    assert checkpoint_warnings() == [(
        WARNING,
        f"the audit checkpoints are kept in {folder}, under var/ beside the embedded database's data directory: "
        "whoever controls the database on this host (a superuser runs programs as its system user) can delete "
        "them, and with them the proof of a cut tail",
        "set LECTERN_AUDIT_CHECKPOINT_DIR to a folder outside var/ that the database's system user cannot "
        "write, and back it up (docs/deploying.md, Backups)")]

    # and not for a folder elsewhere, nor on a developer's machine
    settings.LECTERN_AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"
    assert checkpoint_warnings() == []
    settings.DEBUG, settings.LECTERN_AUDIT_CHECKPOINT_DIR = True, folder
    assert checkpoint_warnings() == []
