"""The catalog write path over real files and Postgres: globs, refusals, re-indexing,
exact BM25 statistics, and the import_jsonl / create_agent commands."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from catalog.agents import hash_token
from catalog.analysis import analyze
from catalog.indexing.source_index import source_index
from catalog.models import Agent, Catalog, Chunk, Document, Postings, ReferenceSource, Term, TermBlock
from catalog.sources.errors import SourceError
from catalog.sources.globs import glob_resolve
from retrieval.search import bm25
from retrieval.search.lexical import bm25_search
from tests.catalog.checks import block_postings, term_postings_mismatches


@pytest.fixture
def root(tmp_path, settings):
    """A source root holding docs/, and an outside/ directory beside it."""
    root = tmp_path / "root"
    (root / "docs" / "guides").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("TOP SECRET launch codes.\n")
    settings.LECTERN_SOURCE_ROOTS = [root.resolve()]
    return root


def write_docs(root) -> None:
    docs = root / "docs"
    (docs / "alpha.md").write_text("# Alpha handbook\n\nQuokkas live on Rottnest island. They are friendly.\n")
    (docs / "beta.txt").write_text("Narwhals carry a single long tusk.\n")
    (docs / "guides" / "gamma.rst").write_text("Gamma\n=====\n\nAxolotls regrow their limbs.\n")
    (docs / "manual.pdf").write_bytes(b"%PDF-1.4 binary quokka content")  # corrupt
    (docs / "logo.png").write_bytes(b"\x89PNG quokka")
    (docs / "latin1.md").write_bytes("Caf\u00e9 quokka notes.".encode("latin-1"))
    (docs / "leak.md").symlink_to(root.parent / "outside" / "secret.md")


@pytest.fixture
def glob_source(make_catalog, root):
    write_docs(root)
    catalog = make_catalog("files")
    return ReferenceSource.objects.create(catalog=catalog, slug="docs", name="Docs", kind="glob",
                                          location="docs/**/*")


def index_state(catalog: Catalog) -> dict:
    catalog.refresh_from_db()
    return {
        "documents": sorted(Document.objects.filter(catalog=catalog).values_list("path", "content_sha256")),
        "chunks": sorted(Chunk.objects.filter(catalog=catalog).values_list("key", "content")),
        "terms": dict(Term.objects.filter(catalog=catalog).values_list("text", "df")),
        "stats": (catalog.chunk_count, catalog.token_total, catalog.term_count, catalog.idf_sum),
    }


def assert_stats_exact(catalog: Catalog) -> None:
    """The catalog's stored BM25 statistics equal a recomputation from its chunks."""
    catalog.refresh_from_db()
    tokens = [analyze(chunk.indexed_text) for chunk in Chunk.objects.filter(catalog=catalog)]
    df = Counter(term for terms in tokens for term in set(terms))
    assert catalog.chunk_count == len(tokens) == Postings.objects.filter(catalog=catalog).count()
    assert catalog.token_total == sum(map(len, tokens))
    assert catalog.term_count == len(df)
    assert dict(Term.objects.filter(catalog=catalog).values_list("text", "df")) == dict(df)
    assert catalog.idf_sum == pytest.approx(sum(bm25.raw_idf(len(tokens), d) for d in df.values()))
    assert term_postings_mismatches(catalog) == []


# --- resolving and reading globs ----------------------------------------------------------------


def test_glob_source_indexes_md_txt_rst_and_records_what_it_skipped(glob_source):
    report = source_index(source=glob_source)

    glob_source.refresh_from_db()
    documents = dict(Document.objects.filter(source=glob_source).values_list("path", "title"))
    # paths are relative to the source root; a "# " heading, else the file name, is the title
    assert documents == {"docs/alpha.md": "Alpha handbook", "docs/beta.txt": "beta", "docs/guides/gamma.rst": "gamma"}
    assert report.documents == 3 and report.chunks == Chunk.objects.filter(source=glob_source).count() >= 3
    assert glob_source.status == ReferenceSource.Status.READY
    skipped = dict(report.skipped)
    assert set(skipped) == {"docs/manual.pdf", "docs/logo.png", "docs/latin1.md", "docs/leak.md"}
    assert "not a readable PDF" in skipped["docs/manual.pdf"]
    assert "unsupported file type .png" in skipped["docs/logo.png"]
    assert "not UTF-8" in skipped["docs/latin1.md"]
    assert "outside the source root" in skipped["docs/leak.md"]
    for path, reason in report.skipped:
        assert f"skipped {path}: {reason}" in glob_source.last_error
    assert not Chunk.objects.filter(content__contains="SECRET").exists()
    assert_stats_exact(glob_source.catalog)


def test_glob_source_chunks_are_searchable_and_located_in_their_files(glob_source, root):
    source_index(source=glob_source)

    rows, _ = bm25_search(catalog=Catalog.objects.get(slug="files"), query="quokkas", limit=10)

    chunk = Chunk.objects.select_related("document").get(pk=rows[0][0])
    assert chunk.document.path == "docs/alpha.md"
    raw = (root / "docs" / "alpha.md").read_bytes()
    assert raw[chunk.byte_offset : chunk.byte_offset + len(chunk.content.encode())].decode() == chunk.content


def test_an_absolute_glob_inside_a_root_is_read_relative_to_it(root):
    write_docs(root)

    files, _skipped = glob_resolve(str(root.resolve() / "docs" / "*.txt"))

    assert [relative for relative, _real in files] == ["docs/beta.txt"]


@pytest.mark.parametrize("pattern", [
    "../outside/*.md",
    "docs/../../outside/*.md",
    "docs/**/../../../outside/secret.md",
    "",
])
def test_relative_glob_escaping_the_root_raises_source_error(root, pattern):
    with pytest.raises(SourceError):
        glob_resolve(pattern)


def test_absolute_glob_outside_every_root_raises_source_error(root):
    (root.parent / "root-evil").mkdir()

    with pytest.raises(SourceError, match="outside the configured source roots"):
        glob_resolve(str(root.parent / "outside" / "*.md"))
    with pytest.raises(SourceError, match="outside the configured source roots"):
        glob_resolve(str(root.parent / "root-evil" / "*.md"))  # a sibling sharing the root's name


@pytest.mark.parametrize("location", ["../outside/*.md", "/etc/*.conf"])
def test_indexing_a_source_with_an_escaping_glob_changes_no_rows(glob_source, location):
    # given: the source indexed from a good glob
    source_index(source=glob_source)
    before = index_state(glob_source.catalog)
    ReferenceSource.objects.filter(pk=glob_source.pk).update(location=location)
    glob_source.refresh_from_db()

    with pytest.raises(SourceError):
        source_index(source=glob_source)

    # then: its rows and the catalog's statistics are as before; the error is recorded
    assert index_state(glob_source.catalog) == before
    glob_source.refresh_from_db()
    assert glob_source.status == ReferenceSource.Status.ERROR
    assert "SourceError" in glob_source.last_error


def test_a_symlinked_directory_pointing_outside_is_skipped(root):
    (root / "docs" / "ok.md").write_text("Inside the root.\n")
    (root / "docs" / "linked").symlink_to(root.parent / "outside", target_is_directory=True)

    files, skipped = glob_resolve("docs/**/*.md")

    assert [relative for relative, _ in files] == ["docs/ok.md"]
    assert [relative for relative, _ in skipped] == ["docs/linked/secret.md"]


# --- re-indexing ----------------------------------------------------------------------------


def test_reindexing_replaces_the_sources_rows_and_keeps_stats_exact(glob_source, root):
    # given: the glob source indexed beside an inline source in the same catalog
    catalog = glob_source.catalog
    inline = ReferenceSource.objects.create(catalog=catalog, slug="note", name="Note", kind="inline",
                                            content="Quokkas and narwhals meet in this inline note.")
    source_index(source=inline)
    source_index(source=glob_source)
    inline_chunks = sorted(Chunk.objects.filter(source=inline).values_list("key", "content"))

    # when: a file is removed, one edited and one added, then the source re-indexed
    (root / "docs" / "beta.txt").unlink()
    (root / "docs" / "alpha.md").write_text("# Alpha handbook\n\nQuokkas moved. Wombats dig burrows.\n")
    (root / "docs" / "delta.md").write_text("Pangolins roll into a ball.\n")
    source_index(source=glob_source)

    paths = set(Document.objects.filter(source=glob_source).values_list("path", flat=True))
    assert paths == {"docs/alpha.md", "docs/delta.md", "docs/guides/gamma.rst"}
    contents = " ".join(Chunk.objects.filter(source=glob_source).values_list("content", flat=True))
    assert "Wombats" in contents and "Pangolins" in contents and "Narwhals" not in contents
    assert sorted(Chunk.objects.filter(source=inline).values_list("key", "content")) == inline_chunks
    assert_stats_exact(catalog)
    assert dict(Term.objects.filter(catalog=catalog).values_list("text", "df"))[analyze("narwhals")[0]] == 1


def test_reindexing_an_unchanged_source_leaves_identical_stats(glob_source):
    source_index(source=glob_source)
    first = index_state(glob_source.catalog)

    source_index(source=glob_source)

    assert index_state(glob_source.catalog) == first


def test_deleting_every_file_then_reindexing_leaves_no_chunks_and_no_terms(glob_source, root):
    source_index(source=glob_source)
    assert Chunk.objects.filter(catalog=glob_source.catalog).exists()
    for path in (root / "docs").rglob("*"):
        if path.is_file() or path.is_symlink():
            path.unlink()

    report = source_index(source=glob_source)

    catalog = glob_source.catalog
    catalog.refresh_from_db()
    assert report.documents == 0 and report.chunks == 0
    assert not Document.objects.filter(catalog=catalog).exists()
    assert not Chunk.objects.filter(catalog=catalog).exists()
    assert not Postings.objects.filter(catalog=catalog).exists()
    assert not TermBlock.objects.filter(catalog=catalog).exists()
    assert not Term.objects.filter(catalog=catalog).exists()
    assert (catalog.chunk_count, catalog.token_total, catalog.term_count, catalog.idf_sum) == (0, 0, 0, 0)
    assert bm25_search(catalog=catalog, query="quokkas", limit=10) == ([], 0)


def test_term_postings_follow_every_chunk_and_term_of_a_source_edited_again_and_again(glob_source, root):
    # given: the source indexed, then a file edited, one removed and one added, twice
    source_index(source=glob_source)
    for round_ in range(2):
        (root / "docs" / "alpha.md").write_text(f"# Alpha\n\nQuokkas, round {round_}. Wombats dig.\n")
        (root / "docs" / f"new-{round_}.md").write_text(f"Pangolins roll, round {round_}.\n")
        (root / "docs" / ("beta.txt" if round_ == 0 else "new-0.md")).unlink()
        source_index(source=glob_source)

        # then: the blocks hold one posting per (term, chunk) of the per-chunk arrays, nothing else
        assert term_postings_mismatches(glob_source.catalog) == []
    assert block_postings(glob_source.catalog) == sum(
        len(terms) for terms in Postings.objects.filter(catalog=glob_source.catalog).values_list("terms", flat=True))


def test_deleting_a_catalog_through_the_orm_deletes_its_bm25_blocks(glob_source, make_catalog):
    # given: two indexed catalogs
    source_index(source=glob_source)
    other = ReferenceSource.objects.create(catalog=make_catalog("other"), slug="note", name="Note", kind="inline",
                                           content="Quokkas and narwhals meet in this inline note.")
    source_index(source=other)
    kept = block_postings(other.catalog)

    glob_source.catalog.delete()  # as the admin does it: the ORM's cascade, not the write path

    assert block_postings() == kept > 0
    assert term_postings_mismatches(other.catalog) == []


# --- import_jsonl ---------------------------------------------------------------------------------


def write_jsonl(path, rows: list) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def test_import_jsonl_creates_one_document_per_line_with_searchable_titles(db, tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [
        {"_id": "d1", "title": "Quokka habitat", "text": "Small marsupials on an island."},
        {"_id": "d2", "title": "", "text": "Narwhal tusks are teeth."},
        "",  # blank lines are skipped
        {"_id": "d3", "text": "Axolotls regrow limbs."},
    ])
    out = io.StringIO()

    call_command("import_jsonl", corpus, "--catalog", "beir", "--no-progress", stdout=out)

    catalog = Catalog.objects.get(slug="beir")
    documents = dict(Document.objects.filter(catalog=catalog).values_list("path", "title"))
    assert documents == {"d1": "Quokka habitat", "d2": "", "d3": ""}
    assert ReferenceSource.objects.get(catalog=catalog).slug == "corpus"
    assert "3 documents" in out.getvalue()
    rows, _ = bm25_search(catalog=catalog, query="quokka habitat", limit=10)  # words only in the title
    assert [Chunk.objects.get(pk=pk).document.path for pk, _, _ in rows] == ["d1"]
    assert_stats_exact(catalog)


@pytest.mark.parametrize(("rows", "line", "problem"), [
    ([{"_id": "a", "text": "ok"}, '{"_id": "b", "text": ', {"_id": "c", "text": "ok"}], 2, "not JSON"),
    ([{"_id": "a", "text": "ok"}, {"_id": "b", "text": "ok"}, {"text": "no id"}], 3, "_id"),
    ([{"_id": "a", "text": "ok"}, {"_id": "", "text": "empty id"}], 2, "_id"),
    ([{"_id": "a", "text": "ok"}, {"_id": "b", "text": "ok"}, {"_id": "a", "text": "again"}], 3, "duplicate"),
    ([{"_id": "a", "text": ["not", "a", "string"]}], 1, "strings"),
    (["[1, 2]"], 1, "_id"),
])
def test_malformed_jsonl_raises_command_error_naming_the_line_and_changes_nothing(db, tmp_path, rows, line,
                                                                               problem):
    corpus = write_jsonl(tmp_path / "bad.jsonl", rows)
    before = Catalog.objects.count(), ReferenceSource.objects.count(), Document.objects.count()

    with pytest.raises(CommandError, match=rf"line {line}\b.*{problem}"):
        call_command("import_jsonl", corpus, "--catalog", "beir", "--no-progress", stdout=io.StringIO())

    assert (Catalog.objects.count(), ReferenceSource.objects.count(), Document.objects.count()) == before


def test_malformed_jsonl_into_an_existing_catalog_keeps_its_rows(db, tmp_path):
    good = write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "Quokkas."}])
    call_command("import_jsonl", good, "--catalog", "beir", "--no-progress", stdout=io.StringIO())
    catalog = Catalog.objects.get(slug="beir")
    before = index_state(catalog)
    write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d2", "text": "Narwhals."}, "{broken"])

    with pytest.raises(CommandError, match="line 2"):
        call_command("import_jsonl", good, "--catalog", "beir", "--no-progress", stdout=io.StringIO())

    assert index_state(catalog) == before


def test_import_jsonl_refuses_a_missing_or_non_utf8_file(db, tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"_id": "a", "text": "caf\u00e9"}\n'.encode("latin-1"))

    with pytest.raises(CommandError, match="no such file"):
        call_command("import_jsonl", str(tmp_path / "missing.jsonl"), "--catalog", "beir", "--no-progress")
    with pytest.raises(CommandError, match="not UTF-8"):
        call_command("import_jsonl", str(latin), "--catalog", "beir", "--no-progress")
    assert not Catalog.objects.filter(slug="beir").exists()


# --- create_agent -------------------------------------------------------------------------------


def test_create_agent_prints_a_working_token_and_stores_only_its_hash(indexed_catalog):
    out = io.StringIO()

    call_command("create_agent", "--name", "helper-bot", "--catalogs", "ops", stdout=out)

    token = out.getvalue().strip()
    agent = Agent.objects.get(name="helper-bot")
    assert agent.token_hash == hash_token(token)
    stored = [str(value) for value in Agent.objects.filter(pk=agent.pk).values().get().values()]
    assert token not in stored
    assert list(agent.catalogs.values_list("slug", flat=True)) == ["ops"]
    response = APIClient().post("/api/v1/search", {"catalog": "ops", "query": "retry", "mode": "bm25"},
                                format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response.json()["results"][0]["document_id"] == "retries.md"


def test_create_agent_refuses_unknown_catalogs_and_existing_names(indexed_catalog):
    call_command("create_agent", "--name", "bot", "--catalogs", "ops", stdout=io.StringIO())
    before = list(Agent.objects.values_list("name", "token_hash"))

    with pytest.raises(CommandError, match="unknown catalogs: nope"):
        call_command("create_agent", "--name", "other", "--catalogs", "ops,nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--rotate"):
        call_command("create_agent", "--name", "bot", "--catalogs", "ops", stdout=io.StringIO())

    assert list(Agent.objects.values_list("name", "token_hash")) == before


def test_create_agent_rotate_replaces_the_token(indexed_catalog):
    first, second = io.StringIO(), io.StringIO()
    call_command("create_agent", "--name", "bot", "--catalogs", "ops", stdout=first)

    call_command("create_agent", "--name", "bot", "--catalogs", "ops", "--rotate", stdout=second)

    client = APIClient()
    body = {"catalog": "ops", "query": "retry", "mode": "bm25"}
    old = client.post("/api/v1/search", body, format="json", HTTP_AUTHORIZATION=f"Bearer {first.getvalue().strip()}")
    new = client.post("/api/v1/search", body, format="json", HTTP_AUTHORIZATION=f"Bearer {second.getvalue().strip()}")
    assert (old.status_code, new.status_code) == (401, 200)
    assert Agent.objects.filter(name="bot").count() == 1
