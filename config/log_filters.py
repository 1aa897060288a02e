"""Logging filters named in settings.LOGGING (imported while logging is configured,
before the apps load: no Django models or DRF here)."""

from __future__ import annotations

import logging
import re

# The request attribute config.api_errors.note_uncaught() sets on a request whose
# exception it has logged.
NOTED = "lectern_uncaught"
# The attribute, true, of an exception logged in one line where it was raised (the web
# worker's BodyTimedOut: a client too slow to send its body, config/gunicorn_worker.py).
LOGGED = "lectern_logged"


class SkipNotedRequests(logging.Filter):
    """Drops django.request's own record of an exception note_uncaught() already logged
    (with its error id): one traceback per bug, and no traceback per request while the
    database is down; and its record of an exception marked LOGGED: no traceback per
    slow client."""

    def filter(self, record: logging.LogRecord) -> bool:
        exception = record.exc_info[1] if record.exc_info else None
        return getattr(getattr(record, "request", None), NOTED, None) is None and not getattr(exception, LOGGED, False)


class DropQueryStrings(logging.Filter):
    """Request lines logged without their query string (runserver's django.server
    records): a query may carry what must not sit in logs, an end user's id
    (`/api/v1/memory?user_id=...`) or what they searched for. gunicorn's access log
    leaves it out by its format (config/gunicorn.conf.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "?" in message:
            record.msg, record.args = _QUERY.sub(r"\1", message), ()
        return True


_QUERY = re.compile(r'(\S)\?[^\s"]*')
