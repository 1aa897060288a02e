"""Deciding several requests at once: one verdict and one comment, each request decided
by request_decide in a transaction of its own, so one refused (decided meanwhile by
another reviewer, four eyes, its content changed) leaves the others standing. Each
decision is checked, recorded and audited exactly as a single one is; the caller gets
an outcome per request, refused ones with the service's code and message."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import User

from approvals.models import COMMENT_MAX_CHARS, Decision
from approvals.services.decisions import request_decide
from approvals.services.errors import forbidden, invalid
from catalog.auth import is_reviewer
from catalog.errors import ApplicationError

BULK_MAX = 100


@dataclass(frozen=True)
class BulkOutcome:
    request_id: int
    decided: bool
    state: str = ""  # the request's state after the decision, when it was recorded
    code: str = ""  # why it was refused: the service's error code (request_decided, four_eyes, ...)
    message: str = ""


def requests_decide_bulk(*, request_ids: Iterable[int], reviewer: User, verdict: str, comment: str = "",
                         channel: str = Decision.Channel.WEB) -> list[BulkOutcome]:
    """`reviewer`'s `verdict` on each of `request_ids` (in the order given, each once).

    The reviewer's role, the verdict, the comment and the number of requests are checked
    once, before any is decided (403 not_reviewer, 400 invalid_input); what is refused
    for one request is reported in its outcome."""
    ids = list(dict.fromkeys(request_ids))
    if not is_reviewer(reviewer):
        raise forbidden("only a member of the reviewer group decides approval requests", code="not_reviewer")
    if verdict not in Decision.Verdict.values:
        raise invalid(f"verdict is approve or reject, not {verdict!r}")
    if len(comment) > COMMENT_MAX_CHARS:
        raise invalid(f"a comment has at most {COMMENT_MAX_CHARS} characters")
    if not ids:
        raise invalid("no request chosen")
    if len(ids) > BULK_MAX:
        raise invalid(f"at most {BULK_MAX} requests are decided at once, not {len(ids)}")
    return [_decide_one(request_id, reviewer, verdict, comment, channel) for request_id in ids]


def _decide_one(request_id: int, reviewer: User, verdict: str, comment: str, channel: str) -> BulkOutcome:
    try:
        request = request_decide(request_id=request_id, reviewer=reviewer, verdict=verdict, comment=comment,
                                 channel=channel)
    except ApplicationError as refused:
        return BulkOutcome(request_id, False, code=refused.code, message=refused.message)
    return BulkOutcome(request_id, True, state=request.state)
