"""Middleware for /api/: errors in the JSON shape whatever layer made them, and requests
refused before any parser or view reads them; and, for every request, following a
reset of the per-process caches that another process answered, and with a replica,
keeping an agent's reads after its own writes."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from catalog.agents import agent_read_fence_advance
from catalog.models import Agent
from catalog.reads import REPLICA, reads_served, replica_configured, writes_noticed
from config.api_errors import (
    api_error_response,
    database_unavailable_response,
    is_api,
    json_error,
    note_uncaught,
)
from config.log_filters import NOTED
from retrieval.runtime import runtime_follow

security_logger = logging.getLogger("django.security.DisallowedHost")
READ_FROM_HEADER = "Lectern-Read-From"


class ApiErrorMiddleware:
    """The outermost layer. Django turns an exception raised by a view or by any
    middleware into a response before the next layer out sees it (with DEBUG on, an
    HTML debug page); note_uncaught() notes each on its request, and this answers:

    - the database unreachable (from any layer, on any path): 503 with Retry-After,
      the JSON error under /api/, a plain page elsewhere;
    - under /api/, every error response not already JSON becomes the JSON error: a bug
      is `internal_error` with the error id its traceback was logged with, an
      unmatched URL `not_found`, whatever DEBUG says;
    - under /api/, a Host header not in ALLOWED_HOSTS is a JSON 400 (Django would
      answer an HTML page from the first layer that asks for the host).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        got_request_exception.connect(note_uncaught, dispatch_uid="lectern-note-uncaught")

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if is_api(request) and (refusal := _host_refusal(request)) is not None:
            return refusal
        response = self.get_response(request)
        noted = getattr(request, NOTED, None)
        if noted is not None and noted.database_down:
            response = _replacing(response, database_unavailable_response(request))
        elif is_api(request) and response.status_code >= 400 and response.get("Content-Type") != "application/json":
            response = _replacing(response, api_error_response(request, response, noted))
        if noted is not None:
            # note_uncaught() logged it: Django need not again (a private flag Django's
            # log_response() reads, absent from django-stubs)
            response._has_been_logged = True  # type: ignore[attr-defined]
        return response


def _replacing(original: HttpResponseBase, replacement: HttpResponseBase) -> HttpResponseBase:
    """`replacement`, with the headers the layers inside gave `original` (security
    headers, Allow, WWW-Authenticate, ...) except those describing its content."""
    for header, value in original.items():
        if header.lower() not in ("content-type", "content-length") and header not in replacement:
            replacement[header] = value
    return replacement


def _host_refusal(request: HttpRequest) -> JsonResponse | None:
    try:
        request.get_host()
    except DisallowedHost as exc:
        security_logger.warning("%s", exc)  # what Django logs for it
        return json_error("disallowed_host", "This server does not answer to the Host header given.", 400)
    return None


def api_input_refusal(request: HttpRequest) -> JsonResponse | None:
    """The error answering an API request that no view should read, or None.

    - a body sent without a Content-Length (chunked): Django reads such a body as
      empty, under any WSGI server, so it is refused rather than silently lost;
    - a body over the limit (DRF reads the raw stream, bypassing Django's
      DATA_UPLOAD_MAX_MEMORY_SIZE check);
    - a NUL character in the path or the query string: Postgres cannot store one in
      text, and the first query holding it fails (the body's strings are checked by
      config.parsers.JSONParser).
    """
    if "HTTP_TRANSFER_ENCODING" in request.META:
        return json_error("length_required", "Send the body with a Content-Length; chunked bodies are not read.", 411)
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return json_error("malformed_request", "Content-Length is not a number.", 400)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length > limit:
        return json_error("payload_too_large", f"Request body over {limit} bytes.", 413, {"max_bytes": limit})
    if "\x00" in request.path or any("\x00" in key or any("\x00" in value for value in values)
                                     for key, values in request.GET.lists()):
        return json_error("malformed_request", "The URL may not contain NUL (%00) characters.", 400)
    return None


class ApiInputMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if is_api(request) and (refusal := api_input_refusal(request)) is not None:
            return refusal
        return self.get_response(request)


class RuntimeFollowMiddleware:
    """Each web process applies a reset another process answered (the embedding model
    reloaded, detection caches dropped) before the next request it serves, looking at
    most once per LECTERN_RUNTIME_POLL_SECONDS (retrieval.runtime)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        runtime_follow()
        return self.get_response(request)


class ReplicaReadsMiddleware:
    """With a replica configured (DATABASE_REPLICA_URL): an agent whose request wrote
    gets its read fence moved past those writes (catalog.agents.agent_read_fence_advance),
    so its later reads, on any web process, wait for the replica to hold them; and an
    answer a read path routed says where it was read, in `Lectern-Read-From` (`replica`
    or `primary`). Without a replica it does nothing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not replica_configured():
            return self.get_response(request)
        with writes_noticed() as writes, reads_served() as served:
            response = self.get_response(request)
        agent = getattr(request, "user", None)  # the agent DRF authenticated, set on the request
        if writes.wrote and isinstance(agent, Agent):
            agent_read_fence_advance(agent=agent)
        if served:
            response[READ_FROM_HEADER] = "replica" if served[-1] == REPLICA else "primary"
        return response
