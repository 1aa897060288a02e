"""Delivering webhook events: each WebhookDelivery is attempted until its endpoint
answers 2xx or LECTERN_WEBHOOK_MAX_ATTEMPTS are spent, with exponential backoff and
jitter between attempts.

An attempt first claims its row with one conditional UPDATE (due, still pending: its
attempt count goes up and `next_attempt_at` moves past the attempt's longest possible
duration), so two workers never send one attempt; then it signs and POSTs outside any
transaction; then it records the answer, only if the row is still at its attempt. A
worker that dies mid-attempt leaves the row pending, due again when the claim ends:
delivery is at least once, and receivers tell repeats apart by `webhook-id`. Redirects
are not followed (a 3xx is a failed attempt); the answer's body is kept truncated.
"""

from __future__ import annotations

import logging
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.client import HTTPException
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from approvals.channels.models import InboundWebhookMessage, WebhookDelivery
from approvals.channels.webhooks.sealing import SecretUnreadable, unseal
from approvals.channels.webhooks.signing import signed_headers

logger = logging.getLogger(__name__)

RESPONSE_KEPT_CHARS = 1000
ERROR_KEPT_CHARS = 500
SWEEP_BATCH = 100
INBOUND_IDS_KEPT = timedelta(days=1)  # far past the 5-minute tolerance after which a replay is stale anyway
USER_AGENT = "Lectern-Webhooks/1"


def backoff(attempt: int, *, base: float, cap: float, rand: Callable[[], float] | None = None) -> timedelta:
    """The wait after failed attempt number `attempt` (1, 2, ...): base x 2^(attempt-1),
    at most `cap`, of which the second half is random ("equal jitter"): never sooner
    than half the step, and endpoints that failed together do not retry in lockstep."""
    step = min(cap, base * 2 ** (attempt - 1))
    return timedelta(seconds=step / 2 + (rand or random.random)() * step / 2)


def claim_duration() -> timedelta:
    """Longer than any attempt can take (the timeout covers each socket operation)."""
    return timedelta(seconds=3 * settings.LECTERN_WEBHOOK_TIMEOUT_SECONDS + 30)


@dataclass(frozen=True)
class Answer:
    status_code: int | None
    error: str
    body: str
    ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx


_OPENER = urllib.request.build_opener(_NoRedirects)


def post(url: str, *, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST `body`; the endpoint's answer, or why there was none."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": USER_AGENT, **headers})
    started = time.monotonic()

    def took() -> int:
        return round((time.monotonic() - started) * 1000)

    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return Answer(response.status, "", _text(response.read(RESPONSE_KEPT_CHARS)), took())
    except urllib.error.HTTPError as exc:
        kept = _text(exc.read(RESPONSE_KEPT_CHARS)) if exc.fp is not None else ""
        moved = " (redirects are not followed)" if 300 <= exc.code < 400 else ""
        return Answer(exc.code, f"HTTP {exc.code}{moved}", kept, took())
    except urllib.error.URLError as exc:
        return Answer(None, f"{type(exc.reason).__name__}: {exc.reason}", "", took())
    except (OSError, HTTPException, ValueError) as exc:  # timeouts, resets, bad answers, an unusable URL
        return Answer(None, f"{type(exc).__name__}: {exc}", "", took())


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace("\x00", "")[:RESPONSE_KEPT_CHARS]


def delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> WebhookDelivery | None:
    """Attempt the delivery if it is due at `now` (default: the clock), sign and send it,
    record the answer; the delivery as recorded, or None when it was not claimed (not
    due, settled, or claimed by another worker)."""
    now = now or timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now,
    ).update(attempts=F("attempts") + 1, next_attempt_at=now + claim_duration(), last_attempt_at=now)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("event", "endpoint").get(pk=delivery_id)
    endpoint, event = delivery.endpoint, delivery.event
    if not endpoint.active:
        answer = Answer(None, "the endpoint is inactive: not sent", "", 0)
        return _record(delivery, answer, now, final=True)
    try:
        secret = unseal(endpoint.secret_sealed)
    except SecretUnreadable as exc:
        return _record(delivery, Answer(None, str(exc), "", 0), now)
    headers = signed_headers(secret=secret, message_id=event.message_id, at=now, body=event.body)
    answer = post(endpoint.url, body=event.body.encode("utf-8"), headers=headers,
                  timeout=settings.LECTERN_WEBHOOK_TIMEOUT_SECONDS)
    return _record(delivery, answer, now)


def _record(delivery: WebhookDelivery, answer: Answer, now: datetime, *, final: bool = False) -> WebhookDelivery:
    """Write the attempt's outcome, if the row is still at this attempt (a claim that
    ran out may have let another worker attempt it since)."""
    attempt = delivery.attempts
    fields: dict[str, Any] = {
        "last_status_code": answer.status_code, "last_error": answer.error[:ERROR_KEPT_CHARS],
        "last_response": answer.body, "history": [*delivery.history, {
            "attempt": attempt, "at": now.isoformat(), "status_code": answer.status_code,
            "error": answer.error[:ERROR_KEPT_CHARS], "ms": answer.ms}]}
    if answer.ok:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now, next_attempt_at=None)
    elif final or attempt >= settings.LECTERN_WEBHOOK_MAX_ATTEMPTS:
        fields.update(status=WebhookDelivery.Status.FAILED, next_attempt_at=None)
        logger.warning("webhook delivery %s of %s to endpoint %s failed for good after %d attempts: %s",
                       delivery.pk, delivery.event.type, delivery.endpoint_id, attempt, answer.error)
    else:
        fields["next_attempt_at"] = now + backoff(attempt, base=settings.LECTERN_WEBHOOK_BACKOFF_SECONDS,
                                                  cap=settings.LECTERN_WEBHOOK_BACKOFF_MAX_SECONDS)
        logger.info("webhook delivery %s attempt %d failed (%s); next at %s", delivery.pk, attempt, answer.error,
                    fields["next_attempt_at"].isoformat())
    WebhookDelivery.objects.filter(pk=delivery.pk, attempts=attempt, status=WebhookDelivery.Status.PENDING).update(
        **fields)
    delivery.refresh_from_db()
    return delivery


def deliveries_send_due(*, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
    """The periodic sweep: attempt up to `batch` deliveries due at `now` (retries, and
    first attempts whose queued task was lost); forget inbound message ids past their
    keeping. How many attempts it made."""
    now = now or timezone.now()
    InboundWebhookMessage.objects.filter(received_at__lt=now - INBOUND_IDS_KEPT).delete()
    due = list(WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
               .order_by("next_attempt_at").values_list("pk", flat=True)[:batch])
    return sum(delivery_attempt(delivery_id=pk, now=now) is not None for pk in due)
