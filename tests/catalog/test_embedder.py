"""The ONNX embedder: verified model files, real vectors, and lexical-only degradation."""

from __future__ import annotations

import numpy as np
import pytest
from rest_framework.test import APIClient

from catalog.embedder import (
    DIMENSIONS,
    EmbedderUnavailable,
    ModelFiles,
    default_model_files,
    directory_model_files,
    get_embedder,
    reset_embedder,
    verify,
)
from catalog.models import ReferenceSource
from catalog.sources.documents import DocumentInput
from tests.factories import import_documents


def test_default_model_embeds_unit_vectors_that_rank_paraphrases_closer():
    embedder = get_embedder()
    assert embedder is not None

    vectors = embedder.embed(["how should we handle transient failures?",
                              "retry with exponential backoff when a call fails temporarily",
                              "a recipe for banana bread"])

    assert vectors.shape == (3, DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_batched_embedding_equals_one_at_a_time():
    embedder = get_embedder()
    assert embedder is not None
    texts = ["short", "a somewhat longer sentence about caching and invalidation", "mid length text here"]

    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])

    assert np.allclose(together, alone, atol=1e-4)


def test_token_counts_are_not_truncated():
    embedder = get_embedder()
    assert embedder is not None
    long_text = "word " * 600

    assert embedder.count_tokens([long_text])[0] > 600


@pytest.mark.parametrize("text", [
    "The circuit breaker opens after repeated failures. " * 40,
    "import io.github.resilience4j.circuitbreaker.CircuitBreaker;\n" * 30,
    "    indented   code\twith\ttabs and  double  spaces\n" * 40,
    "x" * 3000 + " then words",  # no whitespace in the prefix
    "ünïcödé wörds and émojis 🙂 " * 60,
    "short text",
])
def test_a_head_is_the_whole_texts_first_tokens(text):
    embedder = get_embedder()
    assert embedder is not None
    whole = embedder._tokenizer.encode(text).ids
    expected = whole if len(whole) <= 64 else whole[:63] + whole[-1:]

    assert embedder._encode_heads([text], 64) == [expected]
    head = embedder.embed([text], max_tokens=64)
    with_tail = embedder.embed([text + " an unrelated tail about banana bread" * 200], max_tokens=64)
    assert np.allclose(head, with_tail, atol=1e-5) == (len(whole) > 64)  # only the head is read


def test_a_model_file_with_the_wrong_digest_is_refused(tmp_path):
    files = default_model_files()
    tampered = ModelFiles("tampered", files.model, files.tokenizer, {**files.sha256, "model.onnx": "0" * 64})

    with pytest.raises(EmbedderUnavailable, match="sha256 mismatch"):
        verify(tampered)


def test_a_model_directory_needs_a_checksum_file(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(EmbedderUnavailable, match="SHA256SUMS"):
        directory_model_files(tmp_path)


@pytest.fixture
def no_model(settings):
    settings.LECTERN_EMBEDDING_MODEL = "none"
    reset_embedder()
    yield
    reset_embedder()


def test_without_a_model_indexing_and_search_degrade_to_lexical_only(no_model, make_catalog, agent_token):
    catalog = make_catalog("plain")
    source = import_documents(catalog=catalog, slug="notes", documents=[
        DocumentInput("a.md", "Retries", "Retry transient failures with backoff.", 40),
        DocumentInput("b.md", "Caching", "Cache responses with a time to live.", 40),
    ])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token('plain-agent', [catalog])}")

    hybrid = client.post("/api/v1/search", {"catalog": "plain", "query": "retry failures"}, format="json")
    vector = client.post("/api/v1/search", {"catalog": "plain", "query": "retry failures", "mode": "vector"},
                         format="json")
    status = client.get("/api/v1/status")

    source.refresh_from_db()
    assert source.status == ReferenceSource.Status.LEXICAL_ONLY
    assert hybrid.status_code == 200
    assert hybrid.json()["mode"] == "bm25"
    assert hybrid.json()["degraded"].startswith("lexical-only")
    assert hybrid.json()["results"][0]["document_id"] == "a.md"
    assert vector.status_code == 409
    assert vector.json()["error"]["code"] == "embeddings_unavailable"
    assert status.json()["embeddings"]["mode"] == "lexical-only"


@pytest.mark.parametrize("text", [
    "how should we handle transient failures?",
    "The circuit breaker opens after repeated failures. " * 60,
    "ünïcödé wörds and émojis 🙂 " * 120,
    "x" * 3000 + " then words",
])
def test_embed_head_says_how_much_of_the_text_the_model_read(text):
    embedder = get_embedder()
    assert embedder is not None

    vector, read = embedder.embed_head(text)

    # then: the vector is the text's as the model reads it, and exactly the first `read`
    # characters give it (read whole: nothing of them left out)
    assert np.allclose(vector, embedder.embed([text])[0], atol=1e-5)
    fits = embedder.count_tokens([text])[0] <= embedder.max_tokens
    assert (read == len(text)) == fits
    head_vector, head_read = embedder.embed_head(text[:read])
    assert head_read == read
    assert np.allclose(head_vector, vector, atol=1e-5)
