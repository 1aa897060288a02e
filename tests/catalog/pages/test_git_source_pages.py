"""A curator adds a git repository in the dashboard: served over smart HTTP with a token
by the test, indexed by the run the form queued, its last sync on the source page;
the token is never shown again, an edit that leaves it blank keeps it, and a remote
Lectern may not reach is refused in place with nothing written."""

from __future__ import annotations

import pytest
from django.urls import reverse

from catalog.indexing.runs import index_run_execute
from catalog.models import Chunk, IndexRun, ReferenceSource
from tests.gitserver import Repository, git_http_server

pytestmark = pytest.mark.django_db
TOKEN = "ghp_quokka_0123456789abcdefXYZ"  # noqa: S105 - a test's token


@pytest.fixture
def served(tmp_path, settings):
    settings.LECTERN_GIT_DIR = tmp_path / "mirrors"
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    repo = Repository(tmp_path / "repos")
    repo.commit({"docs/runbook.md": "# Runbook\n\nPage the quokka on-call first.\n", "src/main.go": "package x\n"})
    with git_http_server(tmp_path / "repos", TOKEN) as (base, _):
        yield repo, f"{base}/handbook.git"


def test_a_git_source_is_created_indexed_and_shown_without_its_token(curator, ops, served):
    repo, url = served
    form = {"slug": "team-repo", "name": "Handbook", "mode": "selectable", "remote": url, "ref": "main",
            "include": "docs/**", "secret": TOKEN}

    created = curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=git", form)
    run = IndexRun.objects.get(source__slug="team-repo")
    index_run_execute(run_id=run.pk)
    page = curator.get(reverse("catalogs-source", args=["ops", "team-repo"])).content.decode()
    edit_form = curator.get(reverse("catalogs-source-edit", args=["ops", "team-repo"])).content.decode()

    assert created.status_code == 302
    source = ReferenceSource.objects.get(slug="team-repo")
    assert (source.kind, source.location, source.ref, source.include) == ("git", url, "main", "docs/**")
    assert Chunk.objects.filter(source=source, content__contains="quokka").exists()
    assert f"commit <code title=\"{repo.head()}\">{repo.head()[:12]}</code>" in page
    assert "1 indexed" in page and "stored, sealed" in page
    for shown in (page, edit_form):
        assert TOKEN not in shown and TOKEN[:-4] not in shown
    assert "A token or key is stored" in edit_form and 'type="password"' in edit_form


def test_an_edit_with_the_secret_left_blank_keeps_it_and_removing_it_is_explicit(curator, ops, served):
    _, url = served
    base = {"name": "Handbook", "mode": "selectable", "remote": url, "ref": "main"}
    curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=git",
                 {**base, "slug": "team-repo", "secret": TOKEN})
    sealed = ReferenceSource.objects.get(slug="team-repo").secret_sealed
    edit = reverse("catalogs-source-edit", args=["ops", "team-repo"])

    kept = curator.post(edit, {**base, "description": "Our runbooks."})
    assert kept.status_code == 302
    assert ReferenceSource.objects.get(slug="team-repo").secret_sealed == sealed
    removed = curator.post(edit, {**base, "description": "Our runbooks.", "secret_remove": "on"})
    assert removed.status_code == 302
    assert ReferenceSource.objects.get(slug="team-repo").secret_sealed == ""


@pytest.mark.parametrize(("remote", "why"), [
    ("http://169.254.169.254/latest.git", "the cloud metadata address"),
    ("ext::sh -c id", "remote helpers"),
    ("/etc", "outside the configured source roots"),
])
def test_a_remote_lectern_may_not_reach_is_refused_in_place(curator, ops, remote, why):
    response = curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=git",
                            {"slug": "bad", "name": "Bad", "mode": "selectable", "remote": remote},
                            headers={"HX-Request": "true"})

    assert response.status_code == 400 and why in response.content.decode()
    assert not ReferenceSource.objects.filter(slug="bad").exists()
