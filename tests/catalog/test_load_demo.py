"""`manage.py load_demo`: the shipped handbook becomes a searchable catalog, an admin
and an agent token, and running it again re-indexes nothing."""

from __future__ import annotations

import logging
import re
from io import StringIO

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from catalog.demo_loader import DEMO_DIR
from catalog.embedder import get_embedder
from catalog.models import Catalog, Document, ReferenceSource, Tag

TOKEN_LINE = re.compile(r"^Agent token \(demo-agent\): (lct_\S+)$", re.MULTILINE)
ADMIN_LINE = re.compile(r"^Superuser: admin / (\S+) \(a new random password", re.MULTILINE)
QUESTION = "how should we handle transient failures?"

pytestmark = pytest.mark.django_db
_VECTORS: dict[str, np.ndarray] = {}


@pytest.fixture(autouse=True)
def embed_each_text_once(monkeypatch):
    """Embedding the handbook's ~40 chunks takes seconds on two cores: the real model
    embeds each text once in this module, later loads reuse its vectors."""
    embedder = get_embedder()
    if embedder is None:
        return
    real = embedder.embed

    def embed(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in _VECTORS]
        if missing:
            _VECTORS.update(zip(missing, real(missing), strict=True))
        return np.stack([_VECTORS[t] for t in texts]) if texts else real(texts)

    monkeypatch.setattr(embedder, "embed", embed)


def load_demo() -> str:
    out = StringIO()
    call_command("load_demo", "--no-progress", stdout=out)
    return out.getvalue()


def search(token: str, query: str) -> tuple[int, dict]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post("/api/v1/search", {"catalog": "demo", "query": query, "top_k": 3}, format="json")
    return response.status_code, response.json()


def test_demo_files_are_titled_markdown_of_useful_size():
    files = sorted(DEMO_DIR.glob("*.md"))
    assert len(files) == 12
    for path in files:
        assert path.read_text(encoding="utf-8").startswith("# "), path.name
        assert 1500 <= path.stat().st_size <= 4096, path.name


def test_first_run_builds_the_catalog_its_sources_and_tags():
    output = load_demo()

    catalog = Catalog.objects.get(slug="demo")
    assert catalog.name == "Engineering handbook"
    sources = {s.slug: s for s in catalog.sources.prefetch_related("tags")}
    assert len(sources) == 13
    assert all(s.status == ReferenceSource.Status.READY for s in sources.values())
    assert Document.objects.filter(source__catalog=catalog).count() == 17  # 12 files + the service-template folder
    assert catalog.chunk_count >= 12
    assert {s for s, src in sources.items() if src.requires_approval} == {"secrets-management", "incident-response"}
    assert {src.mode for src in sources.values()} == {"auto", "selectable", "preselected"}
    assert {"circuit-breaker", "rate-limit", "resilience"} <= set(Tag.objects.values_list("key", flat=True))
    assert "circuit-breaker" in {t.key for t in sources["circuit-breaker"].tags.all()}
    assert get_user_model().objects.get(username="admin").is_superuser
    assert ADMIN_LINE.search(output)
    assert output.count("  indexed ") == 13


def test_the_admin_password_is_random_printed_once_and_never_stored_in_clear_or_logged(caplog):
    with caplog.at_level(logging.DEBUG):
        first_output = load_demo()
    password = ADMIN_LINE.search(first_output).group(1)
    admin = get_user_model().objects.get(username="admin")

    assert len(password) >= 16 and password != "lectern"
    assert admin.check_password(password)
    assert password not in admin.password  # a hash
    assert password not in caplog.text
    assert first_output.count(password) == 1
    assert not ADMIN_LINE.search(load_demo()), "shown when created, never again"

    admin.delete()
    assert ADMIN_LINE.search(load_demo()).group(1) != password, "a new one each time one is created"


def test_an_admin_still_on_the_former_fixed_password_gets_a_random_one():
    load_demo()
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("lectern")
    admin.save()

    password = ADMIN_LINE.search(load_demo()).group(1)

    admin.refresh_from_db()
    assert admin.check_password(password) and not admin.check_password("lectern")


def test_second_run_reindexes_nothing_and_keeps_the_admin_password():
    load_demo()
    indexed_at = dict(ReferenceSource.objects.values_list("slug", "indexed_at"))
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed-by-curator")
    admin.save()

    output = load_demo()

    assert "  indexed " not in output
    assert "unchanged, not re-indexed: 13 sources" in output
    assert dict(ReferenceSource.objects.values_list("slug", "indexed_at")) == indexed_at
    assert Tag.objects.filter(key="circuit-breaker").count() == 1
    assert "Superuser admin exists" in output
    admin.refresh_from_db()
    assert admin.check_password("changed-by-curator")


def test_a_changed_file_is_reindexed_on_the_next_run():
    load_demo()
    source = ReferenceSource.objects.get(catalog__slug="demo", slug="caching")
    ReferenceSource.objects.filter(pk=source.pk).update(fingerprint="stale")

    output = load_demo()

    assert "  indexed caching: 1 documents" in output
    assert output.count("  indexed ") == 1


def test_printed_token_finds_the_circuit_breaker_and_rotates_on_each_run():
    first = TOKEN_LINE.search(load_demo()).group(1)
    output = load_demo()
    token = TOKEN_LINE.search(output).group(1)

    status, body = search(token, QUESTION)

    assert status == 200
    assert "circuit-breaker" in [hit["source"] for hit in body["results"][:3]]
    assert search(first, QUESTION)[0] == 401
    assert output.rstrip().splitlines()[-1].strip().startswith("curl -s -X POST http://127.0.0.1:8000/api/v1/search")
