"""A real HTTP receiver on 127.0.0.1 (an ephemeral port), in a thread: it records every
request and answers each with the next status it was given (then 200). With a secret,
it verifies each request as a consumer would, with the standardwebhooks package, and
answers 401 to one that fails; and, as an external review system would, it answers an
`approval.requested` event with a decision signed for that request and its content
(`decision_for`)."""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool | None  # None: no secret to verify with


class Receiver:
    def __init__(self, *, answers: tuple[int, ...] = (), secret: str | None = None,
                 redirect_to: str | None = None) -> None:
        self.answers = deque(answers)
        self.secret = secret
        self.redirect_to = redirect_to
        self.received: list[Received] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver._answer(self, Received(self.path, headers, body, receiver._verify(headers, body)))

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def _verify(self, headers: dict[str, str], body: bytes) -> bool | None:
        if self.secret is None:
            return None
        try:
            Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            return False
        return True

    def _answer(self, handler: BaseHTTPRequestHandler, received: Received) -> None:
        with self._changed:
            status = 401 if received.verified is False else (self.answers.popleft() if self.answers else 200)
            self.received.append(received)
            self._changed.notify_all()
        if self.redirect_to is not None:
            status = 307
        handler.send_response(status)
        if self.redirect_to is not None:
            handler.send_header("Location", self.redirect_to)
        reply = f"answer {status} " + "x" * 5000  # longer than what a delivery keeps
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply.encode())

    def decision_for(self, event: Received, *, verdict: str, reviewer: str, message_id: str, comment: str = "",
                     at: datetime | None = None) -> tuple[str, str, dict[str, str]]:
        """(path, body, headers) of the decision on the request `event` announced, signed
        with the receiver's secret: the body names the request and the content (its
        fingerprint) the reviewer decided, as Lectern requires."""
        assert self.secret is not None, "a decision is signed with the endpoint's secret"
        data: dict[str, Any] = Webhook(self.secret).verify(event.body, event.headers)["data"]
        body = json.dumps({"request_id": data["request_id"], "fingerprint": data["fingerprint"], "verdict": verdict,
                           "reviewer": reviewer, "comment": comment})
        webhook = Webhook(self.secret)
        sent_at = at or datetime.now(tz=UTC)
        headers = {"webhook-id": message_id, "webhook-timestamp": str(int(sent_at.timestamp())),
                   "webhook-signature": webhook.sign(message_id, sent_at, body)}
        return data["decision_path"], body, headers

    def wait_for(self, count: int, timeout: float = 10) -> list[Received]:
        """The first `count` requests, once that many arrived (never a fixed sleep)."""
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.received) >= count, timeout), \
                f"{len(self.received)} requests arrived, {count} expected"
            return list(self.received[:count])

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
