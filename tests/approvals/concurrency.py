"""Two database sessions at once, in threads: one holds its transaction open at a point
the test chooses, the other is started and known to be waiting on it (Postgres says
so: pg_stat_activity), then the first commits. Never a sleep as the barrier."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections, transaction


class Session(threading.Thread):
    """Runs `work` on its own connection; keeps its result or exception and its pid."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.pid: int | None = None
        self.started_work = threading.Event()

    def run(self) -> None:
        try:
            connection.ensure_connection()
            self.pid = connection.connection.info.backend_pid
            self.started_work.set()
            self.result = self.work()
        except BaseException as exc:  # handed to the test
            self.error = exc
        finally:
            self.started_work.set()
            connections.close_all()

    def outcome(self, timeout: float = 30) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the session did not finish"
        if self.error is not None:
            raise self.error
        return self.result


class Holder(Session):
    """Runs `before` in a transaction, then holds it open (its locks kept) until
    release(), then runs `after` in the same transaction and commits."""

    def __init__(self, before: Callable[[], Any], after: Callable[[Any], Any] = lambda held: held) -> None:
        self.holding, self.go = threading.Event(), threading.Event()

        def work() -> Any:
            with transaction.atomic():
                held = before()
                self.holding.set()
                assert self.go.wait(30), "never released"
                return after(held)

        super().__init__(work)

    def hold(self) -> Holder:
        self.start()
        assert self.holding.wait(30) or self.error, "never reached the point to hold"
        if self.error is not None:
            raise self.error
        return self

    def release(self) -> Any:
        self.go.set()
        return self.outcome()


def waiting_on_a_lock(session: Session, timeout: float = 30) -> None:
    """Return once `session`'s backend waits on a lock (or fail)."""
    assert session.started_work.wait(timeout)
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [session.pid])
            row = cursor.fetchone()
            if row and row[0] == "Lock":
                return
            if not session.is_alive():
                raise AssertionError(f"the session finished without waiting: {session.error or session.result!r}")
            time.sleep(0.005)  # polling Postgres, not a barrier
    raise AssertionError("the session never waited on a lock")
