"""A folder of PDF, DOCX, PPTX, HTML and Markdown files indexed through the real write
path: an agent's search finds each with its locator; files that cannot be read are
listed on the run and the source, and the rest still index; an agent reads an indexed
PDF as the text that was indexed; an upload of a DOCX indexes as a folder's would."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from catalog.indexing.source_index import source_index
from catalog.models import Chunk, Document, ReferenceSource
from catalog.sources.editing import uploads_add
from catalog.sources.uploads import upload_text
from tests.documents import docx_bytes, encrypted_pdf_bytes, pdf_bytes, pptx_bytes, zip_bomb_docx

# About 270 characters: with chunks of 300 (team_source), a section of this and the next
# one are cut apart, so each cites its own heading.
FILLER = [f"Filler line {i} about nothing in particular, filling." for i in range(5)]


@pytest.fixture
def folder(tmp_path, settings):
    root = tmp_path / "root"
    docs = root / "team"
    docs.mkdir(parents=True)
    settings.LECTERN_SOURCE_ROOTS = [root.resolve()]
    (docs / "ops.pdf").write_bytes(pdf_bytes([["Ops guide", "Keep the pager charged.", *FILLER],
                                              ["Rotate the quokka signing keys every spring."]], title="Ops guide"))
    (docs / "deploy.docx").write_bytes(docx_bytes([("h1", "Deploying"), ("p", " ".join(["Build the image first.",
                                                                                        *FILLER])),
                                                   ("h2", "Rollback"), ("p", "Revert the narwhal tag at once.")]))
    (docs / "review.pptx").write_bytes(pptx_bytes([("Quarterly review", ["Revenue grew", *FILLER]),
                                                   ("Next steps", ["Hire two axolotl wranglers"])]))
    (docs / "cache.html").write_bytes(b"<html><head><title>Caching</title></head><body><nav>Home</nav><main>"
                                      b"<h1>Caching</h1><p>" + " ".join(FILLER).encode() + b"</p><h2>Expiry</h2>"
                                      b"<p>Wombat entries expire hourly.</p>"
                                      b"</main></body></html>")
    (docs / "notes.md").write_text("# Notes\n\nIntro line.\n\n## Pandas\n\nRed pandas sleep in trees.\n")
    (docs / "scan.pdf").write_bytes(pdf_bytes([[]]))
    (docs / "locked.pdf").write_bytes(encrypted_pdf_bytes([["Locked quokka secrets"]]))
    (docs / "bomb.docx").write_bytes(zip_bomb_docx())
    return docs


@pytest.fixture
def team_source(make_catalog, folder):
    catalog = make_catalog("team", chunk_size=300, chunk_overlap=0)  # a page, a section, a slide: a chunk each
    return ReferenceSource.objects.create(catalog=catalog, slug="files", name="Team files", kind="glob",
                                          location="team/*")


def test_every_format_indexes_and_the_files_that_cannot_be_read_are_listed(team_source):
    report = source_index(source=team_source)

    team_source.refresh_from_db()
    assert sorted(Document.objects.filter(source=team_source).values_list("path", "title")) == [
        ("team/cache.html", "Caching"), ("team/deploy.docx", "Deploying"), ("team/notes.md", "Notes"),
        ("team/ops.pdf", "Ops guide"), ("team/review.pptx", "Quarterly review")]
    skipped = dict(report.skipped)
    assert set(skipped) == {"team/scan.pdf", "team/locked.pdf", "team/bomb.docx"}
    assert "scanned PDF without a text layer" in skipped["team/scan.pdf"]
    assert "encrypted PDF" in skipped["team/locked.pdf"]
    assert "zip bomb" in skipped["team/bomb.docx"]
    assert team_source.status == ReferenceSource.Status.READY
    for path, reason in report.skipped:
        assert f"skipped {path}: {reason}" in team_source.last_error
    assert not Chunk.objects.filter(content__contains="Locked").exists()


@pytest.mark.parametrize(("query", "path", "locator", "citation"), [
    ("quokka signing keys", "team/ops.pdf", {"format": "pdf", "pages": [2, 2]}, "team/ops.pdf p. 2"),
    ("narwhal tag", "team/deploy.docx", {"format": "docx", "heading": "Deploying › Rollback"},
     "team/deploy.docx — Deploying › Rollback"),
    ("axolotl wranglers", "team/review.pptx", {"format": "pptx", "slides": [2, 2], "heading": "Next steps"},
     "team/review.pptx slide 2 — Next steps"),
    ("wombat entries", "team/cache.html", {"format": "html", "heading": "Caching › Expiry"},
     "team/cache.html — Caching › Expiry"),
    ("red pandas", "team/notes.md", {"format": "markdown", "lines": [1, 7], "heading": "Notes"},
     "team/notes.md:1-7 — Notes"),
])
def test_an_agents_search_finds_each_format_with_its_locator(team_source, agent_token, query, path, locator,
                                                             citation):
    source_index(source=team_source)
    token = agent_token("team-agent", [team_source.catalog])

    response = APIClient().post("/api/v1/search", {"catalog": "team", "query": query, "mode": "bm25", "top_k": 1},
                                format="json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 200, response.content
    hit = response.json()["results"][0]
    assert (hit["document_id"], hit["locator"], hit["citation"]) == (path, locator, citation)


def test_an_agent_reads_an_indexed_pdf_as_the_text_that_was_indexed(team_source, agent_token):
    team_source.mode = ReferenceSource.Mode.AUTO
    team_source.save()
    source_index(source=team_source)
    token = agent_token("team-agent", [team_source.catalog])

    response = APIClient().get("/api/v1/references/team/files/file?path=team/ops.pdf",
                               HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 200, response.content
    assert response.json()["text"] == Document.objects.get(path="team/ops.pdf").text
    assert "Rotate the quokka signing keys every spring." in response.json()["text"]


def test_an_uploaded_docx_indexes_with_its_headings(make_catalog):
    catalog = make_catalog("uploads")
    source = ReferenceSource.objects.create(catalog=catalog, slug="handbook", name="Handbook", kind="upload")
    uploads_add(source=source, documents=[upload_text(name="deploy.docx", data=docx_bytes(
        [("h1", "Deploying"), ("h2", "Rollback"), ("p", "Revert the narwhal tag at once.")]))])

    source_index(source=source)

    chunk = Chunk.objects.get(source=source, content__contains="narwhal")
    assert chunk.locator == {"format": "docx", "heading": "Deploying"}  # one chunk: where it starts
    assert chunk.document.title == "Deploying"


def test_the_run_keeps_each_file_it_could_not_read_and_its_page_and_api_show_why(team_source, client_for, cora):
    from catalog.indexing.runs import index_run_create, index_run_execute
    from catalog.models import IndexRun

    run = index_run_execute(run_id=index_run_create(source=team_source, trigger=IndexRun.Trigger.COMMAND).pk)

    assert run is not None and run.status == IndexRun.Status.SUCCEEDED
    assert sorted(path for path, _ in run.skipped) == ["team/bomb.docx", "team/locked.pdf", "team/scan.pdf"]
    curator = client_for(cora)
    page = curator.get(f"/catalogs/team/runs/{run.pk}/").content.decode()
    assert "Files it could not read (3)" in page and "<code>team/locked.pdf</code>: encrypted PDF" in page
    source_page = curator.get("/catalogs/team/sources/files/").content.decode()
    assert "3 files it could not read" in source_page  # its latest run, linking to the list
    api = curator.get(f"/api/v1/index-runs/{run.pk}").json()
    assert ["team/scan.pdf", dict(run.skipped)["team/scan.pdf"]] in api["skipped"]
