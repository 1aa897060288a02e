"""What the two contract runs share: schemathesis's configuration (seed, dictionaries of
known names, a reader token for most operations and a curator token for the
catalog-editing ones) and the failures both forgive. tests/test_api_contract.py runs it
against the WSGI app in-process; tests/test_served_contract.py against `make serve`'s
server (gunicorn, its worker and WhiteNoise) over HTTP."""

from __future__ import annotations

import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.openapi.checks import RejectedPositiveData

# create_source and update_source are left to the reader's token (refused): a generated
# repository URL would be resolved, and tests reach no address but 127.0.0.1
# (tests/catalog/test_sources_api.py drives them).
CURATOR_OPERATIONS = ["reindex_catalog", "set_inline_content", "put_upload_file", "delete_upload_file",
                      "reset_status", "start_evaluation", "get_evaluation", "list_sources", "get_source"]
# Known names, offered often but not always: a generated one exercises the 404s.
KNOWN = 0.8


def contract_config(*, reader_token: str, curator_token: str, max_examples: int) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict({
        "seed": 20260101,
        # allow-x00 (schemathesis's default, kept explicit): strings may hold NUL, which the
        # server refuses everywhere; the schema must say so, or a schema-valid request is refused.
        "generation": {"deterministic": True, "database": "none", "max-examples": max_examples, "allow-x00": True},
        "phases": {"stateful": {"enabled": False}},
        # schemathesis's list of refusals, plus those the served stack makes before Django
        # reads a request: 408 (it did not arrive whole in time), 413 (a body over the size
        # limit), 414 and 431 (a request line or header over the server's limits).
        "checks": {"negative_data_rejection": {"expected-statuses": [
            "400", "401", "403", "404", "405", "406", "408", "409", "413", "414", "415", "422", "428", "429",
            "431", "5xx"]}},
        "dictionaries": {
            "catalogs": {"values": ["demo"]},
            "references": {"values": ["python-style", "retry-backoff", "caching", "demo/circuit-breaker"]},
            "tags": {"values": ["retries", "caching", "python"]},
            "files": {"values": ["python-style.md", "retry-backoff.md", "q1"]},
            "sources": {"values": ["notes", "faq", "caching"]},
        },
        "parameters": {
            "path.slug": {"dictionary": "catalogs", "probability": KNOWN},
            "path.catalog": {"dictionary": "catalogs", "probability": KNOWN},
            "path.source_id": {"dictionary": "references", "probability": KNOWN},
            "query.path": {"dictionary": "files", "probability": KNOWN},
            "query.catalog": {"dictionary": "catalogs", "probability": KNOWN},
            "body.catalog": {"dictionary": "catalogs", "probability": KNOWN},
            "body.catalogs[*]": {"dictionary": "catalogs", "probability": KNOWN},
            "body.ids[*]": {"dictionary": "references", "probability": KNOWN},
            "body.tags[*]": {"dictionary": "tags", "probability": KNOWN},
        },
        # Tokens per operation, not one project-wide: schemathesis 4.32 lets project headers
        # override an operation's.
        "operations": [
            {"exclude-operation-id": CURATOR_OPERATIONS, "headers": {"Authorization": f"Bearer {reader_token}"}},
            {"include-operation-id": CURATOR_OPERATIONS, "headers": {"Authorization": f"Bearer {curator_token}"},
             "parameters": {"path.source": {"dictionary": "sources", "probability": KNOWN},
                            "query.source": {"dictionary": "sources", "probability": KNOWN}}},
        ],
    })


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """Keep every failure except three 400s for schema-valid requests, which turn on more
    than the request's shape: ids or tags that no reference has (`unknown_reference`:
    the schema cannot know a catalog's contents), a test set whose files are not
    BEIR's format or whose name is taken (`invalid_test_set`: the lines of a text field),
    and a cite of the documented pattern whose range is empty, whose brackets do not
    pair or whose escapes are not UTF-8 (`invalid_cite`: what a pattern cannot say).
    A NUL is not among them: the schema says where it is refused (everywhere)."""
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 400:
        return True
    return response.json()["error"]["code"] not in ("unknown_reference", "invalid_test_set", "invalid_cite")
