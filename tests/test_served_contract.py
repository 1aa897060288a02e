"""The published API contract holds on the server `make serve` runs: schemathesis reads
the schema that server serves at /api/v1/schema/ and sends every operation's generated
requests over HTTP to gunicorn (Lectern's worker class, its request limits), with the
django-q2 cluster beside it, as an outside client would. Never a 5xx, only documented
statuses and content types, bodies that match the documented shapes.

tests/test_api_contract.py runs the same configuration (tests/contract.py) in-process
with more examples per operation; this run proves what only a served stack can show:
gunicorn's own refusals, the production settings (DEBUG off) and the middleware in
front of Django. The demo catalog, an inline and an upload source and the two agents are
committed to the test database for the server; the transactional test's flush removes
them after.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from benchmarks.connections import Server
from catalog.agents import new_token
from catalog.demo_loader import demo_load
from catalog.models import ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.enrichment.detection import catalog_index
from tests.config.test_serve import production_env
from tests.contract import contract_config
from tests.factories import agent_with_token, import_documents

READER_TOKEN, CURATOR_TOKEN = new_token(), new_token()
SEED = int(os.environ.get("LECTERN_CONTRACT_SEED", "20260101"))  # another seed explores other requests
EXAMPLES = 15  # per operation and mode (valid, invalid data); the in-process run takes 40


@pytest.fixture
def served(transactional_db, tmp_path) -> Iterator[Server]:
    report = demo_load()
    catalog_index(report.catalog)
    ReferenceSource.objects.create(catalog=report.catalog, slug="notes", name="Notes", kind="inline",
                                   content="Rotate the on-call pager weekly.")
    import_documents(catalog=report.catalog, slug="faq", documents=[
        DocumentInput("q1", "Refunds", "Refunds are paid within five days.", 34)])
    for name, token, curator in (("contract-reader", READER_TOKEN, False),
                                 ("contract-curator", CURATOR_TOKEN, True)):
        agent_with_token(name=name, catalogs=[report.catalog], token=token, is_curator=curator)
    env = production_env(tmp_path)
    env.pop("LECTERN_HTTPS")  # plain http, as the proxy in front speaks to it
    server = Server("serve", env=env, log=tmp_path / "serve.log").start(timeout=180)
    try:
        yield server
    finally:
        server.stop()


def test_every_operation_keeps_its_contract_on_the_served_stack(served):
    schema = schemathesis.openapi.from_url(
        f"http://127.0.0.1:{served.port}/api/v1/schema/",
        config=contract_config(reader_token=READER_TOKEN, curator_token=CURATOR_TOKEN, max_examples=EXAMPLES))
    operations = [result for result in schema.get_all_operations()]
    assert all(isinstance(result, Ok) for result in operations), "the served schema does not parse"
    failures = [failure for result in operations if isinstance(result, Ok) for mode in GenerationMode
                if (failure := _contract_failure(result.ok(), mode))]
    assert len(operations) > 30 and not failures, "\n\n".join(failures)


def _contract_failure(operation, mode: GenerationMode) -> str | None:
    """The first failing request of `operation`'s generated ones in `mode` (valid or
    invalid data), shrunk by hypothesis, as text; None when every answer kept the contract."""
    @seed(SEED)  # the same requests every run, whatever this function's text
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    def check(case) -> None:
        case.call_and_validate()

    try:
        check()
    except Unsatisfiable:  # no invalid request exists (an operation without input)
        return None
    except Exception as failure:  # schemathesis raises its failure groups; any is the answer
        return f"{operation.label} ({mode.value}): {failure}"
    return None
