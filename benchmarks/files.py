"""How many of the product's files one request crosses: a search, an enrich and a
reviewer's decision, each sent through the whole stack in-process (DRF or the page,
token or session auth, the gate, the trace write) with a profiler that notes the file
of every Python function called. A first call of each warms imports and caches, so the
count is what a request runs, not what the process loads once.

Everything is written inside one transaction that is rolled back at the end: a
catalog of two references (one needs approval), an agent and a reviewer. Work that
waits for a commit (webhook and e-mail outbox tasks) is not counted, as it is not the
request's. Files are counted under the checkout, outside the virtualenv and the tests.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from django.db import transaction
from django.test import Client
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.requests import RaiseItem, requests_raise
from benchmarks.common import BenchmarkError, bench_person
from catalog.agents import agent_token_rotate
from catalog.auth import CURATOR_GROUP, REVIEWER_GROUP
from catalog.indexing.source_index import source_index
from catalog.models import Catalog, ReferenceSource

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ("/.venv/", "/tests/", "/benchmarks/", "/migrations/")
SLUG = "bench-files"
TEXTS = {
    "tomatoes": "Lycopene in tomatoes and the prostate: what the trials measured, and what cooking changes.",
    "statins": "Statins and muscle pain: how often it happens, and what the blinded trials found.",
}


class _Rollback(Exception):
    pass


@contextmanager
def _files_called(into: set[str]) -> Iterator[None]:
    root = str(ROOT)

    def note(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(root) and not any(part in name for part in OUTSIDE):
                into.add(name[len(root) + 1:])

    sys.setprofile(note)
    try:
        yield
    finally:
        sys.setprofile(None)


def _checked(response: Any) -> Any:
    if response.status_code != 200:
        raise BenchmarkError(f"answered {response.status_code}: {response.content[:300]!r}")
    return response


def _counted(call: Callable[[], Any]) -> list[str]:
    call()  # warm: imports, the catalog's detection index, the embedding model
    files: set[str] = set()
    with _files_called(files):
        call()
    return sorted(files)


def files_crossed() -> dict[str, list[str]]:
    """{request: the product files it ran code in}, counted on throwaway data."""
    results: dict[str, list[str]] = {}
    try:
        with transaction.atomic():
            results = _crossings()
            raise _Rollback
    except _Rollback:
        pass
    return results


def _crossings() -> dict[str, list[str]]:
    catalog = Catalog.objects.create(slug=SLUG, name="Files crossed")
    curator = bench_person("bench-files-curator", CURATOR_GROUP)
    for slug, text in TEXTS.items():
        source = ReferenceSource.objects.create(
            catalog=catalog, slug=slug, name=slug.title(), description=text, content=text,
            kind=ReferenceSource.Kind.INLINE, mode=ReferenceSource.Mode.SELECTABLE,
            requires_approval=slug == "tomatoes")
        source_index(source=source)
    agent, token = agent_token_rotate(name="bench-files-agent", catalogs=[catalog], is_active=True, by=curator)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    reviewer = bench_person("bench-files-reviewer", REVIEWER_GROUP)
    page = Client()
    page.force_login(reviewer)

    def search() -> Any:
        return _checked(api.post("/api/v1/search", {"catalog": SLUG, "query": "tomatoes lycopene prostate",
                                                    "mode": "hybrid", "top_k": 5}, format="json"))

    def enrich() -> Any:
        return _checked(api.post("/api/v1/enrich", {"text": "Do statins cause muscle pain, and do tomatoes help?",
                                                    "surface": "prompt"}, format="json"))

    results = {"search": _counted(search), "enrich": _counted(enrich)}
    sources = ReferenceSource.objects.filter(catalog=catalog).order_by("slug")
    raised = requests_raise(agent=agent, via=ApprovalRequest.Via.MANUAL, items=[
        RaiseItem(source_id=source.pk, fingerprint=source.fingerprint) for source in sources])
    requests = sorted(raised.values())
    queue = iter(requests)

    def decide() -> Any:
        return _checked(page.post(f"/approvals/{next(queue)}/decide", {"verdict": "approve", "comment": ""},
                                  headers={"HX-Request": "true"}))

    results["decision"] = _counted(decide)
    return results
