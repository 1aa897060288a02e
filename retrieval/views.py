"""The front door: "/" sends each person to where their work is."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from catalog.auth import is_curator, is_reviewer


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponseRedirect:
    """Curators to the playground (their own pages start there), reviewers to the
    queue; a person with no role gets the 403 page, which says how to get one."""
    if is_curator(request.user):
        return redirect("playground")
    if is_reviewer(request.user):
        return redirect("approvals-queue")
    raise PermissionDenied("this service is for curators and reviewers")
