"""An agent's facts and memory, as curators see them: its end users, one end user's
facts and memories, their export, and their erasure at the end user's request
(retrieval.memory.services, audited). Agents write them over the API; here nothing
is written but the erasure."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods

from catalog.auth import CURATOR_GROUP, role_required
from catalog.models import Agent
from catalog.web import person
from retrieval.memory.forms import EndUserForm, EraseForm
from retrieval.memory.selectors import EndUser, end_users, end_users_count, facts_of, memories_of, memory_export
from retrieval.memory.services import memory_erase

MEMORIES_PAGE = 50
USERS_PAGE = 100

curators = role_required(CURATOR_GROUP)


class EndUserRows:
    """An agent's end users as Paginator reads them: counted, then one page read (the
    statement pages in SQL; an agent may talk to millions of people)."""

    def __init__(self, agent: Agent, contains: str) -> None:
        self.agent, self.contains = agent, contains

    def count(self) -> int:
        return end_users_count(agent=self.agent, contains=self.contains)

    def __getitem__(self, page: slice) -> list[EndUser]:
        start, stop = page.start or 0, page.stop or 0
        return end_users(agent=self.agent, contains=self.contains, limit=max(stop - start, 0), offset=start)


@curators
@require_GET
def agent_memory(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The agent's end users (filtered by id), or one end user's facts and memories."""
    agent = get_object_or_404(Agent, pk=agent_id)
    form = EndUserForm(request.GET)
    if not form.is_valid():
        return render(request, "retrieval/agents/memory.html", {"agent": agent, "form": form, "users": None},
                      status=400)
    user_id = form.cleaned_data["user"]
    if not user_id:
        rows: Any = EndUserRows(agent, form.cleaned_data["q"])  # Paginator's protocol, for what it calls
        users: Paginator[EndUser] = Paginator(rows, USERS_PAGE)
        return render(request, "retrieval/agents/memory.html", {
            "agent": agent, "form": form, "users": users.get_page(request.GET.get("page")),
            "query": urlencode({"q": form.cleaned_data["q"]}) if form.cleaned_data["q"] else ""})
    memories = Paginator(memories_of(agent=agent, user_id=user_id), MEMORIES_PAGE)
    return render(request, "retrieval/agents/end_user.html", {
        "agent": agent, "user_id": user_id, "facts": facts_of(agent=agent, user_id=user_id),
        "memories": memories.get_page(request.GET.get("page")), "query": urlencode({"user": user_id}),
        "erase": EraseForm(user_id=user_id)})


@curators
@require_GET
def agent_memory_export(request: HttpRequest, agent_id: int) -> HttpResponse:
    """One end user's facts and memories as a JSON file (what GET /api/v1/memory/export gives)."""
    agent = get_object_or_404(Agent, pk=agent_id)
    form = EndUserForm(request.GET)
    if not form.is_valid() or not form.cleaned_data["user"]:
        return render(request, "retrieval/agents/memory.html", {"agent": agent, "form": form, "users": None},
                      status=400)
    user_id = form.cleaned_data["user"]
    body = json.dumps(memory_export(agent=agent, user_id=user_id), cls=DjangoJSONEncoder, ensure_ascii=False,
                      indent=2)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{agent.name}-end-user-memory.json"'
    return response


@curators
@require_http_methods(["POST"])
def agent_memory_erase(request: HttpRequest, agent_id: int) -> HttpResponse:
    """Erase everything kept about one end user, once the curator typed their id again."""
    agent = get_object_or_404(Agent, pk=agent_id)
    form = EraseForm(request.POST, user_id=request.POST.get("user", ""))
    if not form.is_valid():
        user_id = request.POST.get("user", "")[:200]
        memories = Paginator(memories_of(agent=agent, user_id=user_id), MEMORIES_PAGE)
        return render(request, "retrieval/agents/end_user.html", {
            "agent": agent, "user_id": user_id, "facts": facts_of(agent=agent, user_id=user_id),
            "memories": memories.get_page(1), "query": urlencode({"user": user_id}), "erase": form}, status=400)
    erased = memory_erase(agent=agent, user_id=form.cleaned_data["user"], by=person(request))
    messages.success(request, f"Erased {erased['memories']} memor{'y' if erased['memories'] == 1 else 'ies'}, "
                              f"{erased['facts']} fact{'' if erased['facts'] == 1 else 's'} and "
                              f"{erased['traces']} conversation trace{'' if erased['traces'] == 1 else 's'} of that "
                              "end user; the audit log records the erasure (without their id).")
    return redirect(reverse("agents-memory", args=[agent.pk]))
