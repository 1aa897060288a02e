"""Delivering webhook events: each WebhookDelivery is attempted until its endpoint
answers 2xx or LECTERN_WEBHOOK_MAX_ATTEMPTS are spent, with exponential backoff and
jitter between attempts.

An attempt first claims its row with one conditional UPDATE (due, still pending: its
attempt count goes up and `next_attempt_at` moves past the attempt's longest possible
duration), so two workers never send one attempt; then it signs and POSTs outside any
transaction; then it records the answer, only if the row is still at its attempt. A
worker that dies mid-attempt leaves the row pending, due again when the claim ends:
delivery is at least once, and receivers tell repeats apart by `webhook-id`.

Each attempt goes out through catalog.outbound: the URL is resolved once and checked, and
the request goes to the address checked; an endpoint leading inside (loopback, private,
link-local, metadata; LECTERN_OUTBOUND_ALLOWED_NETWORKS lets networks through) is refused,
and the delivery fails at once, saying why (no retry would change it). Redirects are not
followed (a 3xx is a failed attempt): each hop would be a URL no one checked. Of the
answer's body only a short excerpt is kept, so an internal page is never shown whole.
"""

from __future__ import annotations

import logging
import random
import time
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
from catalog.outbound import client as outbound

logger = logging.getLogger(__name__)

RESPONSE_KEPT_CHARS = 200  # enough to tell a receiver's error; not enough to read an internal page
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
    refused: bool = False  # the URL leads where outbound requests may not go: nothing was sent

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(url: str, *, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST `body` to `url` once its address passed the outbound check; the endpoint's
    answer, or why there was none."""
    started = time.monotonic()

    def took() -> int:
        return round((time.monotonic() - started) * 1000)

    try:
        destination = outbound.destination_check(url)
        reply = outbound.post(destination, body=body, timeout=timeout, keep=RESPONSE_KEPT_CHARS * 4, headers={
            "Content-Type": "application/json", "User-Agent": USER_AGENT, **headers})
    except outbound.OutboundRefused as exc:
        return Answer(None, f"refused: {exc}", "", took(), refused=True)
    except (OSError, HTTPException, ValueError) as exc:  # no such name, timeouts, resets, bad answers
        return Answer(None, f"{type(exc).__name__}: {exc}", "", took())
    kept = _text(reply.excerpt)
    if 200 <= reply.status < 300:
        return Answer(reply.status, "", kept, took())
    moved = " (redirects are not followed)" if 300 <= reply.status < 400 else ""
    return Answer(reply.status, f"HTTP {reply.status}{moved}", kept, took())


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
    return _record(delivery, answer, now, final=answer.refused)


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
