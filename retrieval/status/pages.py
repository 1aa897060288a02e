"""The status page (people with a role) and its reset (curators): what
retrieval.status.selectors reports, rendered; the reset is retrieval.runtime's, as the API's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from catalog.auth import CURATOR_GROUP, REVIEWER_GROUP, is_curator, role_required
from catalog.web import from_htmx
from retrieval.runtime import runtime_reset
from retrieval.status.selectors import full_status

viewers = role_required(CURATOR_GROUP, REVIEWER_GROUP)
curators = role_required(CURATOR_GROUP)


# A scheduled task runs when the worker's scheduler next looks (about every 30 s): a
# schedule this far past its next run means no worker is taking it.
LATE_S = 120


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    text: str


def checks(status: dict[str, Any]) -> list[Check]:
    """The page's summary line: what needs a curator's attention, each in a few words."""
    embeddings, queue, runs = status["embeddings"], status["queue"], status["index_runs"]
    scan = status["last_scan"]
    not_ready = sum(catalog["sources_not_ready"] for catalog in status["catalogs"])
    found = [Check("Model", embeddings["mode"] == "hybrid",
                   "loaded" if embeddings["mode"] == "hybrid" else "not loaded: search is lexical only"),
             Check("Database", True, f"Postgres {status['database']['version']}")]
    if scan is not None:
        late = scan["overdue_s"] > LATE_S
        found.append(Check("Worker", not late, f"the scan is {_minutes(scan['overdue_s'])} late: is the worker "
                                               "running?" if late else "scanning on schedule"))
    failed = queue["failed_24h"] + runs["failed_24h"]
    found.append(Check("Failures", failed == 0, "none in 24 h" if not failed else f"{failed} in 24 h"))
    found.append(Check("Sources", not_ready == 0, "all indexed" if not not_ready else f"{not_ready} not ready"))
    return found


def _minutes(seconds: int) -> str:
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{minutes // 60} hours"




def _render(request: HttpRequest, **extra: object) -> HttpResponse:
    status = full_status()
    context = {"status": status, "checks": checks(status), "can_reset": is_curator(request.user),
               "late_s": LATE_S, **extra}
    template = "retrieval/status/partials/panel.html" if from_htmx(request) else "retrieval/status/page.html"
    return render(request, template, context)


@viewers
@require_GET
def status_page(request: HttpRequest) -> HttpResponse:
    """The whole page, or (htmx: its Refresh button, and every 30 seconds) the panel."""
    return _render(request)


@curators
@require_POST
def status_reset(request: HttpRequest) -> HttpResponse:
    outcome = runtime_reset(by=request.user)
    model = outcome.embeddings
    loaded = (f"the model {model['model']} loaded again" if model["model"]
              else f"no model loaded: {model['reason']}")
    others = settings.LECTERN_RUNTIME_POLL_SECONDS
    note = (f"Reset (audit #{outcome.reset.seq}): {loaded}; {outcome.indexes_dropped} cached detection "
            f"index{'es' if outcome.indexes_dropped != 1 else ''} dropped here; "
            + (f"the other processes follow within {others} seconds." if others
               else "other processes keep theirs until they restart (LECTERN_RUNTIME_POLL_SECONDS=0)."))
    if not from_htmx(request):
        messages.success(request, note)
        return redirect("status-page")
    return _render(request, notice=note)
