"""Fixtures of the evaluation tests: the handbook catalog with a source that needs
approval, a stored test set, a run done as the worker does it, and signed-in people."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog.models import ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.evaluation.runs import evaluation_execute, evaluation_request
from retrieval.models import EvaluationRun
from tests.factories import import_documents, person
from tests.retrieval.evaluation.builders import ops_set


@pytest.fixture
def governed_ops(indexed_catalog):
    """The handbook and a vault source that needs approval."""
    vault = import_documents(catalog=indexed_catalog, slug="vault", documents=[
        DocumentInput("rotation.md", "Rotation", "Rotate the vault keys every ninety days.", 40)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    return indexed_catalog


@pytest.fixture
def done_run(governed_ops) -> EvaluationRun:
    run = evaluation_request(catalog=governed_ops, query_set=ops_set(), modes=["bm25", "vector", "hybrid"],
                             by="cora")
    done = evaluation_execute(run_id=run.pk)
    assert done is not None and done.status == "succeeded", done and done.error
    return done


@pytest.fixture
def curator_client(db) -> Client:
    client = Client()
    client.force_login(person("cora", "curator"))
    return client
