"""Git repository sources against real repositories: a bare one under a source root and
one served over smart HTTP (`git http-backend`) on 127.0.0.1 behind a token. A new
commit reindexes only the files it changed; renames, deletions, submodules, symbolic
links and LFS pointers are handled or listed with why; secrets never show."""

from __future__ import annotations

import logging

import pytest

from catalog.indexing.runs import sources_scan
from catalog.indexing.source_index import source_index
from catalog.models import Chunk, Document, IndexRun, ReferenceSource
from catalog.sources.documents import source_fingerprint
from catalog.sources.errors import SourceError
from catalog.sources.git import GitError, GitRemote, mirror_path, remote_commit, remote_problem, web_link
from catalog.sources.lifecycle import GitSettings, SourceSettings, source_create, source_update
from catalog.sources.locators import chunk_locator
from catalog.sources.repository import selected
from tests.documents import pdf_bytes
from tests.gitserver import Repository, git, git_http_server
from tests.local_http import base_url, http_served

TOKEN = "glpat-quokka-0123456789abcdef"  # noqa: S105 - a test's token


@pytest.fixture
def git_settings(tmp_path, settings):
    settings.LECTERN_GIT_DIR = tmp_path / "mirrors"
    settings.LECTERN_SOURCE_ROOTS = [(tmp_path / "repos").resolve()]
    (tmp_path / "repos").mkdir()
    return settings


@pytest.fixture
def repository(tmp_path, git_settings):
    repo = Repository(tmp_path / "repos")
    repo.write({"README.md": "# Handbook\n\nStart here.\n",
                "docs/runbook.md": "# Runbook\n\n## Restart\n\nRestart the quokka ingest worker.\n",
                "docs/ops.pdf": pdf_bytes([["Ops", *(f"Filler line {i} of the first page, long enough." for i in
                                                      range(30))], ["Rotate the narwhal keys."]]),
                "src/app.py": "print('not indexed: code')\n",
                "big/lfs.md": "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n"})
    (repo.work / "docs" / "link.md").symlink_to("runbook.md")
    repo.commit({}, "first")
    repo.commit_submodule_entry("vendor/lib")
    return repo


@pytest.fixture
def served(repository, make_catalog, git_settings, tmp_path):
    """A git source reading the repository over smart HTTP with a token, and the requests the server saw."""
    git_settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with git_http_server(tmp_path / "repos", TOKEN) as (base, requests):
        source = source_create(catalog=make_catalog("eng"), slug="handbook", kind="git",
                               settings=SourceSettings(name="Handbook"), location=f"{base}/handbook.git",
                               git=GitSettings(f"{base}/handbook.git", ref="main", exclude="src/**",
                                               secret=TOKEN), by=None)
        yield source, requests


def _paths(source: ReferenceSource) -> list[str]:
    return sorted(Document.objects.filter(source=source).values_list("path", flat=True))


@pytest.fixture
def http_source(served):
    return served[0]


def test_a_repository_over_http_with_a_token_indexes_what_lectern_reads(served, repository):
    http_source, requests = served
    report = source_index(source=http_source)

    http_source.refresh_from_db()
    assert _paths(http_source) == ["README.md", "docs/ops.pdf", "docs/runbook.md"]
    skipped = dict(report.skipped)
    assert skipped["vendor/lib"].startswith("a submodule (commit 111111111111): not followed")
    assert skipped["docs/link.md"] == "a symbolic link: not followed"
    assert skipped["big/lfs.md"].startswith("a Git LFS pointer")
    assert http_source.sync["commit"] == repository.head()
    assert http_source.sync["read"] == 4 and http_source.sync["indexed"] == 3
    chunk = Chunk.objects.get(source=http_source, content__contains="quokka ingest")
    assert chunk.locator == {"format": "markdown", "commit": repository.head(), "lines": [1, 5],
                             "heading": "Runbook"}
    assert Chunk.objects.get(source=http_source, content__contains="narwhal").locator["pages"] == [2, 2]
    # the token went as a header, and is stored sealed: neither it nor a hint of more than 4 characters shows
    assert all(TOKEN not in request for request in requests)
    assert TOKEN not in http_source.secret_sealed and http_source.secret_hint == "…cdef"


def test_a_new_commit_reindexes_only_the_file_it_changed(http_source, repository):
    source_index(source=http_source)
    http_source.refresh_from_db()
    first = http_source.fingerprint
    assert source_fingerprint(source=http_source) == first  # nothing new: the scan leaves it

    commit = repository.commit({"docs/runbook.md": "# Runbook\n\n## Restart\n\nRestart the wombat worker.\n"})
    assert source_fingerprint(source=http_source) == f"commit:{commit}"
    report = source_index(source=http_source)

    http_source.refresh_from_db()
    assert (report.changed, report.added, report.removed, report.unchanged) == (1, 0, 0, 2)
    assert http_source.sync["read"] == 1 and http_source.sync["commit"] == commit
    assert http_source.fingerprint != first
    assert Chunk.objects.filter(source=http_source, content__contains="wombat").exists()
    assert not Chunk.objects.filter(source=http_source, content__contains="quokka ingest").exists()
    # the unchanged README keeps the commit it was read at
    readme = Document.objects.get(source=http_source, path="README.md")
    assert readme.locator["commit"] != commit


def test_renames_and_deletions_move_only_those_files(http_source, repository):
    source_index(source=http_source)
    git("mv", "docs/runbook.md", "docs/restart.md", cwd=repository.work)
    repository.commit({"README.md": None})

    report = source_index(source=http_source)

    assert _paths(http_source) == ["docs/ops.pdf", "docs/restart.md"]
    assert (report.added, report.removed, report.unchanged, report.changed) == (1, 2, 1, 0)


def test_a_commit_that_touches_no_indexed_file_keeps_the_fingerprint(http_source, repository):
    source_index(source=http_source)
    http_source.refresh_from_db()
    before = http_source.fingerprint

    repository.commit({"src/app.py": "print('changed')\n"})
    report = source_index(source=http_source)

    http_source.refresh_from_db()
    assert http_source.fingerprint == before and report.changed == report.added == report.removed == 0
    assert http_source.sync["commit"] == repository.head()  # the scan sees it synced
    assert source_fingerprint(source=http_source) == before


def test_a_wrong_token_fails_the_run_with_a_clear_error_that_never_shows_it(http_source, caplog):
    source_update(source=http_source, settings=SourceSettings(name="Handbook"),
                  git=GitSettings(http_source.location, ref="main", secret="wrong-token-9876543210"), by=None)
    http_source.refresh_from_db()

    with caplog.at_level(logging.DEBUG), pytest.raises(GitError) as failed:
        source_index(source=http_source)

    http_source.refresh_from_db()
    assert "the remote refused the credentials" in str(failed.value)
    assert http_source.status == ReferenceSource.Status.ERROR
    for text in (str(failed.value), http_source.last_error, caplog.text):
        assert "wrong-token-9876543210" not in text and TOKEN not in text


def test_the_scheduled_scan_requests_a_run_for_a_new_commit_only(http_source, repository):
    source_index(source=http_source)
    assert sources_scan() == []

    repository.commit({"README.md": "# Handbook\n\nStart elsewhere.\n"})
    runs = sources_scan()

    assert [run.source_id for run in runs] == [http_source.pk]
    assert runs[0].status == IndexRun.Status.QUEUED


def test_a_local_repository_under_a_source_root_reads_a_branch_tag_or_commit(repository, make_catalog):
    first = repository.head()
    git("tag", "v1", cwd=repository.work)
    git("push", "--quiet", str(repository.bare), "v1", cwd=repository.work)
    repository.commit({"docs/runbook.md": "# Runbook\n\nVersion two.\n"})
    catalog = make_catalog("local")

    for slug, ref, expected in (("at-tag", "v1", first), ("at-commit", first, first),
                                ("at-main", "", repository.head())):
        source = source_create(catalog=catalog, slug=slug, kind="git", settings=SourceSettings(name=slug),
                               location=str(repository.bare), git=GitSettings(str(repository.bare), ref=ref),
                               by=None)
        source_index(source=source)
        source.refresh_from_db()
        assert source.sync["commit"] == expected
        assert mirror_path(source.pk).exists()


@pytest.mark.parametrize(("url", "why"), [
    ("ext::sh -c touch% /tmp/pwned", "remote helpers"),
    ("--upload-pack=touch /tmp/x", "may not start with '-'"),
    ("/etc", "outside the configured source roots"),
    ("http://169.254.169.254/repo.git", "the cloud metadata address"),
    ("https://user:tok@example.com/repo.git", "put the token in the credential field"),
    ("ftp://example.com/repo.git", "is not an https, http or ssh URL"),
    ("https://ghp_token0123@github.com/o/r.git", "put the token in the credential field"),
    ("https://stra\u00dfe.example/r.git", "in its ASCII form"),
    ("git@127.0.0.1:ops/handbook.git", "a loopback address"),
    ("ssh://169.254.169.254:80/x.git", "the cloud metadata address"),
    ("ssh://git:pw@example.com/x.git", "may name a user, not a password"),
    ("localhost:handbook.git", "a loopback address"),
])
def test_a_remote_git_may_not_reach_is_refused_saying_why(git_settings, url, why):
    assert why in (remote_problem(url) or "")


def test_a_refused_remote_is_refused_when_the_source_is_saved(git_settings, make_catalog):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as refused:
        source_create(catalog=make_catalog("x"), slug="meta", kind="git", settings=SourceSettings(name="x"),
                      location="http://169.254.169.254/r.git", git=GitSettings("http://169.254.169.254/r.git"),
                      by=None)
    assert "metadata" in str(refused.value.message_dict["location"])
    assert not ReferenceSource.objects.filter(slug="meta").exists()


def test_loopback_is_refused_unless_a_setting_allows_it(git_settings):
    with pytest.raises(SourceError, match="loopback"):
        remote_commit(GitRemote("http://127.0.0.1:9/handbook.git"))


def test_forge_links_point_at_the_file_and_the_chunks_lines(settings):
    settings.LECTERN_GIT_WEB_HOSTS = ["git.example.com=gitlab"]
    commit = "a" * 40
    assert web_link("https://github.com/acme/handbook.git", commit, "docs/run book.md") == (
        f"https://github.com/acme/handbook/blob/{commit}/docs/run%20book.md", "github")
    assert web_link("git@git.example.com:ops/handbook.git", commit, "a.md") == (
        f"https://git.example.com/ops/handbook/-/blob/{commit}/a.md", "gitlab")
    assert web_link("https://codeberg.org/acme/h", commit, "a.md") == (
        f"https://codeberg.org/acme/h/src/commit/{commit}/a.md", "gitea")
    assert web_link("https://unknown.example/acme/h.git", commit, "a.md") is None
    document = {"format": "markdown", "commit": commit, "blob": "b" * 40, "forge": "github",
                "link": f"https://github.com/acme/h/blob/{commit}/a.md"}
    assert chunk_locator(document, {"lines": [3, 9]}) == {
        "format": "markdown", "commit": commit, "lines": [3, 9],
        "link": f"https://github.com/acme/h/blob/{commit}/a.md#L3-L9"}


@pytest.mark.parametrize(("path", "include", "exclude", "taken"), [
    ("docs/a.md", [], [], True),
    ("docs/a.md", ["docs/**"], [], True),
    ("src/a.md", ["docs/**"], [], False),
    ("docs/deep/a.md", ["docs/*.md"], [], False),
    ("docs/deep/a.md", ["*.md"], [], True),  # no '/': a file name in any folder
    ("docs/a.md", [], ["**/a.md"], False),
    ("a.md", [], ["**/a.md"], False),
])
def test_include_and_exclude_globs_select_paths(path, include, exclude, taken):
    assert selected(path, include, exclude) is taken


def test_a_commit_lapses_the_approval_and_the_new_request_shows_the_diff_with_its_commit(served, repository, rita):
    from approvals.models import ApprovalRequest
    from tests.approvals.builders import approved
    from tests.factories import agent_with_token

    source, _ = served
    source.requires_approval = True
    source.save()
    source_index(source=source)
    agent = agent_with_token(name="bot", catalogs=[source.catalog])[0]
    approval = approved(agent, source, rita)

    commit = repository.commit({"docs/runbook.md": "# Runbook\n\n## Restart\n\nRestart the wombat worker.\n"})
    source_index(source=source)

    approval.refresh_from_db()
    new = ApprovalRequest.objects.get(state="pending")
    assert approval.state == "lapsed" and new.previous_id == approval.pk
    assert f"+++ b/docs/runbook.md\tcommit {commit}" in new.diff
    assert "-Restart the quokka ingest worker.\n+Restart the wombat worker.\n" in new.diff


def test_an_agents_expansion_of_a_git_reference_names_the_repository_and_commit(served, repository):
    from rest_framework.test import APIClient

    from tests.factories import agent_with_token

    source, _ = served
    source_index(source=source)
    _, token = agent_with_token(name="reader", catalogs=[source.catalog])

    response = APIClient().post("/api/v1/enrich", {"text": "Follow @handbook for restarts.", "surface": "prompt"},
                                format="json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 200, response.content
    assert f"Read from: git repository {source.location} at commit {repository.head()[:12]}" in response.json()["text"]


def test_a_stored_secret_is_never_sent_to_another_repository(served):
    from django.core.exceptions import ValidationError

    source, _ = served
    elsewhere = source.location.replace("handbook.git", "other.git")

    with pytest.raises(ValidationError) as refused:
        source_update(source=source, settings=SourceSettings(name="Handbook"), git=GitSettings(elsewhere), by=None)
    assert "give its token or key again" in str(refused.value.message_dict["secret"])
    source.refresh_from_db()
    assert source.location != elsewhere and source.secret_sealed

    source_update(source=source, settings=SourceSettings(name="Handbook"), git=GitSettings(elsewhere, secret=""),
                  by=None)
    source.refresh_from_db()
    assert (source.location, source.secret_sealed) == (elsewhere, "")


@pytest.mark.parametrize(("url", "secret", "why"), [
    ("https://github.com/o/r.git", "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "goes to an ssh remote only"),
    ("ssh://git@github.com/o/r.git", "ghp_token", "takes a deploy key"),
    ("http://10.1.2.3/r.git", "ghp_token", "would travel in clear"),
])
def test_a_secret_goes_only_where_it_is_safe(settings, url, secret, why):
    from catalog.sources.git import secret_problem

    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["10.0.0.0/8", "127.0.0.0/8"]
    assert why in (secret_problem(url, secret) or "")
    assert secret_problem("http://127.0.0.1:9/r.git", "ghp_token") is None  # a test's server on loopback


def test_a_fetch_that_outlasts_its_timeout_is_stopped_and_leaves_no_lock(git_settings):
    """A server that never answers: the fetch is stopped at LECTERN_GIT_TIMEOUT, with what
    it started, and the mirror it may have locked midway is gone (the next fetch starts clean)."""
    import threading
    from http.server import BaseHTTPRequestHandler

    from catalog.sources.git import mirror_fetch

    release = threading.Event()

    class Silent(BaseHTTPRequestHandler):
        def do_GET(self):
            release.wait()

        def log_message(self, *args):
            pass

    git_settings.LECTERN_GIT_TIMEOUT = 5
    git_settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with http_served(Silent) as server:
        try:
            with pytest.raises(GitError, match="took longer than 5 s"):
                mirror_fetch(991, GitRemote(f"{base_url(server)}/r.git", "main"))
            assert not mirror_path(991).exists()
        finally:
            release.set()  # before the server shuts down: it joins its handlers


def test_the_scan_goes_on_past_a_failing_source_and_retries_it_once_it_answers(served, repository, make_catalog,
                                                                              settings):
    from catalog.indexing.runs import SCAN_FAILED

    source, _ = served
    source_index(source=source)
    other = make_catalog("other")
    unreadable = ReferenceSource.objects.create(catalog=other, slug="locked", name="Locked", kind="git",
                                                location=source.location, secret_sealed="not-a-sealed-secret")
    real = source.location
    # a port nothing listens on (the source's row changed directly: its secret stays bound to it)
    ReferenceSource.objects.filter(pk=source.pk).update(location="http://127.0.0.1:1/handbook.git")

    runs = sources_scan()

    source.refresh_from_db()
    unreadable.refresh_from_db()
    assert source.status == unreadable.status == ReferenceSource.Status.ERROR
    assert source.last_error.startswith(SCAN_FAILED) and "git ls-remote failed" in source.last_error
    assert unreadable.last_error.startswith(f"{SCAN_FAILED}SecretUnreadable")
    assert source.pk not in [run.source_id for run in runs]

    ReferenceSource.objects.filter(pk=source.pk).update(location=real)  # the remote answers again, same commit
    assert [run.source_id for run in sources_scan() if run.source_id == source.pk] == [source.pk]


def test_deleting_a_git_source_removes_its_mirror(served):
    from catalog.indexing.removal import source_delete

    source, _ = served
    source_index(source=source)
    assert mirror_path(source.pk).exists()

    source_delete(source=source, by=None)

    assert not mirror_path(source.pk).exists()


def test_an_ssh_remote_connects_to_the_checked_address_with_its_key_in_a_private_file(git_settings, tmp_path):
    """What git is given for an ssh remote, built without connecting: the address the
    host was checked at, the host key kept for the source by its name, the deploy key in a
    0600 file that is gone once the command is done."""
    import os
    import stat

    from catalog.sources.git import _environment

    git_settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    remote = GitRemote("git@10.1.2.3:ops/handbook.git", "main", key, str(tmp_path / "hosts" / "source-7"))

    with _environment(remote) as (env, url):
        command = env["GIT_SSH_COMMAND"]
        key_file = command.split("-i ", 1)[1].split()[0]
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        assert open(key_file).read().strip() == key
    assert url == "git@10.1.2.3:ops/handbook.git" and env["GIT_ALLOW_PROTOCOL"] == "ssh"
    for option in ("HostName=10.1.2.3", "HostKeyAlias=10.1.2.3", "ConnectTimeout=20", "BatchMode=yes",
                   f"UserKnownHostsFile={tmp_path / 'hosts' / 'source-7'}", "IdentitiesOnly=yes"):
        assert option in command
    assert key not in command and not os.path.exists(key_file)
