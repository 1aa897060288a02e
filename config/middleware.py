"""Refuse oversized API bodies before any parser reads them (DRF reads the raw stream,
bypassing Django's DATA_UPLOAD_MAX_MEMORY_SIZE check)."""

from __future__ import annotations

from django.conf import settings

from config.api_errors import json_error


class ApiBodyLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return json_error("malformed_request", "Content-Length is not a number.", 400)
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if length > limit:
                return json_error("payload_too_large", f"Request body over {limit} bytes.", 413)
        return self.get_response(request)
