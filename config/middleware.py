"""Requests to /api/ refused before any parser or view reads them."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from config.api_errors import json_error


def api_input_refusal(request: HttpRequest) -> JsonResponse | None:
    """The error answering an API request that no view should read, or None.

    - a body over the limit (DRF reads the raw stream, bypassing Django's
      DATA_UPLOAD_MAX_MEMORY_SIZE check);
    - a NUL character in the path or the query string: Postgres cannot store one in
      text, and the first query holding it fails (the body's strings are checked by
      config.parsers.JSONParser).
    """
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return json_error("malformed_request", "Content-Length is not a number.", 400)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length > limit:
        return json_error("payload_too_large", f"Request body over {limit} bytes.", 413)
    if "\x00" in request.path or any("\x00" in key or any("\x00" in value for value in values)
                                     for key, values in request.GET.lists()):
        return json_error("malformed_request", "The URL may not contain NUL (%00) characters.", 400)
    return None


class ApiInputMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/") and (refusal := api_input_refusal(request)) is not None:
            return refusal
        return self.get_response(request)
