"""The reviewer pages' template filters (pure): a unified diff tagged line by line for
colour, a policy's lifetime in words."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from approvals.diffs import DocumentText, content_diff
from approvals.templatetags.approvals_pages import ago, diff_lines, duration, payload_value


def kinds(diff: str) -> list[tuple[str, str]]:
    return [(line.kind, line.text) for line in diff_lines(diff)]


def test_a_diff_is_tagged_by_line():
    old = {"a.md": DocumentText("1", "keep\n-- old rule\nend")}
    new = {"a.md": DocumentText("2", "keep\n--- new rule\nend\n"), "b.md": DocumentText("3", "added\n")}

    tagged = kinds(content_diff(old, new).text)

    assert tagged == [
        ("file", "--- a/a.md"), ("file", "+++ b/a.md"), ("hunk", "@@ -1,3 +1,3 @@"), ("context", " keep"),
        ("del", "--- old rule"), ("del", "-end"), ("note", "\\ No newline at end of file"),
        ("add", "+--- new rule"), ("add", "+end"),
        ("file", "--- /dev/null"), ("file", "+++ b/b.md"), ("hunk", "@@ -0,0 +1 @@"), ("add", "+added"),
    ]


def test_notes_outside_hunks():
    tagged = kinds("--- a/x\n+++ b/x\n@@ text not kept: sha256 a -> b @@\n... diff cut here: longer than kept\n")
    assert [kind for kind, _ in tagged] == ["file", "file", "note", "note"]


def test_lifetimes_in_words():
    assert duration(None) == "forever"
    assert duration(timedelta(days=90)) == "90 days"
    assert duration(timedelta(days=1, hours=6)) == "1 day 6 hours"
    assert duration(timedelta(minutes=1)) == "1 minute"
    assert duration(timedelta(seconds=5)) == "under a minute"


def test_how_long_ago():
    now = timezone.now()
    assert ago(now - timedelta(seconds=20)) == "just now"
    assert ago(now - timedelta(hours=3, minutes=5)) == "3\xa0hours ago"
    assert ago(None) == ""


def test_payload_values_as_json():
    assert [payload_value(v) for v in ("text", None, True, 3, ["ops"], {"b": 1, "a": 2})] == [
        "text", "—", "true", "3", '["ops"]', '{"a": 2, "b": 1}']
