"""Logging filters named in settings.LOGGING (imported while logging is configured,
before the apps load: no Django models or DRF here)."""

from __future__ import annotations

import logging

# The request attribute config.api_errors.note_uncaught() sets on a request whose
# exception it has logged.
NOTED = "lectern_uncaught"


class SkipNotedRequests(logging.Filter):
    """Drops django.request's own record of an exception note_uncaught() already logged
    (with its error id): one traceback per bug, and no traceback per request while the
    database is down."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(getattr(record, "request", None), NOTED, None) is None
