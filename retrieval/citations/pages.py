"""The cite page (curators): paste a cite, see the exact text that was served, which
traces served it, when and to whom, and whether the document still holds it. The same
selectors as GET /api/v1/cite, so a curator agent's rule holds here too."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from catalog.auth import CURATOR_GROUP, role_required
from catalog.errors import ApplicationError
from catalog.web import status_of
from retrieval.citations.grammar import MAX_CHARS
from retrieval.citations.selectors import cite_resolve
from retrieval.citations.serializers import cite_of

curators = role_required(CURATOR_GROUP)


@curators
@require_GET
def cite_page(request: HttpRequest) -> HttpResponse:
    raw = request.GET.get("c", "")
    context: dict[str, object] = {"raw": raw, "max_chars": MAX_CHARS}
    status = 200
    if raw.strip():
        try:
            context["resolution"] = cite_resolve(caller=request.user, cite=cite_of(raw))
        except ApplicationError as exc:  # a bad cite (400), or none this curator may read (404)
            context["error"], status = exc.message, status_of(exc)
    return render(request, "retrieval/citations/page.html", context, status=status)
