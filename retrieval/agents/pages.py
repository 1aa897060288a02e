"""The agent pages (curators): the list, a new agent (its token shown once), one agent
(scope, pinned references, profile), rotating and revoking its token after a
confirmation.

Every write goes through catalog.agents (which checks the role again and announces the
write for the audit log). A token appears in exactly one response, the one answering
the POST that issued it, marked no-store; no page can show it again: only its first
characters (the hint) are kept besides its hash.
"""

from __future__ import annotations

from copy import copy
from typing import Any, cast

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from catalog.agents import agent_create, agent_token_revoke, agent_token_rotate, agent_update
from catalog.auth import CURATOR_GROUP, role_required
from catalog.models import Agent, Catalog
from catalog.web import from_htmx, person
from retrieval.agents.forms import AgentFilterForm, AgentForm, ids_of, pin_groups

curators = role_required(CURATOR_GROUP)

AGENTS_PAGE = 50




def _agents_with_catalogs() -> Any:
    return Agent.objects.prefetch_related(Prefetch("catalogs", queryset=Catalog.objects.only("id", "slug")))


# --- the list ------------------------------------------------------------------------------

@curators
@require_GET
def agent_list(request: HttpRequest) -> HttpResponse:
    """Every agent, filtered by name, state and catalog: a constant number of
    statements (the page's agents, then their catalogs in one)."""
    form = AgentFilterForm(request.GET)
    agents = form.agents(_agents_with_catalogs()) if form.is_valid() else Agent.objects.none()
    page = Paginator(agents.order_by("name"), AGENTS_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "query": query.urlencode(), "filtered": any(request.GET.get(name)
                                                                                          for name in form.fields)}
    template = "retrieval/agents/partials/agents_table.html" if from_htmx(request) else "retrieval/agents/list.html"
    return render(request, template, context, status=200 if form.is_valid() else 400)


# --- a new agent, one agent ----------------------------------------------------------------

def _form_context(form: AgentForm, **context: Any) -> dict[str, Any]:
    """The form and its pin choices: the sources of the catalogs it holds (as sent, or
    as stored), and any pin outside them."""
    if form.is_bound:
        data = cast(QueryDict, form.data)
        catalog_ids, pinned = ids_of(data.getlist("catalogs")), ids_of(data.getlist("preselected"))
    else:  # the instance's, as ModelForm read them (none for a new agent)
        catalog_ids = ids_of(form.initial.get("catalogs") or [])
        pinned = ids_of(form.initial.get("preselected") or [])
    return {"form": form, "pin_groups": pin_groups(catalog_ids, pinned), **context}


def _token_page(request: HttpRequest, agent: Agent, token: str, *, created: bool) -> HttpResponse:
    """The one response that holds the token: never cached, never shown again."""
    response = render(request, "retrieval/agents/token.html", {"agent": agent, "token": token, "created": created},
                      status=201 if created else 200)
    response["Cache-Control"] = "no-store"
    return response


def _refused(form: AgentForm, error: ValidationError) -> None:
    """A refusal from catalog.agents (it checks again what the form checked) shown on
    the form's fields."""
    if hasattr(error, "error_dict"):
        for name, errors in error.message_dict.items():
            form.add_error(name if name in form.fields else None, errors)
    else:
        form.add_error(None, error.messages)


@curators
@require_http_methods(["GET", "POST"])
def agent_new(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        form = AgentForm(creating=True, initial={"strategy": Agent.Strategy.PRELOAD})
        return render(request, "retrieval/agents/new.html", _form_context(form))
    form = AgentForm(request.POST, creating=True)
    if form.is_valid():
        try:
            agent, token = agent_create(name=form.cleaned_data["name"], catalogs=form.cleaned_data["catalogs"],
                                        preselected=form.cleaned_data["preselected"], by=person(request),
                                        **form.profile())
        except ValidationError as error:
            _refused(form, error)
        else:
            return _token_page(request, agent, token, created=True)
    return render(request, "retrieval/agents/new.html", _form_context(form), status=400)


@curators
@require_http_methods(["GET", "POST"])
def agent_page(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = get_object_or_404(_agents_with_catalogs(), pk=agent_id)  # curators see every agent
    editing = copy(agent)  # the form's own: a refused edit leaves `agent`, which the page shows, as stored
    if request.method == "GET":
        return render(request, "retrieval/agents/agent.html",
                      _form_context(AgentForm(instance=editing, creating=False), agent=agent))
    form = AgentForm(request.POST, instance=editing, creating=False)
    if form.is_valid():
        try:
            _, changes = agent_update(agent_id=agent.pk, by=person(request), catalogs=form.cleaned_data["catalogs"],
                                      preselected=form.cleaned_data["preselected"], **form.profile())
        except ValidationError as error:
            _refused(form, error)
        else:
            messages.success(request, f"Saved {agent.name}: changed {_listed(changes)}." if changes
                             else f"Nothing to save: {agent.name} already had these settings.")
            return redirect("agents-page", agent_id=agent.pk)
    return render(request, "retrieval/agents/agent.html", _form_context(form, agent=agent), status=400)


FIELD_NAMES = {"is_curator": "curator", "token_budget": "token budget", "default_top_k": "results per search",
               "semantic_threshold": "semantic threshold", "semantic_margin": "semantic margin",
               "max_hints": "most hints", "rag_relevance_threshold": "relevance threshold",
               "rag_max_results": "most injected per message", "preselected": "pinned references",
               "is_active": "active"}


def _listed(changes: dict[str, Any]) -> str:
    names = [FIELD_NAMES.get(name, name) for name in changes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@curators
@require_GET
def agent_pins(request: HttpRequest) -> HttpResponse:
    """The pin choices for the catalogs the form holds now (htmx, as catalogs are
    checked and unchecked), keeping what is pinned."""
    groups = pin_groups(ids_of(request.GET.getlist("catalogs")), ids_of(request.GET.getlist("preselected")))
    return render(request, "retrieval/agents/partials/pins.html", {"pin_groups": groups, "pin_errors": []})


# --- the token ---------------------------------------------------------------------------

@curators
@require_http_methods(["GET", "POST"])
def agent_rotate(request: HttpRequest, agent_id: int) -> HttpResponse:
    """GET: the confirmation; POST: a new token, shown once (a revoked agent is active
    again with it)."""
    agent = get_object_or_404(Agent, pk=agent_id)
    if request.method == "GET":
        return render(request, "retrieval/agents/confirm.html", {"agent": agent, "action": "rotate"})
    agent, token = agent_token_rotate(name=agent.name, by=person(request))
    return _token_page(request, agent, token, created=False)


@curators
@require_http_methods(["GET", "POST"])
def agent_revoke(request: HttpRequest, agent_id: int) -> HttpResponse:
    """GET: the confirmation; POST: the token revoked, its next call refused (401)."""
    agent = get_object_or_404(Agent, pk=agent_id)
    if request.method == "GET":
        return render(request, "retrieval/agents/confirm.html", {"agent": agent, "action": "revoke"})
    hint = agent.token_hint
    agent_token_revoke(agent_id=agent.pk, by=person(request))
    messages.success(request, f"Revoked the token of {agent.name} ({hint}…): its next call is refused. "
                              "Issue a new token to let it in again.")
    return redirect("agents-page", agent_id=agent.pk)
